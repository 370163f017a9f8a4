"""The paper's agent diagnostics: replay, oracle input, search-trace audit, trace statistics.

* **Replay**: a trajectory's ordered Search calls (exact argument text) and exact observations,
  nothing else, serialised byte-identically; fresh Forecast and State readouts on that evidence
  through the same loop without tools.
* **Oracle input**: exact pre-T direction counts from the frozen instrument (recent window;
  three-window history; history + Search over the expanding universe). Never future counts.
* **Search-trace audit**: re-execute every recorded call under its native options (ids, order and
  total must reproduce exactly) and under the common recent-window option ([T-6mo, T)), and map
  the returned ids through the assignments to the composition of what the agent saw.
* **Trace statistics**: calls, distinct papers, duplicates, query-unique ratio, overlap between
  paired (Forecast, State) trajectories truncated to their shared call count, and the dates and
  directions of the returned papers.

Building prompts uses the episode table without its target columns. The audit and statistics
are analyses, like scoring: they compare what agents saw with x and y.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from rap_benchmark.agents import prompts
from rap_benchmark.agents.runner import UnitSpec
from rap_benchmark.agents.store import RunStore, UnitKey
from rap_benchmark.core.dates import add_months, parse_date
from rap_benchmark.core.errors import InputError
from rap_benchmark.core.records import DIRECTION_KEYS, Condition, Policy, Regime, Task, parse_enum

if TYPE_CHECKING:
    from rap_benchmark.core.artifacts import Instance

REPLAY_VARIANTS = ("replay-forecast", "replay-state")
ORACLE_VARIANTS = ("oracle-recent", "oracle-history", "oracle-history-search")


def episodes_by_cell(episodes: pd.DataFrame, policy: Policy) -> dict[tuple[str, str], Any]:
    """The episode rows of ``policy`` by (field_id, ISO origin)."""
    eps = episodes[episodes["policy"] == parse_enum(Policy, policy).value]
    return {(str(r.field_id), parse_date(r.origin).isoformat()): r for r in eps.itertuples(index=False)}


def query_key(call: dict[str, Any]) -> tuple[Any, Any, Any]:
    """What makes two Search calls the same query: the text and the date range."""
    return call.get("query"), call.get("start_date"), call.get("end_date")


def native_records(store: RunStore, *, conditions: Iterable[Condition] | None = None) -> list[dict[str, Any]]:
    wanted = {Condition(c) for c in conditions} if conditions is not None else set(Condition)
    out = []
    for rec in store.iter_units():
        key = UnitKey.from_dict(rec["key"])
        if key.variant == "native" and key.condition in wanted:
            out.append(rec)
    return out


# -- replay ------------------------------------------------------------------------------------


def serialise_evidence(record: dict[str, Any]) -> str:
    """The ordered Search calls (exact argument text) and exact observations of a unit.

    Only tool-call arguments and tool messages are read, so the result is byte-identical for the
    same calls and observations whatever the surrounding conversation.
    """
    observations = {m.get("tool_call_id"): m.get("content") for m in record["messages"] if m.get("role") == "tool"}
    blocks = []
    for i, call in enumerate(record.get("search_calls", []), 1):
        obs = observations.get(call.get("tool_call_id"), "")
        blocks.append(f"[call {i}] search {call['arguments']}\n[observation {i}] {obs}")
    return "\n\n".join(blocks)


def readout_condition(source: Condition, task: Task) -> Condition:
    """The condition whose (task, regime) a readout matches: A1/A2 for fixed, A3/A4 for expanding."""
    regime = Condition(source).regime
    if regime is Regime.FIXED:
        return Condition.A1 if task is Task.FORECAST else Condition.A2
    return Condition.A3 if task is Task.FORECAST else Condition.A4


def replay_units(inst: Instance, store: RunStore, model: str, *, conditions: Sequence[Condition]) -> list[UnitSpec]:
    """Forecast and State readout units for every source trajectory with at least one Search call."""
    spec = inst.spec
    units = []
    for rec in native_records(store, conditions=conditions):
        key = UnitKey.from_dict(rec["key"])
        if not rec.get("search_calls") or key.condition.regime is None:
            continue
        evidence = prompts.fill("replay_evidence", trace=serialise_evidence(rec))
        cb = inst.codebooks[key.field_id]
        for variant, task in zip(REPLAY_VARIANTS, (Task.FORECAST, Task.STATE), strict=True):
            prompt = prompts.task_prompt(cb, key.origin, task, spec, evidence=evidence)
            unit_key = UnitKey(model, key.field_id, key.origin, key.condition, variant)
            units.append(UnitSpec.of(unit_key, task, cb, spec, prompt, closed_book=True))
    return units


# -- oracle input --------------------------------------------------------------------------------


def _counts_lines(codebook: Any, counts: Sequence[float]) -> str:
    return "\n".join(f"  {d.key} ({d.name}): {float(c):g}" for d, c in zip(codebook.directions, counts, strict=True))


def oracle_units(
    inst: Instance,
    model: str,
    cells: Sequence[tuple[str, str]],
    *,
    variants: Sequence[str] = ORACLE_VARIANTS,
    policy: Policy = Policy.CANONICAL,
) -> list[UnitSpec]:
    """Forecast units whose prompt carries exact pre-T counts (never y)."""
    spec = inst.spec
    by_cell = episodes_by_cell(inst.public_view().episodes, policy)
    units = []
    for variant in variants:
        if variant not in ORACLE_VARIANTS:
            raise InputError(f"unknown oracle variant {variant!r} (expected one of: {', '.join(ORACLE_VARIANTS)})")
        condition = Condition.A3 if variant == "oracle-history-search" else Condition.A0
        for field_id, origin in cells:
            row = by_cell[(field_id, origin)]
            cb = inst.codebooks[field_id]
            t = parse_date(origin)
            windows = [add_months(t, -spec.window_months * (3 - i)) for i in range(3)]
            hist = "\n".join(
                f"Window {i + 1} [{w.isoformat()}, {add_months(w, spec.window_months).isoformat()}):\n"
                + _counts_lines(cb, row.history_counts[i])
                for i, w in enumerate(windows)
            )
            values = {
                "origin": origin,
                "w3_start": windows[-1].isoformat(),
                "recent_counts": _counts_lines(cb, row.x_counts),
                "history_counts": hist,
                "top_k": spec.top_k,
                "max_calls": spec.max_search_calls,
            }
            evidence = prompts.fill(variant.replace("-", "_"), **values)  # each template takes the values it names
            prompt = prompts.task_prompt(cb, t, Task.FORECAST, spec, evidence=evidence)
            key = UnitKey(model, field_id, origin, condition, variant)
            units.append(UnitSpec.of(key, Task.FORECAST, cb, spec, prompt))
    return units


# -- search-trace audit and statistics ----------------------------------------------------------


def _primary_lookup(inst: Instance) -> dict[tuple[str, str], int]:
    a = inst.assignments
    prim = a["primary"].map({k: i for i, k in enumerate(DIRECTION_KEYS)})
    ok = prim.notna()
    cells = zip(a.loc[ok, "field_id"].astype(str), a.loc[ok, "arxiv_id"].astype(str), strict=True)
    return dict(zip(cells, prim[ok].astype(int), strict=True))


def _composition(field_id: str, ids: Iterable[str], lookup: dict[tuple[str, str], int]) -> np.ndarray:
    counts = np.zeros(len(DIRECTION_KEYS))
    for pid in dict.fromkeys(ids):
        d = lookup.get((field_id, pid))
        if d is not None:
            counts[d] += 1
    total = counts.sum()
    return counts / total if total > 0 else np.full(len(DIRECTION_KEYS), np.nan)


def recorded_calls(record: dict[str, Any]) -> list[dict[str, Any]]:
    """A unit's executed Search calls in the search audit's recorded-call format (``end`` inclusive)."""
    key = record["key"]
    regime = record.get("regime")
    out = []
    for c in record.get("search_calls", []):
        if c.get("error") is not None or regime is None:
            continue
        out.append(
            {
                "field_id": key["field_id"],
                "origin": key["origin"],
                "regime": regime,
                "query": c["query"],
                "start": c.get("start_date"),
                "end": c.get("end_date"),
                "result_ids": list(c["result_ids"]),
                "total_hits": int(c["total_hits"]),
            }
        )
    return out


def _cell(key: dict[str, Any]) -> dict[str, Any]:
    """The cell columns of a table row, from a stored unit key."""
    return {k: key[k] for k in ("model", "condition", "field_id", "origin")}


def _rho(a: np.ndarray, b: Any) -> float:
    from rap_benchmark.evaluation.scoring import spearman

    if b is None or np.isnan(a).any():
        return float("nan")
    return float(spearman(a[None, :], np.asarray(b, dtype=np.float64)[None, :])[0])


def trace_audit(
    inst: Instance, store: RunStore, *, engine: Any = None, policy: Policy = Policy.CANONICAL, progress: bool = False
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Re-execute every recorded call natively and under the recent-window option.

    Returns one row per unit (composition of what was seen natively and under the recent
    window, its Spearman with x and y) and a summary with the exact-reproduction check.
    """
    from rap_benchmark.bm25 import SearchEngine, audit_calls

    engine = engine or SearchEngine.from_instance(inst)
    lookup = _primary_lookup(inst)
    truth = episodes_by_cell(inst.episodes, policy)
    rows = []
    all_calls: list[dict[str, Any]] = []
    for rec in native_records(store):
        calls = recorded_calls(rec)
        if not calls:
            continue
        all_calls.extend(calls)
        key = rec["key"]
        t = parse_date(key["origin"])
        recent_start = add_months(t, -inst.spec.window_months)
        native_ids = [i for c in calls for i in c["result_ids"]]
        recent_ids = [
            i
            for c in calls
            for i in engine.ranked(c["field_id"], c["origin"], c["regime"], c["query"], start=recent_start).ids
        ]
        ep = truth.get((key["field_id"], key["origin"]))
        x, y = (ep.x, ep.y) if ep is not None else (None, None)
        row = _cell(key)
        for option, ids in (("native", native_ids), ("recent", recent_ids)):
            comp = _composition(key["field_id"], ids, lookup)
            row[f"{option}_rho_x"] = _rho(comp, x)
            row[f"{option}_rho_y"] = _rho(comp, y)
            row[f"{option}_composition"] = [float(v) for v in comp]
        rows.append(row)
    report = audit_calls(engine, all_calls, progress=progress)
    table = pd.DataFrame(rows)
    summary: dict[str, Any] = {
        "n_calls": report.n_calls,
        "n_reproduced": report.n_calls - len(report.mismatches),
        "exact": report.ok,
        "mismatches": report.summary() if not report.ok else "",
    }
    if not table.empty:
        from rap_benchmark.evaluation.scoring import field_macro

        by = {}
        for (model, cond), g in table.groupby(["model", "condition"]):
            fids = g["field_id"].to_numpy()
            by[f"{model}|{cond}"] = {
                col: field_macro(g[col].to_numpy(np.float64), fids)
                for col in ("native_rho_x", "native_rho_y", "recent_rho_x", "recent_rho_y")
            }
        summary["by_model_condition"] = by
    return table, summary


def _jaccard(a: set[str], b: set[str]) -> float:
    return len(a & b) / len(a | b) if a | b else float("nan")


def trace_stats(
    inst: Instance, store: RunStore, *, policy: Policy = Policy.CANONICAL
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per-unit trace statistics and per-pair overlap (A1 vs A2, A3 vs A4) tables."""
    lookup = _primary_lookup(inst)
    dates = dict(zip(inst.papers["arxiv_id"].astype(str), inst.papers["date"].astype(str), strict=True))
    rows = []
    seen: dict[tuple[str, str, str, str], list[list[str]]] = {}
    for rec in native_records(store):
        key = rec["key"]
        calls = rec.get("search_calls", [])
        ids = [i for c in calls for i in c.get("result_ids", [])]
        distinct = list(dict.fromkeys(ids))
        queries = [query_key(c) for c in calls]
        t = parse_date(key["origin"])
        recent = add_months(t, -inst.spec.window_months)
        pdates = [parse_date(dates[i]) for i in distinct if i in dates]
        comp = _composition(key["field_id"], distinct, lookup)
        rows.append(
            {
                **_cell(key),
                "n_calls": len(calls),
                "n_errors": sum(1 for c in calls if c.get("error")),
                "n_results": len(ids),
                "n_distinct": len(distinct),
                "n_duplicates": len(ids) - len(distinct),
                "query_unique_ratio": len(set(queries)) / len(queries) if queries else float("nan"),
                "recent_share": float(np.mean([d >= recent for d in pdates])) if pdates else float("nan"),
                "mean_age_days": float(np.mean([(t - d).days for d in pdates])) if pdates else float("nan"),
                "composition": [float(v) for v in comp],
            }
        )
        seen[(key["model"], key["field_id"], key["origin"], key["condition"])] = [
            list(c.get("result_ids", [])) for c in calls
        ]
    pairs = []
    for (model, fid, origin, cond), f_calls in sorted(seen.items()):
        partner = {"A1": "A2", "A3": "A4"}.get(cond)
        s_calls = seen.get((model, fid, origin, partner)) if partner else None
        if s_calls is None:
            continue
        n = min(len(f_calls), len(s_calls))
        f_set = {i for c in f_calls[:n] for i in c}
        s_set = {i for c in s_calls[:n] for i in c}
        pairs.append(
            {
                "model": model,
                "field_id": fid,
                "origin": origin,
                "forecast": cond,
                "state": partner,
                "shared_calls": n,
                "forecast_distinct": len(f_set),
                "state_distinct": len(s_set),
                "jaccard": _jaccard(f_set, s_set),
            }
        )
    return pd.DataFrame(rows), pd.DataFrame(pairs)


def agreement(native: pd.DataFrame, other: pd.DataFrame) -> float:
    """Field-macro Spearman between two prediction frames on their shared valid cells."""
    from rap_benchmark.evaluation.scoring import field_macro, spearman

    cols = list(DIRECTION_KEYS)
    m = native.merge(other, on=["field_id", "origin"], suffixes=("_a", "_b"))
    m = m[m["valid_a"].astype(bool) & m["valid_b"].astype(bool)]
    if m.empty:
        return float("nan")
    a = m[[f"{c}_a" for c in cols]].to_numpy(np.float64)
    b = m[[f"{c}_b" for c in cols]].to_numpy(np.float64)
    return field_macro(spearman(a, b), m["field_id"].to_numpy())


def run_variant_units(
    inst: Instance,
    backend: Any,
    run_dir: str | Path,
    units: Sequence[UnitSpec],
    *,
    concurrency: int = 4,
    progress: bool = True,
) -> dict[str, Any]:
    """Run diagnostic units into ``run_dir`` (same store, variant keys) and write one prediction
    file per (variant, source condition) under ``run_dir/diagnostics/``, with agreement against
    the native predictions of the same condition. Returns a summary."""
    from rap_benchmark.agents.runner import SearchTools, predictions_frame, run_to_end
    from rap_benchmark.evaluation.predictions import write_predictions

    store = RunStore(run_dir)
    tools = SearchTools(inst.public_view()) if any(u.regime is not None for u in units) else None
    stats = run_to_end(units, backend, store, tools, concurrency=concurrency, progress=progress)
    out_dir = store.root / "diagnostics"
    summary: dict[str, Any] = {"stats": stats.to_dict(), "files": {}}
    native = predictions_frame(store, inst.manifest_hash, variant="native")
    keys = [u.key for u in units]
    for variant in sorted({k.variant for k in keys}):
        frame = predictions_frame(
            store, inst.manifest_hash, variant=variant, keys=[k for k in keys if k.variant == variant]
        )
        for cond, g in frame.groupby("condition"):
            g = g.copy()
            if variant in REPLAY_VARIANTS:
                task = Task.FORECAST if variant == "replay-forecast" else Task.STATE
                g["condition"] = readout_condition(Condition(cond), task).value
            path = write_predictions(g, out_dir / f"{variant}_{cond}.jsonl")
            src = native[native["condition"] == cond] if not native.empty else native
            summary["files"][path.name] = {
                "units": int(len(g)),
                "valid": int(g["valid"].sum()),
                "agreement_with_native": agreement(src, g) if not src.empty else float("nan"),
            }
    return summary
