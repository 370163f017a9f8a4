"""Target-blindness is in the types: agent runners and harness tasks get ``Instance.public_view()``,
a :class:`PublicInstance` with no target, no direction label and no ledger. (It used to be a
convention: the runner received the full instance and was trusted to drop ``y``.)"""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pandas as pd
import pytest

from rap_benchmark.agents import ReferenceBackend, run_benchmark
from rap_benchmark.core.artifacts import Instance, PublicInstance, load_instance
from rap_benchmark.core.records import Condition
from rap_benchmark.core.schemas import (
    ASSIGNMENT_LABELS,
    EPISODE_TARGET_FLAGS,
    EPISODE_TARGETS,
    MEMBERSHIPS,
    PUBLIC_EPISODES,
)
from rap_benchmark.evaluation.predictions import read_predictions

HIDDEN = set(EPISODE_TARGETS) | set(ASSIGNMENT_LABELS)


def _frames(value, seen=None):
    """Every DataFrame reachable from ``value`` through attributes, dict values and sequences."""
    seen = set() if seen is None else seen
    if id(value) in seen:
        return
    seen.add(id(value))
    if isinstance(value, pd.DataFrame):
        yield value
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for f in dataclasses.fields(value):
            yield from _frames(getattr(value, f.name), seen)
    elif isinstance(value, dict):
        for v in value.values():
            yield from _frames(v, seen)
    elif isinstance(value, list | tuple):
        for v in value:
            yield from _frames(v, seen)


def test_the_view_holds_no_target_and_no_label(mini: Instance) -> None:
    view = mini.public_view()
    assert view.episodes.columns.tolist() == PUBLIC_EPISODES.names
    assert view.memberships.columns.tolist() == MEMBERSHIPS.names
    assert not any(set(fl) & set(EPISODE_TARGET_FLAGS) for fl in view.episodes["flags"])
    frames = list(_frames(view))
    assert len(frames) == 5
    assert all(not HIDDEN & set(f.columns) for f in frames)
    for name in ("root", "ledger", "assignments", "extras"):
        assert not hasattr(view, name)
    with pytest.raises((AttributeError, dataclasses.FrozenInstanceError, TypeError)):
        view.root = mini.root  # type: ignore[misc]
    # the keys are all there: same episodes, same memberships
    assert len(view.episodes) == len(mini.episodes) and len(view.memberships) == len(mini.assignments)


def test_the_runner_refuses_the_full_instance(mini: Instance, tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="public_view"):
        run_benchmark(mini, ReferenceBackend(), tmp_path, model="reference/search-hits", conditions=[Condition.A1])  # type: ignore[arg-type]
    assert not any(tmp_path.iterdir())


def test_a_run_cannot_reach_y(mini_dir: Path, tmp_path: Path) -> None:
    """Take the view, then destroy every target on disk (episodes and labels overwritten): a run
    over the view gives exactly the predictions of a run on the intact instance."""
    fields = load_instance(mini_dir).field_ids[:3]
    kw = dict(model="reference/search-hits", conditions=[Condition.A1, Condition.A4], fields=fields, progress=False)
    _, intact = run_benchmark(load_instance(mini_dir).public_view(), ReferenceBackend(), tmp_path / "a", **kw)

    root = tmp_path / "inst"
    shutil.copytree(mini_dir, root)
    view = load_instance(root).public_view()
    for name in ("episodes.parquet", "assignments.parquet", "truth.parquet", "FINAL_PARAMETER_LEDGER_V1.json"):
        (root / name).write_bytes(b"destroyed")
    stats, blind = run_benchmark(view, ReferenceBackend(), tmp_path / "b", **kw)

    assert stats.valid == 3 * 5 * 2 and stats.invalid == 0
    a, b = read_predictions(intact), read_predictions(blind)
    assert a.columns.tolist() == b.columns.tolist()
    same = [c for c in a.columns if c != "wall_s"]
    pd.testing.assert_frame_equal(a[same], b[same])


def test_the_lm_eval_task_loop_holds_the_view(mini_dir: Path) -> None:
    pytest.importorskip("lm_eval")
    from rap_benchmark.integrations.lmeval.task import RapTask

    task = RapTask(config={"metadata": {"instance_dir": str(mini_dir), "condition": "A1", "split": "all"}})
    assert isinstance(task.inst, PublicInstance)
    assert isinstance(task.unit_tools.inst, PublicInstance)
