"""The run store: atomic unit files, sharding, resume semantics, and a SIGKILL crash test."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from runkill import kill_after_done
from scripted_backend import ScriptedBackend

from rap_benchmark.agents.protocol import ModelTurn
from rap_benchmark.agents.reference import ReferenceBackend
from rap_benchmark.agents.runner import (
    episode_cells,
    native_units,
    predictions_frame,
    run_benchmark,
    run_units,
)
from rap_benchmark.agents.store import RunStore, UnitKey, merge_stores, parse_shard
from rap_benchmark.core.records import DIRECTION_KEYS, Condition

REPO = Path(__file__).resolve().parents[1]
D = list(DIRECTION_KEYS)


@given(
    st.lists(
        st.tuples(
            st.text(min_size=1, max_size=8),
            st.sampled_from(["2024-01-01", "2025-07-01"]),
            st.sampled_from(list(Condition)),
        ),
        min_size=1,
        max_size=40,
        unique=True,
    ),
    st.integers(1, 7),
)
@settings(max_examples=50, deadline=None)
def test_shards_partition_units(keys, n):
    units = [UnitKey("m", f, o, c) for f, o, c in keys]
    parts = [[u for u in units if u.shard(n) == i] for i in range(n)]
    assert sorted(x for p in parts for x in p) == sorted(units)
    assert all(u.shard(n) == UnitKey(u.model, u.field_id, u.origin, u.condition).shard(n) for u in units)


def test_parse_shard():
    assert parse_shard("2/4") == (2, 4) and parse_shard(None) == (0, 1)
    for bad in ("4/4", "x", "-1/2", "1/0"):
        with pytest.raises(ValueError):
            parse_shard(bad)


def test_unit_paths_are_safe_and_distinct(tmp_path):
    store = RunStore(tmp_path)
    a = UnitKey("org/model:v1", "cs.CL/x", "2024-01-01", Condition.A1)
    b = UnitKey("org_model_v1", "cs.CL_x", "2024-01-01", Condition.A1)
    assert store.path(a) != store.path(b)
    store.save(a, {"valid": True, "weights": [1.0] * 8})
    assert store.is_done(a) and not store.is_done(b)
    assert store.path(a).resolve().is_relative_to(tmp_path.resolve())


def test_temporaries_are_ignored_and_cleaned(tmp_path):
    store = RunStore(tmp_path)
    key = UnitKey("m", "f", "2024-01-01", Condition.A0)
    path = store.save(key, {"valid": False})
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()  # a writer that died mid-write
    torn = path.parent / f".f@2024-01-01.json.tmp-{proc.pid}"
    torn.write_text('{"valid": tr', encoding="utf-8")
    assert [r["key"] for r in store.iter_units()] == [key.to_dict()]
    assert store.clean_temporaries() == 1 and not torn.exists()


def test_resume_skips_valid_and_reruns_invalid(mini, tmp_path):
    """A unit that was invalid is rerun; a valid one is never executed again."""
    cells = episode_cells(mini, fields=[mini.field_ids[0]])
    units = native_units("scripted", mini.codebooks, cells, [Condition.A0], mini.spec)
    fail_first = {u.key.origin for u in units[:2]}
    answer = json.dumps(dict(zip(D, [1, 2, 3, 4, 5, 6, 7, 8], strict=True)))

    def flaky(req, ctx):
        return ModelTurn(content="nope" if ctx.origin.isoformat() in fail_first else answer)

    store = RunStore(tmp_path)
    s1 = asyncio.run(run_units(units, ScriptedBackend(flaky), store, None, progress=False))
    assert (s1.executed, s1.invalid) == (len(units), 2)
    fail_first.clear()
    backend = ScriptedBackend(lambda req, ctx: ModelTurn(content=answer))
    s2 = asyncio.run(run_units(units, backend, store, None, progress=False))
    assert (s2.skipped, s2.executed, s2.invalid) == (len(units) - 2, 2, 0)
    assert backend.calls == 2
    frame = predictions_frame(store, "h")
    assert frame["valid"].all() and len(frame) == len(units)


def test_run_json_mismatch_is_refused(mini, tmp_path):
    cells = [episode_cells(mini)[0]]
    kw = dict(
        model="reference/uniform",
        conditions=[Condition.A0],
        fields=[cells[0][0]],
        origins=[cells[0][1]],
        progress=False,
    )
    run_benchmark(mini.public_view(), ReferenceBackend("reference/uniform"), tmp_path, **kw)
    with pytest.raises(ValueError, match="max_search_calls"):
        run_benchmark(mini.public_view(), ReferenceBackend("reference/uniform"), tmp_path, max_search_calls=3, **kw)


def test_shard_stores_merge_to_the_full_run(mini, tmp_path):
    fields = mini.field_ids[:2]
    kw = dict(model="reference/search-hits", conditions=[Condition.A1, Condition.A4], fields=fields, progress=False)
    _, full = run_benchmark(mini.public_view(), ReferenceBackend(), tmp_path / "full", **kw)
    for i in range(3):
        run_benchmark(mini.public_view(), ReferenceBackend(), tmp_path / f"s{i}", shard=(i, 3), **kw)
    n = merge_stores([tmp_path / f"s{i}" for i in range(3)], tmp_path / "merged")
    merged = predictions_frame(RunStore(tmp_path / "merged"), mini.manifest_hash)
    from rap_benchmark.evaluation.predictions import read_predictions

    ref = read_predictions(full)
    assert n == len(ref) == len(merged)
    cols = ["model", "condition", "field_id", "origin", *D, "valid"]
    pd.testing.assert_frame_equal(merged[cols], ref[cols], check_dtype=False)


def test_units_never_read_targets(mini):
    """Units are built from the target-blind view: they equal those built from the full instance."""
    blind = mini.public_view()
    a = native_units("m", mini.codebooks, episode_cells(mini), list(Condition), mini.spec)
    b = native_units("m", blind.codebooks, episode_cells(blind), list(Condition), blind.spec)
    assert [(u.key, u.user_prompt) for u in a] == [(u.key, u.user_prompt) for u in b]


def _rap(*args: str) -> list[str]:
    return [sys.executable, "-m", "rap_benchmark", *args]


def test_sigkill_mid_run_then_resume_matches_uninterrupted_run(mini_dir, mini, tmp_path):
    fields = ",".join(mini.field_ids[:3])
    common = ["--backend", "reference", "--model", "reference/search-hits", "--conditions", "A1,A3", "--fields", fields]
    common += ["--concurrency", "1", "--no-progress"]
    run_dir = tmp_path / "crashy"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    store = RunStore(run_dir)
    done_before = kill_after_done(
        _rap("run", str(mini_dir), "--out", str(run_dir), "--request-delay", "0.02", *common), run_dir
    )
    n_units = 2 * 3 * len(mini.spec.origins)
    assert 5 <= len(done_before) < n_units

    subprocess.run(
        _rap("run", str(mini_dir), "--out", str(run_dir), *common), cwd=REPO, env=env, check=True, capture_output=True
    )
    clean = tmp_path / "clean"
    subprocess.run(
        _rap("run", str(mini_dir), "--out", str(clean), *common), cwd=REPO, env=env, check=True, capture_output=True
    )

    from rap_benchmark.evaluation.predictions import read_predictions

    got, want = read_predictions(run_dir / "predictions.jsonl"), read_predictions(clean / "predictions.jsonl")
    cols = ["model", "condition", "field_id", "origin", *D, "valid", "n_search_calls"]
    assert len(got) == n_units
    pd.testing.assert_frame_equal(got[cols], want[cols])
    # no unit was started again after it had completed
    first_done: dict[str, int] = {}
    for i, e in enumerate(store.events()):
        if e["event"] == "done":
            first_done.setdefault(e["unit_id"], i)
        else:
            assert e["unit_id"] not in first_done, f"{e['unit_id']} ran again after completing"
    assert set(first_done) == {
        f"reference/search-hits|native|{r.condition}|{r.field_id}@{r.origin}" for r in got.itertuples()
    }
