"""Episodes and search-manifest rows (the paper's episodes, Search environment and provenance ledger), vectorised over fields and origins.

For field f, origin T and a counting policy, with w = ``spec.window_months`` and
H = ``spec.history_windows``:

* history = the H windows [T-(k)w, T-(k-1)w) for k = H..1, oldest first;
* x = the newest history window [T-w, T);
* y = [T, T+w).

A window's counts are the summed policy mass of the field's memberships dated in it; its
composition is the counts normalised to sum 1, or null when the window holds no counted mass.
Flags: ``x_empty``, ``y_empty``, ``history_empty`` (any history window without counted mass,
x included), ``history_censored`` (the oldest window starts before ``spec.date_start``, so the
corpus cannot fill it) and ``y_censored`` (y ends after ``spec.date_end``).

A search universe (one ``search_manifest`` row per field x origin x regime) is the field's papers
(every membership, any assignment type) dated in [start, T): ``fixed`` starts at T-w,
``expanding`` at ``spec.date_start``. Its ``shard_hash`` is the sha256 of the universe's sorted
arxiv ids joined by newlines, so a rebuilt shard can be checked against the manifest.
"""

from __future__ import annotations

import datetime as dt

import numpy as np
import pandas as pd
import pyarrow as pa

from rap_benchmark.core.dates import add_months, parse_date, to_days
from rap_benchmark.core.records import N_DIRECTIONS, Policy, Regime
from rap_benchmark.core.schemas import EPISODES
from rap_benchmark.core.spec import BenchmarkSpec
from rap_benchmark.core.sums import shard_hash
from rap_benchmark.pipeline.policies import composition, direction_weights


def window_edges(origin: dt.date, spec: BenchmarkSpec) -> list[dt.date]:
    """[T-Hw, ..., T-w, T, T+w]: H+2 edges of the H history windows and the target window."""
    w, h = spec.window_months, spec.history_windows
    return [add_months(origin, -k * w) for k in range(h, 0, -1)] + [origin, add_months(origin, w)]


def _day_numbers(dates: pd.Series) -> np.ndarray:
    return np.asarray(dates.astype(str).to_numpy(dtype=object), dtype="datetime64[D]").astype(np.int64)


def window_counts(
    assignments: pd.DataFrame, field_ids: list[str], spec: BenchmarkSpec, policies: tuple[Policy, ...] = tuple(Policy)
) -> np.ndarray:
    """Counted mass per (policy, field, origin, window, direction).

    Shape (len(policies), len(field_ids), len(spec.origins), H + 1, 8); window H is y, windows
    0..H-1 the history (oldest first). Rows outside every window, or of fields not in
    ``field_ids``, contribute nothing.
    """
    n_f, n_o, n_w = len(field_ids), len(spec.origins), spec.history_windows + 1
    index = {f: k for k, f in enumerate(field_ids)}
    fidx = assignments["field_id"].map(index).to_numpy(dtype=np.float64)
    known = ~np.isnan(fidx)
    fidx = np.where(known, fidx, 0).astype(np.int64)
    days = _day_numbers(assignments["date"])
    out = np.zeros((len(policies), n_f, n_o, n_w, N_DIRECTIONS), dtype=np.float64)
    bins = np.empty((n_o, len(days)), dtype=np.int64)
    for o, origin in enumerate(spec.origin_dates):
        edges = np.array([to_days(e) for e in window_edges(origin, spec)], dtype=np.int64)
        bins[o] = np.searchsorted(edges, days, side="right") - 1  # -1 before, n_w at/after the end
    for p, policy in enumerate(policies):
        weights = direction_weights(assignments, policy)
        for o in range(n_o):
            inside = known & (bins[o] >= 0) & (bins[o] < n_w)
            cell = fidx[inside] * n_w + bins[o][inside]
            for d in range(N_DIRECTIONS):
                out[p, :, o, :, d] = np.bincount(cell, weights=weights[inside, d], minlength=n_f * n_w).reshape(
                    n_f, n_w
                )
    return out


def _vector(row: np.ndarray) -> list[float] | None:
    return None if np.isnan(row).any() else [float(v) for v in row]


def episode_table(assignments: pd.DataFrame, blocks: pd.DataFrame, spec: BenchmarkSpec) -> pd.DataFrame:
    """The ``episodes.parquet`` table: one row per (field, origin, policy), sorted in that order.

    ``blocks`` is the split table (``field_id``, ``block_id``, ``split``); every field in it gets
    episodes, including fields with no papers in some window (flagged, compositions null).
    """
    blocks = blocks.sort_values("field_id")
    field_ids = blocks["field_id"].astype(str).tolist()
    block_of = dict(zip(field_ids, blocks["block_id"].astype(str), strict=True))
    split_of = dict(zip(field_ids, blocks["split"].astype(str), strict=True))
    policies = tuple(Policy)
    counts = window_counts(assignments, field_ids, spec, policies)
    comps = composition(counts)
    h = spec.history_windows
    start, end = parse_date(spec.date_start), parse_date(spec.date_end)
    censored = [(window_edges(o, spec)[0] < start, window_edges(o, spec)[-1] > end) for o in spec.origin_dates]

    records: dict[str, list[object]] = {c: [] for c in EPISODES.names}
    for f, field_id in enumerate(field_ids):
        for o, origin in enumerate(spec.origins):
            for p, policy in enumerate(policies):
                c, q = counts[p, f, o], comps[p, f, o]
                mass = c.sum(axis=1)
                flags = []
                if mass[h - 1] <= 0:
                    flags.append("x_empty")
                if mass[h] <= 0:
                    flags.append("y_empty")
                if (mass[:h] <= 0).any():
                    flags.append("history_empty")
                if censored[o][0]:
                    flags.append("history_censored")
                if censored[o][1]:
                    flags.append("y_censored")
                records["field_id"].append(field_id)
                records["origin"].append(origin)
                records["policy"].append(policy.value)
                records["block_id"].append(block_of[field_id])
                records["split"].append(split_of[field_id])
                records["x"].append(_vector(q[h - 1]))
                records["y"].append(_vector(q[h]))
                records["history"].append([_vector(q[k]) for k in range(h)])
                records["x_counts"].append([float(v) for v in c[h - 1]])
                records["y_counts"].append([float(v) for v in c[h]])
                records["history_counts"].append([[float(v) for v in c[k]] for k in range(h)])
                records["n_x"].append(float(mass[h - 1]))
                records["n_y"].append(float(mass[h]))
                records["flags"].append(flags)

    return pd.DataFrame(
        {
            col: pd.Series(values, dtype=np.float64 if pa.types.is_floating(EPISODES.field(col).type) else object)
            for col, values in records.items()
        }
    )


def universe_bounds(origin: dt.date, regime: Regime, spec: BenchmarkSpec) -> tuple[dt.date, dt.date]:
    """[start, end) of a search universe; end is always the origin."""
    regime = Regime(regime)
    if regime is Regime.FIXED:
        return add_months(origin, -spec.window_months), origin
    return parse_date(spec.date_start), origin


def search_manifest(assignments: pd.DataFrame, field_ids: list[str], spec: BenchmarkSpec) -> pd.DataFrame:
    """The ``search_manifest.parquet`` table: one row per (field, origin, regime), sorted so."""
    frame = assignments[["field_id", "arxiv_id", "date"]].drop_duplicates(["field_id", "arxiv_id"])
    frame = frame.assign(date=frame["date"].astype(str), arxiv_id=frame["arxiv_id"].astype(str))
    by_field = {str(k): g.sort_values("arxiv_id") for k, g in frame.groupby("field_id", sort=True)}
    empty = frame.iloc[:0]
    rows: dict[str, list[object]] = {
        k: [] for k in ("field_id", "origin", "regime", "start", "end", "n_papers", "shard_hash")
    }
    for field_id in sorted(field_ids):
        group = by_field.get(field_id, empty)
        ids = group["arxiv_id"].to_numpy(dtype=object)
        dates = group["date"].to_numpy(dtype=object)
        for origin in spec.origin_dates:
            for regime in (Regime.FIXED, Regime.EXPANDING):
                start, end = universe_bounds(origin, regime, spec)
                mask = (dates >= start.isoformat()) & (dates < end.isoformat())
                members = ids[mask]  # already sorted by id
                rows["field_id"].append(field_id)
                rows["origin"].append(origin.isoformat())
                rows["regime"].append(regime.value)
                rows["start"].append(start.isoformat())
                rows["end"].append(end.isoformat())
                rows["n_papers"].append(int(mask.sum()))
                rows["shard_hash"].append(shard_hash(members))
    out = pd.DataFrame({k: pd.Series(v, dtype=np.int64 if k == "n_papers" else object) for k, v in rows.items()})
    return out
