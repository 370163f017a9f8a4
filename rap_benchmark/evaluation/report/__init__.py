"""The report people read: tables (CSV + markdown), PNG figures and one self-contained HTML page.

``build`` validates, scores and writes the whole report folder; ``tables`` computes the tables
and writes them as CSV and markdown; ``plots`` draws the figures; ``html`` renders the page.
"""

from rap_benchmark.evaluation.report.build import ReportResult, build_report
from rap_benchmark.evaluation.report.tables import closing_note, compute_tables, write_tables

__all__ = ["ReportResult", "build_report", "closing_note", "compute_tables", "write_tables"]
