"""Exact, fast restricted-universe BM25 search (the paper's Search environment) and the Search tool.

Public API:

* :class:`BM25Index` / :class:`RankedResult`: a generic exact BM25 (Lucene) index over dated
  documents; any date slice is searched as if indexed alone.
* :class:`SearchEngine`: every (field, origin, regime) universe of an instance.
* :mod:`rap_benchmark.bm25.tool`: ``make_search_tool``,
  ``observation_to_dict``, ``observation_json`` (the agent-facing tool).
* :mod:`rap_benchmark.bm25.audit`: recorded-call files and ``audit_calls``.
"""

from rap_benchmark.bm25.audit import AuditMismatch, AuditReport, audit_calls, read_calls
from rap_benchmark.bm25.engine import SearchEngine
from rap_benchmark.bm25.index import BM25Index, RankedResult
from rap_benchmark.bm25.tool import make_search_tool, observation_json, observation_to_dict
from rap_benchmark.core.sums import shard_hash

__all__ = [
    "AuditMismatch",
    "AuditReport",
    "BM25Index",
    "RankedResult",
    "SearchEngine",
    "audit_calls",
    "make_search_tool",
    "observation_json",
    "observation_to_dict",
    "read_calls",
    "shard_hash",
]
