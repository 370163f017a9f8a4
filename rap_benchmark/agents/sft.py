"""The paper's SFT data from a teacher's trajectories, and its validation gate.

Export: for every teacher unit with at least one executed Search call, keep the system and user
prompts, the Search actions (tool calls) and their exact observations, drop hidden reasoning and
assistant text on tool-call turns, drop the teacher's terminal prediction and end with an
assistant message holding the realised target y in the answer format. One chat-format JSON object
per line (``{"messages": [...], "tools": [...], "meta": {...}}``), the layout standard trainers
(TRL's SFTTrainer, axolotl's chat_template datasets) read.

Gate: a candidate (fine-tuned) run must show, against the base model on the same cells,
a pooled Forecast Spearman gain >= 0.03, a non-negative gain under each evidence regime, full
validity, non-zero Search use and a query-unique ratio >= 0.80.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from rap_benchmark.agents.diagnostics import episodes_by_cell, native_records, query_key
from rap_benchmark.agents.prompts import format_answer
from rap_benchmark.agents.store import RunStore, UnitKey
from rap_benchmark.core.dates import parse_date
from rap_benchmark.core.errors import InputError
from rap_benchmark.core.fsio import atomic_open
from rap_benchmark.core.records import DIRECTION_KEYS, Condition, Policy
from rap_benchmark.core.serial import Record

if TYPE_CHECKING:
    from rap_benchmark.core.artifacts import Instance

GATE_MIN_POOLED_GAIN = 0.03
GATE_MIN_QUERY_UNIQUE = 0.80
SFT_DECIMALS = 3  # target percentages are printed to 0.001 points
SEARCH_FORECAST = (Condition.A1, Condition.A3)
"""The conditions SFT reads: Forecast (the answer is scored against y) with Search (a regime)."""
EXPORT_USE = "an SFT example is a teacher's Search trajectory ending in the realised next-window composition y"
GATE_USE = "the gate measures the Forecast Spearman gain (answers against y) under each Search regime"
"""Why :func:`export_sft` and :func:`sft_gate` take only :data:`SEARCH_FORECAST` (their refusals say it)."""


def search_forecast(conditions: Iterable[Condition | str], why: str) -> set[Condition]:
    """The conditions, each checked to be a Forecast condition with Search (A1, A3); any other is
    refused (:class:`InputError`) with ``why`` it cannot be used."""
    conds = {Condition(c) for c in conditions}
    wrong = sorted(c for c in conds if c not in SEARCH_FORECAST)
    if wrong:
        named = "; ".join(
            f"{c.value} is closed-book (no Search)"
            if c.regime is None
            else f"{c.value} is a State condition (its answer reconstructs x, not y)"
            for c in wrong
        )
        raise InputError(f"{named}: {why}; give A1 and/or A3 (Forecast with Search)")
    return conds


def sft_example(record: dict[str, Any], target: Iterable[float], tool_schema: dict[str, Any] | None) -> dict[str, Any]:
    """One training conversation from a teacher unit, ending in the realised target."""
    messages: list[dict[str, Any]] = []
    for m in record["messages"]:
        role = m["role"]
        if role in ("system", "user"):
            messages.append({"role": role, "content": m["content"]})
        elif role == "assistant" and m.get("tool_calls"):
            messages.append({"role": "assistant", "content": None, "tool_calls": m["tool_calls"]})
        elif role == "tool":
            messages.append({"role": "tool", "tool_call_id": m["tool_call_id"], "content": m["content"]})
        # assistant text turns (answers, nudged drafts) are the teacher's predictions: dropped
    while messages and messages[-1]["role"] == "user" and len(messages) > 2:
        messages.pop()  # a trailing nudge addressed a dropped text turn
    messages.append({"role": "assistant", "content": format_answer(list(target), decimals=SFT_DECIMALS)})
    key = record["key"]
    out: dict[str, Any] = {"messages": messages, "meta": {**key, "teacher_calls": len(record.get("search_calls", []))}}
    if tool_schema is not None:
        out["tools"] = [tool_schema]
    return out


def export_sft(
    inst: Instance,
    store: RunStore,
    out: str | Path,
    *,
    conditions: Iterable[Condition] = SEARCH_FORECAST,
    fields: Iterable[str] | None = None,
    origins: Iterable[str] | None = None,
    policy: Policy = Policy.CANONICAL,
) -> dict[str, int]:
    """Write the SFT JSONL; return counts (written, skipped without Search, skipped without y)."""
    from rap_benchmark.tools import tool_schema

    conditions = search_forecast(conditions, EXPORT_USE)
    fields_s = set(fields) if fields is not None else None
    origins_s = {parse_date(o).isoformat() for o in origins} if origins is not None else None
    y_of = {cell: r.y for cell, r in episodes_by_cell(inst.episodes, policy).items()}
    schema = _schema(inst, tool_schema)
    counts = {"written": 0, "no_search": 0, "no_target": 0}
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_open(path) as fh:
        for rec in native_records(store, conditions=conditions):
            key = UnitKey.from_dict(rec["key"])
            if (fields_s is not None and key.field_id not in fields_s) or (
                origins_s is not None and key.origin not in origins_s
            ):
                continue
            if not any(c.get("error") is None for c in rec.get("search_calls", [])):
                counts["no_search"] += 1
                continue
            y = y_of.get((key.field_id, key.origin))
            if y is None:
                counts["no_target"] += 1
                continue
            fh.write(json.dumps(sft_example(rec, y, schema), ensure_ascii=False, sort_keys=True) + "\n")
            counts["written"] += 1
    return counts


def _schema(inst: Instance, tool_schema: Any) -> dict[str, Any] | None:
    """The Search tool's schema for the instance (from any field/origin: the text is universe-free
    apart from the regime sentence, so the fixed one is used)."""
    from rap_benchmark.agents.runner import SearchTools
    from rap_benchmark.core.records import Regime

    return SearchTools(inst.public_view()).bind(inst.field_ids[0], inst.spec.origins[0], Regime.FIXED)[1]


@dataclass(frozen=True)
class GateResult(Record):
    passed: bool
    pooled_gain: float
    gain_by_regime: dict[str, float]
    validity: float
    mean_search_calls: float
    query_unique_ratio: float
    n_cells: int
    checks: dict[str, bool]


def _scores(
    inst: Instance, store: RunStore, conditions: set[Condition], policy: Policy
) -> dict[tuple[str, str, str], float]:
    from rap_benchmark.evaluation.scoring import spearman

    y_of = {cell: r.y for cell, r in episodes_by_cell(inst.episodes, policy).items()}
    out = {}
    for rec in native_records(store, conditions=conditions):
        key = rec["key"]
        y = y_of.get((key["field_id"], key["origin"]))
        if y is None:
            continue
        rho = float("nan")
        if rec.get("valid"):
            p = np.asarray(rec["weights"], dtype=np.float64)[None, :]
            rho = float(spearman(p, np.asarray(y, np.float64)[None, :])[0])
        out[(key["condition"], key["field_id"], key["origin"])] = rho
    return out


def sft_gate(
    inst: Instance,
    candidate: RunStore,
    base: RunStore,
    *,
    conditions: Iterable[Condition] = SEARCH_FORECAST,
    policy: Policy = Policy.CANONICAL,
) -> GateResult:
    """The validation gate on the cells both runs share (paired, differenced before aggregation)."""
    from rap_benchmark.evaluation.scoring import field_macro

    conds = search_forecast(conditions, GATE_USE)
    cand = _scores(inst, candidate, conds, policy)
    ref = _scores(inst, base, conds, policy)
    shared = sorted(set(cand) & set(ref))
    diffs = np.array([cand[k] - ref[k] for k in shared], dtype=np.float64)
    fids = np.array([k[1] for k in shared], dtype=object)
    regimes = np.array([Condition(k[0]).regime.value for k in shared], dtype=object)
    pooled = field_macro(diffs, fids) if shared else float("nan")
    by_regime = {r: field_macro(diffs[regimes == r], fids[regimes == r]) for r in sorted(set(regimes))}
    cells = set(shared)
    recs = [
        r
        for r in native_records(candidate, conditions=conds)
        if (r["key"]["condition"], r["key"]["field_id"], r["key"]["origin"]) in cells
    ]
    validity = float(np.mean([bool(r.get("valid")) for r in recs])) if recs else 0.0
    n_calls = [len(r.get("search_calls", [])) for r in recs]
    queries = [[query_key(c) for c in r.get("search_calls", [])] for r in recs]
    n_queries = sum(map(len, queries))
    unique_ratio = sum(len(set(q)) for q in queries) / n_queries if n_queries else 0.0
    checks = {
        "pooled_gain": bool(pooled >= GATE_MIN_POOLED_GAIN),
        "non_negative_gain_per_regime": bool(by_regime) and all(v >= 0 for v in by_regime.values()),
        "full_validity": validity == 1.0,
        "search_use": bool(n_calls) and float(np.mean(n_calls)) > 0,
        "query_unique_ratio": unique_ratio >= GATE_MIN_QUERY_UNIQUE,
    }
    return GateResult(
        passed=all(checks.values()),
        pooled_gain=float(pooled),
        gain_by_regime={k: float(v) for k, v in by_regime.items()},
        validity=validity,
        mean_search_calls=float(np.mean(n_calls)) if n_calls else 0.0,
        query_unique_ratio=float(unique_ratio),
        n_cells=len(shared),
        checks=checks,
    )


__all__ = [
    "DIRECTION_KEYS",
    "SEARCH_FORECAST",
    "GateResult",
    "export_sft",
    "search_forecast",
    "sft_example",
    "sft_gate",
]
