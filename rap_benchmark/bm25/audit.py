"""Search-trace audit: re-execute recorded Search calls and report every one that differs.

Recorded-call file format (JSON lines, one call per line, UTF-8)::

    {"field_id": "F003", "origin": "2025-01-01", "regime": "fixed", "query": "graph neural",
     "start": null, "end": "2024-11-30", "result_ids": ["2411.00012", ...], "total_hits": 57}

``start``/``end`` are the call's optional narrowing dates (``end`` inclusive) or null.
A call passes when the re-executed ids, their order and ``total_hits`` are all identical.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rap_benchmark.bm25.engine import SearchEngine
from rap_benchmark.core.dates import parse_date
from rap_benchmark.core.records import Regime, SearchCall
from rap_benchmark.core.serial import from_dict, read_jsonl

CALL_KEYS = ("field_id", "origin", "regime", "query", "start", "end", "result_ids", "total_hits")


def call_from_dict(data: Mapping[str, Any]) -> SearchCall:
    """Parse one recorded call; unknown or missing keys are errors. A null or empty narrowing
    date means absent, as it does for the tool."""
    unknown = sorted(set(data) - set(CALL_KEYS))
    missing = sorted(set(CALL_KEYS) - set(data))
    if unknown or missing:
        raise ValueError(f"recorded call: unknown keys {unknown}, missing keys {missing}")
    blank = {k: None for k in ("start", "end") if isinstance(data[k], str) and not data[k].strip()}
    return from_dict(SearchCall, {**data, **blank})


def read_calls(path: str | Path) -> list[SearchCall]:
    """Read a recorded-call JSONL file (blank lines ignored); a bad line raises FileFormatError naming it."""
    return list(read_jsonl(path, call_from_dict))


def record_call(
    engine: SearchEngine,
    field_id: str,
    origin: str,
    regime: Regime | str,
    query: str,
    *,
    start: str | None = None,
    end: str | None = None,
) -> SearchCall:
    """Execute one call and return its record (what the runner logs)."""
    result = engine.ranked(field_id, origin, regime, query, start=start, end=end)
    return SearchCall(
        field_id=field_id,
        origin=parse_date(origin),
        regime=Regime(regime),
        query=query,
        start=None if start is None else parse_date(start),
        end=None if end is None else parse_date(end),
        result_ids=tuple(result.ids),
        total_hits=result.total_hits,
    )


@dataclass(frozen=True, slots=True)
class AuditMismatch:
    """One recorded call whose re-execution differs; ``problems`` names what differs:
    ``ids`` (a different set of papers), ``order`` (same papers, other order), ``total``."""

    index: int  # position of the call in the audited sequence
    call: SearchCall
    got_ids: tuple[str, ...]
    got_total: int
    problems: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class AuditReport:
    n_calls: int
    mismatches: tuple[AuditMismatch, ...]

    @property
    def ok(self) -> bool:
        return not self.mismatches

    def summary(self) -> str:
        lines = [f"audited {self.n_calls} calls: {self.n_calls - len(self.mismatches)} reproduced exactly, "
                 f"{len(self.mismatches)} differ"]  # fmt: skip
        for m in self.mismatches[:50]:
            c = m.call
            lines.append(
                f"  #{m.index} {c.field_id}@{c.origin.isoformat()}/{c.regime.value} {c.query!r}: "
                f"{', '.join(m.problems)} (recorded {len(c.result_ids)} ids/{c.total_hits} hits, "
                f"got {len(m.got_ids)} ids/{m.got_total} hits)"
            )
        if len(self.mismatches) > 50:
            lines.append(f"  ... and {len(self.mismatches) - 50} more")
        return "\n".join(lines)


def audit_calls(
    engine: SearchEngine, calls: Iterable[SearchCall | Mapping[str, Any]], *, progress: bool = False
) -> AuditReport:
    """Re-execute every call under its native arguments and compare ids, order and total."""
    from tqdm import tqdm

    mismatches = []
    n = 0
    for i, raw in enumerate(tqdm(calls, desc="audit", unit="call", disable=not progress)):
        call = raw if isinstance(raw, SearchCall) else call_from_dict(raw)
        got = engine.ranked(call.field_id, call.origin, call.regime, call.query, start=call.start, end=call.end)
        n += 1
        got_ids = tuple(got.ids)
        problems = []
        if got_ids != call.result_ids:
            problems.append("order" if sorted(got_ids) == sorted(call.result_ids) else "ids")
        if got.total_hits != call.total_hits:
            problems.append("total")
        if problems:
            mismatches.append(AuditMismatch(i, call, got_ids, got.total_hits, tuple(problems)))
    return AuditReport(n_calls=n, mismatches=tuple(mismatches))
