"""Runs and folders survive kills and corrupt content: atomic writes, the run-folder lock, unit-file
validation, the repaired event log and stale build folders (issue 14, "Runs and folders")."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rap_benchmark.agents.reference import ReferenceBackend
from rap_benchmark.agents.runner import PREDICTIONS_FILE, run_benchmark
from rap_benchmark.agents.store import EXEC_LOG, RunFolderError, RunStore
from rap_benchmark.core import fsio
from rap_benchmark.core.records import Condition

REPO = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(REPO)}
MODEL = "reference/search-hits"


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _rap(*args: str) -> list[str]:
    return [sys.executable, "-m", "rap_benchmark", *args]


def _small_run(mini, out: Path, **kw):
    kw = {
        "model": MODEL,
        "conditions": [Condition.A0, Condition.A1],
        "fields": mini.field_ids[:1],
        "progress": False,
        **kw,
    }
    return run_benchmark(mini.public_view(), ReferenceBackend(), out, **kw)


# -- the atomic-write helper ---------------------------------------------------------------------


def test_atomic_write_keeps_the_old_file_when_the_writer_fails(tmp_path):
    path = tmp_path / "f.txt"
    fsio.atomic_write_text(path, "old\n")
    with pytest.raises(RuntimeError), fsio.atomic_open(path) as fh:
        fh.write("half of the new")
        raise RuntimeError("killed")
    assert path.read_text() == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f.txt"]


def test_replacing_swaps_in_a_finished_folder_and_drops_a_failed_one(tmp_path):
    """The one build-folder mechanism of build, extend and CiteCast builds."""
    out = tmp_path / "inst"
    with fsio.replacing(out, ("SHA256SUMS",), kind="RAP instance") as tmp:
        (tmp / "SHA256SUMS").write_text("v1\n")
    assert (out / "SHA256SUMS").read_text() == "v1\n"
    with pytest.raises(RuntimeError), fsio.replacing(out, ("SHA256SUMS",), kind="RAP instance") as tmp:
        (tmp / "SHA256SUMS").write_text("v2\n")
        raise RuntimeError("writer failed")
    assert (out / "SHA256SUMS").read_text() == "v1\n"  # the previous build is whole
    assert sorted(p.name for p in tmp_path.iterdir()) == ["inst"]  # no building folder left
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("mine")
    with (
        pytest.raises(FileExistsError, match=r"not a RAP instance \(it holds none of SHA256SUMS\); refusing"),
        fsio.replacing(tmp_path / "other", ("SHA256SUMS",), kind="RAP instance"),
    ):
        pass


def test_remove_stale_only_touches_dead_writers(tmp_path):
    dead, live = _dead_pid(), os.getpid()
    (tmp_path / f".a.json.tmp-{dead}").write_text("torn")
    (tmp_path / f".a.json.tmp-{live}").write_text("being written")
    (tmp_path / f".inst.building-{dead}").mkdir()
    (tmp_path / "keep.json").write_text("{}")
    removed = {p.name for p in fsio.remove_stale(tmp_path)}
    assert removed == {f".a.json.tmp-{dead}", f".inst.building-{dead}"}
    assert (tmp_path / f".a.json.tmp-{live}").exists() and (tmp_path / "keep.json").exists()


def test_predictions_write_is_atomic(tmp_path, mini):
    """Bug: predictions.jsonl was written in place; a kill mid-write left a 0-byte or a 4,096-byte file."""
    import rap_benchmark.evaluation.predictions.writing as pr
    from rap_benchmark.evaluation.scoring import baseline_predictions

    frame, _ = baseline_predictions(mini)
    path = tmp_path / "p.jsonl"
    pr.write_predictions(frame.iloc[:10], path)
    before = path.read_bytes()
    calls = {"n": 0}
    real = pr.json.dumps

    def dying_dumps(*a, **k):
        calls["n"] += 1
        if calls["n"] == 50:
            raise KeyboardInterrupt  # stands for a kill in the middle of the rows
        return real(*a, **k)

    pr.json.dumps = dying_dumps
    try:
        with pytest.raises(KeyboardInterrupt):
            pr.write_predictions(frame, path)
    finally:
        pr.json.dumps = real
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["p.jsonl"]


# -- the run-folder lock ---------------------------------------------------------------------------

_HOLD = textwrap.dedent(
    """
    import sys, time
    from rap_benchmark.core.fsio import FolderLock
    FolderLock(sys.argv[1]).acquire()
    print("held", flush=True)
    time.sleep(600)
    """
)


def test_a_kill_between_the_two_renames_of_a_swap_keeps_the_previous_build(tmp_path):
    """Killed after ``out`` became ``.out.old-PID`` and before the new build took its place: the next
    build of ``out`` puts the previous one back (it was removed as stale), and a failed next build
    leaves it whole."""
    dead = _dead_pid()
    old, building = tmp_path / f".inst.old-{dead}", tmp_path / f".inst.building-{dead}"
    old.mkdir()
    (old / "SHA256SUMS").write_text("v1\n")
    building.mkdir()
    (building / "SHA256SUMS").write_text("v2\n")
    with pytest.raises(RuntimeError), fsio.replacing(tmp_path / "inst", ("SHA256SUMS",), kind="RAP instance"):
        raise RuntimeError("writer failed")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["inst"]
    assert (tmp_path / "inst" / "SHA256SUMS").read_text() == "v1\n"
    # an .old beside a present destination is only a leftover
    (tmp_path / f".inst.old-{dead}").mkdir()
    assert fsio.remove_stale(tmp_path) == [tmp_path / f".inst.old-{dead}"]
    assert (tmp_path / "inst" / "SHA256SUMS").read_text() == "v1\n"


def test_lock_names_its_holder_and_a_dead_holder_is_taken_over(tmp_path):
    proc = subprocess.Popen([sys.executable, "-c", _HOLD, str(tmp_path)], env=ENV, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "held"
        with pytest.raises(fsio.FolderBusy, match=f"process {proc.pid}"):
            fsio.FolderLock(tmp_path).acquire()
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert (tmp_path / fsio.LOCK_FILE).read_text().strip() == f"pid {proc.pid}"  # left by the killed holder
    with fsio.FolderLock(tmp_path):
        assert (tmp_path / fsio.LOCK_FILE).read_text().strip() == f"pid {os.getpid()}"
    assert not (tmp_path / fsio.LOCK_FILE).exists()


def test_second_concurrent_run_on_one_folder_refuses_to_start(mini_dir, mini, tmp_path):
    """Bug: two `rap run` on one --out ran every unit twice (a doubled API bill)."""
    out = tmp_path / "run"
    common = ["--backend", "reference", "--model", MODEL, "--conditions", "A1,A3", "--no-progress"]
    common += ["--fields", ",".join(mini.field_ids[:3]), "--concurrency", "1"]
    first = subprocess.Popen(
        _rap("run", str(mini_dir), "--out", str(out), "--request-delay", "0.05", *common),
        env=ENV,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 120
        while not any(e["event"] == "done" for e in RunStore(out).events()) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert first.poll() is None
        second = subprocess.run(
            _rap("run", str(mini_dir), "--out", str(out), *common), env=ENV, capture_output=True, text=True
        )
        assert second.returncode == 2
        assert second.stderr.strip().count("\n") == 0, second.stderr
        assert f"in use by process {first.pid}" in second.stderr and second.stderr.startswith("rap run: ")
        assert {e["pid"] for e in RunStore(out).events()} == {first.pid}  # the second ran nothing
    finally:
        first.kill()
        first.wait()


# -- corrupt run folders -------------------------------------------------------------------------


def test_truncated_run_json_names_the_file(mini, tmp_path):
    """Bug: a truncated run.json gave a raw JSONDecodeError traceback without naming the file."""
    _small_run(mini, tmp_path)
    path = tmp_path / "run.json"
    path.write_bytes(path.read_bytes()[:25])
    with pytest.raises(RunFolderError, match=r"run\.json is not valid JSON"):
        _small_run(mini, tmp_path)


def _corrupt_one_unit(run: Path, mutate) -> Path:
    unit = sorted((run / "units").rglob("*.json"))[0]
    rec = json.loads(unit.read_text())
    mutate(rec)
    unit.write_text(json.dumps(rec))
    return unit


@pytest.mark.parametrize(
    "bad_weight",
    ["x", -5.0],
    ids=["non-numeric", "negative"],
)
def test_corrupt_unit_is_rerun_never_merged(mini, tmp_path, bad_weight):
    """Bug: a unit with weight "x" crashed the merge (old predictions left in place); weight -5 went
    into predictions.jsonl as valid: true, D0: -5.0."""
    _, path = _small_run(mini, tmp_path)
    clean = path.read_bytes()

    def mutate(rec):
        rec["weights"][0] = bad_weight

    unit = _corrupt_one_unit(tmp_path, mutate)
    rows = [json.loads(x) for x in path.read_text().splitlines()]
    assert all(r["D0"] is None or r["D0"] >= 0 for r in rows)
    stats, path = _small_run(mini, tmp_path)
    assert (stats.executed, stats.unusable_files) == (1, 1)
    assert json.loads(unit.read_text())["weights"][0] != bad_weight
    bad_events = [e for e in RunStore(tmp_path).events() if e["event"] == "unusable_unit_file"]
    assert len(bad_events) == 1 and "weight" in bad_events[0]["detail"]
    # byte for byte as before the corruption (the rerun unit's wall time is not in the file)
    assert path.read_bytes() == clean


def test_stray_copy_of_a_unit_file_is_not_a_unit(mini, tmp_path):
    """Bug: a stray units/.../A1/zz-backup.json produced a duplicated row in predictions.jsonl."""
    _, path = _small_run(mini, tmp_path)
    clean = path.read_bytes()
    a1 = sorted((tmp_path / "units").rglob("A1/*.json"))[0]
    (a1.parent / "zz-backup.json").write_bytes(a1.read_bytes())
    stats, path = _small_run(mini, tmp_path)
    assert path.read_bytes() == clean
    assert (stats.executed, stats.unusable_files) == (0, 1)
    (event,) = [e for e in RunStore(tmp_path).events() if e["event"] == "unusable_unit_file"]
    assert "zz-backup.json" in event["detail"] and "holds unit" in event["detail"]


def test_torn_event_log_line_is_cut_before_the_next_append(tmp_path):
    """Bug: after a torn last line in executions.jsonl the next event was appended onto it."""
    from rap_benchmark.agents.store import UnitKey

    store = RunStore(tmp_path)
    key = UnitKey("m", "f", "2024-01-01", Condition.A0)
    store.log_event(key, "start")
    with (tmp_path / EXEC_LOG).open("a") as fh:
        fh.write('{"event": "do')
    store.log_event(key, "done")
    lines = (tmp_path / EXEC_LOG).read_text().splitlines()
    assert [json.loads(x)["event"] for x in lines] == ["start", "done"]


def test_killed_build_leaves_no_stale_folder_after_the_next_build(tmp_path):
    """Bug: a killed `rap build` left a .NAME.building-PID folder that no later build removed."""
    out = tmp_path / "inst"
    other = tmp_path / f".other.building-{_dead_pid()}"  # another destination's: not ours to sweep
    other.mkdir()
    proc = subprocess.Popen(
        _rap("build", "--instance", "mini", "--out", str(out)),
        env=ENV,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    building = tmp_path / f".inst.building-{proc.pid}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None and not any(building.glob("*.parquet")):
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert building.is_dir() and not out.exists()  # killed mid-build: the stale folder the bug was about
    subprocess.run(_rap("build", "--instance", "mini", "--out", str(out)), env=ENV, check=True, capture_output=True)
    assert not building.exists() and other.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([out.name, other.name])
    assert subprocess.run(_rap("verify", str(out), "--expect", "mini"), env=ENV, capture_output=True).returncode == 0


# -- kill tests ------------------------------------------------------------------------------------

_KILL_DURING_WRITE = textwrap.dedent(
    """
    import os, signal, sys
    import rap_benchmark.evaluation.predictions.writing as pr
    real, n, k = pr.json.dumps, [0], int(sys.argv[1])
    def dumps(*a, **kw):
        n[0] += 1
        if n[0] == k:
            os.kill(os.getpid(), signal.SIGKILL)
        return real(*a, **kw)
    pr.json.dumps = dumps
    from rap_benchmark.cli import main
    sys.exit(main(sys.argv[2:]))
    """
)


def test_kill_at_random_points_gives_the_uninterrupted_predictions(mini_dir, mini, tmp_path):
    """Kills at random moments of a run, then inside the predictions write: the resumed run's
    predictions.jsonl is byte-identical to an uninterrupted run's (wall times aside, which are
    measured, for the units that ran twice)."""
    rng = random.Random(14)
    common = ["--backend", "reference", "--model", MODEL, "--conditions", "A0,A2", "--no-progress"]
    common += ["--fields", ",".join(mini.field_ids[:2]), "--concurrency", "1"]
    clean, run = tmp_path / "clean", tmp_path / "killed"
    subprocess.run(_rap("run", str(mini_dir), "--out", str(clean), *common), env=ENV, check=True, capture_output=True)
    n_units = 2 * 2 * len(mini.spec.origins)

    # 1) SIGKILL after a random number of finished units
    for _ in range(2):
        target = rng.randrange(1, n_units // 2)
        proc = subprocess.Popen(
            _rap("run", str(mini_dir), "--out", str(run), "--request-delay", "0.05", *common),
            env=ENV,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 120
        store = RunStore(run)
        start = sum(e["event"] == "done" for e in store.events())
        while time.monotonic() < deadline and proc.poll() is None:
            if sum(e["event"] == "done" for e in store.events()) >= start + target:
                break
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    subprocess.run(_rap("run", str(mini_dir), "--out", str(run), *common), env=ENV, check=True, capture_output=True)
    got, want = (run / PREDICTIONS_FILE).read_bytes(), (clean / PREDICTIONS_FILE).read_bytes()
    # 2) SIGKILL inside the predictions rewrite (every unit is done), at a random row: the complete
    #    previous file stays; json.dumps is called once per row there
    for _ in range(2):
        k = rng.randrange(1, n_units)
        argv = [sys.executable, "-c", _KILL_DURING_WRITE, str(k), "run", str(mini_dir), "--out", str(run), *common]
        proc = subprocess.run(argv, env=ENV, capture_output=True)
        assert proc.returncode == -signal.SIGKILL
        assert (run / PREDICTIONS_FILE).read_bytes() == got
        assert [p for p in run.glob(".predictions.jsonl.tmp-*")]  # it died mid-write
    subprocess.run(_rap("run", str(mini_dir), "--out", str(run), *common), env=ENV, check=True, capture_output=True)
    assert (run / PREDICTIONS_FILE).read_bytes() == got
    assert got == want
    assert not [p for p in run.rglob(".*") if ".tmp-" in p.name]


_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
    lambda children: st.lists(children, max_size=9) | st.dictionaries(st.text(max_size=8), children, max_size=5),
    max_leaves=30,
)


@settings(max_examples=200, deadline=None)
@given(
    key=st.fixed_dictionaries(
        {"model": st.text(max_size=4), "field_id": st.text(max_size=4), "origin": st.text(max_size=10)},
        optional={"condition": st.sampled_from(["A0", "A4", "A9", 3]), "variant": _json_values},
    )
    | _json_values,
    valid=_json_values,
    weights=_json_values
    | st.lists(st.floats() | st.integers() | st.sampled_from([10**400, -(10**400), 1e308]), min_size=8, max_size=8),
    extra=st.dictionaries(
        st.sampled_from(["attempts", "wall_s", "cost_usd", "invalid_reason", "n_search_calls"]), _json_values
    ),
)
def test_unit_check_never_raises(key, valid, weights, extra):
    """Any content of a unit file gives a verdict (usable or a reason), never an exception."""
    from rap_benchmark.agents.store import UnitKey, check_unit

    rel = UnitKey("m", "f", "2024-01-01", Condition.A0).relpath()
    verdict = check_unit({"key": key, "valid": valid, "weights": weights, **extra}, rel)
    assert verdict is None or isinstance(verdict, str)
