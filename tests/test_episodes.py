"""Episodes and search-manifest rows (the paper's episodes and Search environment) against brute-force window selection."""

from __future__ import annotations

import datetime as dt
import hashlib

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rap_benchmark.core.dates import add_months, parse_date
from rap_benchmark.core.records import DIRECTION_KEYS, AssignmentType, Episode, Policy, Regime
from rap_benchmark.core.schemas import EPISODES, conform
from rap_benchmark.core.spec import BenchmarkSpec
from rap_benchmark.pipeline.episodes import (
    episode_table,
    search_manifest,
    shard_hash,
    universe_bounds,
    window_edges,
)
from rap_benchmark.pipeline.policies import direction_weights

SPEC = BenchmarkSpec()
FIELDS = ["fa", "fb", "fc"]
BLOCKS = pd.DataFrame({"field_id": FIELDS, "block_id": ["B000", "B000", "B001"], "split": ["dev", "dev", "test"]})


def _boundary_days() -> list[dt.date]:
    days = []
    for origin in SPEC.origin_dates:
        for edge in window_edges(origin, SPEC):
            days += [edge - dt.timedelta(days=1), edge, edge + dt.timedelta(days=1)]
    return days


_DATE = st.one_of(st.sampled_from(_boundary_days()), st.dates(dt.date(2022, 6, 1), dt.date(2026, 6, 30)))
_ROW = st.tuples(
    st.sampled_from(FIELDS),
    _DATE,
    st.sampled_from(list(DIRECTION_KEYS) + ["other"]),
    st.one_of(st.none(), st.sampled_from(list(DIRECTION_KEYS))),
    st.sampled_from([t.value for t in AssignmentType]),
)


def _assignments(rows) -> pd.DataFrame:
    return pd.DataFrame(
        [
            (f"{2200 + i // 1000:04d}.{i % 1000:05d}", f, d.isoformat(), p, s, t)
            for i, (f, d, p, s, t) in enumerate(rows)
        ],
        columns=["arxiv_id", "field_id", "date", "primary", "secondary", "type"],
    )


def test_window_edges_of_the_first_paper_origin():
    assert window_edges(dt.date(2024, 1, 1), SPEC) == [
        dt.date(2022, 7, 1),
        dt.date(2023, 1, 1),
        dt.date(2023, 7, 1),
        dt.date(2024, 1, 1),
        dt.date(2024, 7, 1),
    ]


@settings(max_examples=40, deadline=None)
@given(st.lists(_ROW, min_size=1, max_size=80))
def test_windows_hold_exactly_their_papers(rows):
    """Brute force: every window's counts are the policy mass of the field's papers dated in it.

    In particular no y uses a paper outside [T, T+6mo), and no history window one outside its own.
    """
    frame = _assignments(rows)
    table = episode_table(frame, BLOCKS, SPEC)
    assert len(table) == len(FIELDS) * len(SPEC.origins) * len(Policy)
    dates = [dt.date.fromisoformat(d) for d in frame["date"]]
    fields = frame["field_id"].tolist()
    for policy in Policy:
        weights = direction_weights(frame, policy)
        for row in table.loc[table["policy"] == policy.value].itertuples(index=False):
            origin = dt.date.fromisoformat(row.origin)
            edges = window_edges(origin, SPEC)

            def brute(lo: dt.date, hi: dt.date, field: str = row.field_id, w: np.ndarray = weights) -> np.ndarray:
                keep = [i for i, d in enumerate(dates) if fields[i] == field and lo <= d < hi]
                return w[keep].sum(axis=0) if keep else np.zeros(8)

            np.testing.assert_array_equal(row.y_counts, brute(origin, add_months(origin, 6)))
            for k in range(3):
                np.testing.assert_array_equal(row.history_counts[k], brute(edges[k], edges[k + 1]))
            np.testing.assert_array_equal(row.x_counts, brute(add_months(origin, -6), origin))
            assert row.n_y == pytest.approx(float(np.sum(row.y_counts)))


@settings(max_examples=40, deadline=None)
@given(st.lists(_ROW, min_size=1, max_size=60))
def test_episode_invariants(rows):
    table = episode_table(_assignments(rows), BLOCKS, SPEC)
    for row in table.itertuples(index=False):
        assert len(row.history) == 3 and len(row.history_counts) == 3
        np.testing.assert_array_equal(row.history_counts[-1], row.x_counts)
        if row.x is None:
            assert row.history[-1] is None and "x_empty" in row.flags and row.n_x == 0
        else:
            np.testing.assert_array_equal(row.history[-1], row.x)
            assert np.sum(row.x) == pytest.approx(1.0) and min(row.x) >= 0
            np.testing.assert_allclose(np.asarray(row.x) * row.n_x, row.x_counts, atol=1e-12)
        if row.y is None:
            assert "y_empty" in row.flags and row.n_y == 0
        else:
            assert np.sum(row.y) == pytest.approx(1.0)
        assert ("history_empty" in row.flags) == any(h is None for h in row.history)
    records = episode_records(table)
    assert [r.episode_id for r in records[:4]] == ["fa@2024-01-01"] * 4
    assert records[0].policy is Policy.CANONICAL


def test_a_paper_on_the_window_edges():
    origin = dt.date(2025, 1, 1)
    rows = [
        ("fa", origin - dt.timedelta(days=1), "D0", None, "single"),  # last day of x
        ("fa", origin, "D1", None, "single"),  # first day of y
        ("fa", add_months(origin, 6) - dt.timedelta(days=1), "D2", None, "single"),  # last day of y
        ("fa", add_months(origin, 6), "D3", None, "single"),  # first day after y
    ]
    table = episode_table(_assignments(rows), BLOCKS, SPEC)
    row = table.loc[(table["field_id"] == "fa") & (table["origin"] == "2025-01-01") & (table["policy"] == "canonical")]
    row = row.iloc[0]
    assert list(row["y_counts"]) == [0, 1, 1, 0, 0, 0, 0, 0]
    assert list(row["x_counts"]) == [1, 0, 0, 0, 0, 0, 0, 0]


def test_empty_fields_are_flagged_and_typed():
    table = episode_table(_assignments([]), BLOCKS, SPEC)
    assert table["x"].isna().all() and table["y"].isna().all()
    assert all({"x_empty", "y_empty", "history_empty"} <= set(f) for f in table["flags"])
    import pyarrow as pa

    schema = conform(table, EPISODES, where="episodes.parquet").schema
    assert schema.field("history").type == pa.list_(pa.list_(pa.float64()))
    assert schema.field("x").type == pa.list_(pa.float64())


def test_censoring_flags():
    spec = SPEC.replace(date_start="2023-01-01", date_end="2026-04-01")
    table = episode_table(_assignments([]), BLOCKS, spec)
    first = table.loc[table["origin"] == "2024-01-01", "flags"].iloc[0]
    last = table.loc[table["origin"] == "2026-01-01", "flags"].iloc[0]
    mid = table.loc[table["origin"] == "2025-01-01", "flags"].iloc[0]
    assert "history_censored" in first and "y_censored" not in first
    assert "y_censored" in last
    assert "history_censored" not in mid and "y_censored" not in mid


@settings(max_examples=30, deadline=None)
@given(st.lists(_ROW, max_size=60))
def test_search_manifest_universes(rows):
    frame = _assignments(rows)
    manifest = search_manifest(frame, FIELDS, SPEC)
    assert len(manifest) == len(FIELDS) * len(SPEC.origins) * 2
    for row in manifest.itertuples(index=False):
        origin = dt.date.fromisoformat(row.origin)
        start, end = universe_bounds(origin, Regime(row.regime), SPEC)
        assert (row.start, row.end) == (start.isoformat(), origin.isoformat())
        members = sorted(
            set(
                frame.loc[
                    (frame["field_id"] == row.field_id) & (frame["date"] >= row.start) & (frame["date"] < row.end),
                    "arxiv_id",
                ]
            )
        )
        assert row.n_papers == len(members)
        assert row.shard_hash == hashlib.sha256("\n".join(members).encode()).hexdigest() == shard_hash(members)
    fixed = manifest.loc[manifest["regime"] == "fixed"].set_index(["field_id", "origin"])
    expanding = manifest.loc[manifest["regime"] == "expanding"].set_index(["field_id", "origin"])
    assert (fixed["n_papers"] <= expanding["n_papers"]).all()
    assert (fixed["start"] == [add_months(dt.date.fromisoformat(o), -6).isoformat() for _, o in fixed.index]).all()


def episode_records(table: pd.DataFrame) -> list[Episode]:
    """``episodes.parquet`` rows -> frozen Episode records (in table order)."""

    def vec(value: object) -> tuple[float, ...] | None:
        return None if value is None else tuple(float(v) for v in value)  # type: ignore[union-attr]

    return [
        Episode(
            field_id=str(row.field_id),
            origin=parse_date(row.origin),
            policy=Policy(row.policy),
            x=vec(row.x),
            history=tuple(vec(hv) for hv in row.history),
            y=vec(row.y),
            n_x=float(row.n_x),
            n_y=float(row.n_y),
        )
        for row in table.itertuples(index=False)
    ]
