"""``rap audit`` prints its intervals with the report's ``fmt_interval``, as every CLI command does."""

from __future__ import annotations

from types import SimpleNamespace

from rap_benchmark.cli.audit import _print_estimates, estimate_text

NAN = float("nan")


def test_audit_intervals_read_as_the_reports(capsys) -> None:
    """Regression: rap audit formatted its intervals by hand: a missing estimate read ``nan [nan, nan]``,
    missing bounds ``0.500 [nan, nan]``, and the paired change of ``rap audit parallel`` was unsigned
    (``-0.004 [-0.024, 0.014]``) where the report and ``rap demo`` sign a change."""
    estimates = {
        "agree": SimpleNamespace(estimate=0.5, lo=1 / 3, hi=2 / 3, n=6),
        "nothing": SimpleNamespace(estimate=NAN, lo=NAN, hi=NAN, n=0),
        "no_bounds": SimpleNamespace(estimate=0.5, lo=NAN, hi=None, n=1),
    }
    assert set(_print_estimates(estimates)) == set(estimates)
    printed = [line.split(None, 1) for line in capsys.readouterr().out.splitlines()]
    assert printed == [
        ["agree", "0.500 [0.333, 0.667]  (n=6)"],
        ["nothing", "undefined  (n=0)"],
        ["no_bounds", "0.500  (n=1)"],
    ]
    change = SimpleNamespace(estimate=-0.004, lo=-0.024, hi=0.014)
    assert estimate_text(change, signed=True) == "-0.004 [-0.024, +0.014]"
    assert estimate_text(change) == "-0.004 [-0.024, 0.014]"
