"""CiteCast's submission path, through the stock CLI: a ``rap citecast run`` (the embedded instance
and the constant reference policy) is prepared, validated and scored into a CiteCast board row,
scored as the CiteCast card defines it (the environment's reward, mean over every Test task, a
task without a forecast scoring 0), beside the card's baselines; the board exports to the Hub
layout. And each kind of bad CiteCast submission is named."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from rap_benchmark.citecast.baselines import sweep
from rap_benchmark.citecast.instance import load_instance
from rap_benchmark.citecast.records import TaskSplit
from rap_benchmark.citecast.reward import rewards
from rap_benchmark.cli import main
from rap_benchmark.core.spec import package_version
from rap_benchmark.evaluation.citecast_submissions import validate_citecast_submission


@pytest.fixture(scope="module")
def flow(citecast_embedded_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two runs (constant 3 on every Test task, constant 1 on the first 5), prepared as submissions.
    Regression: `rap submit prepare` on a `rap citecast run` folder ended in a traceback
    (KeyError: 'manifest_hash'), so a CiteCast run could not become a submission."""
    root = tmp_path_factory.mktemp("citecast-board")
    inst = str(citecast_embedded_dir)
    for name, extra in (("c3", ["--constant", "3"]), ("c1", ["--constant", "1", "--limit", "5"])):
        run = ["citecast", "run", inst, "--backend", "constant", *extra, "--out", str(root / "runs" / name)]
        assert main([*run, "--no-progress"]) == 0
        prepare = ["submit", "prepare", str(root / "runs" / name), "--out", str(root / "subs" / f"{name}.jsonl")]
        assert main([*prepare, "--knowledge-cutoff", "2025-06-01"]) == 0
    return root


def _test_targets(instance_dir: Path) -> np.ndarray:
    tasks = load_instance(instance_dir).tasks
    return np.array([tasks[t].target for t in sorted(tasks) if tasks[t].split is TaskSplit.TEST], dtype=np.float64)


def test_a_citecast_run_reaches_a_citecast_board_row(flow: Path, citecast_embedded_dir: Path, capsys) -> None:
    inst = str(citecast_embedded_dir)
    subs = [str(flow / "subs" / "c3.jsonl"), str(flow / "subs" / "c1.jsonl")]
    assert main(["submit", "validate", subs[0], "--instance", inst]) == 0
    assert main(["submit", "validate", subs[1], "--instance", inst]) == 0
    out = capsys.readouterr().out
    targets = _test_targets(citecast_embedded_dir)
    assert f"c1.jsonl: accepted (5 of {len(targets)} Test tasks)" in out
    assert f"[warning] {len(targets) - 5} of {len(targets)} Test tasks have no row: each scores 0" in out

    board_dir = flow / "board"
    assert main(["leaderboard", "score", *subs, "--instance", inst, "--out", str(board_dir)]) == 0
    board = pd.read_csv(board_dir / "leaderboard_citecast.csv").set_index("model")
    # the card's score: the environment's reward per Test task, mean over every Test task
    c3, c1 = board.loc["constant/3"], board.loc["constant/1"]
    assert c3["mean_reward"] == pytest.approx(rewards(np.full(len(targets), 3.0), targets).mean())
    run_rows = [json.loads(line) for line in (flow / "runs" / "c3" / "predictions.jsonl").read_text().splitlines()]
    assert c3["mean_reward"] == pytest.approx(np.mean([r["reward"] for r in run_rows]))  # what the run was told
    assert c1["mean_reward"] == pytest.approx(rewards(np.ones(5), targets[:5]).sum() / len(targets))
    assert (c3["submitted"], c1["submitted"], c1["tasks"]) == (len(targets), 5, len(targets))
    assert c3["mean_reward_lo"] <= c3["mean_reward"] <= c3["mean_reward_hi"]
    assert (c3["rank"], c1["rank"]) == (1, 2) and c3["knowledge_cutoff"] == "2025-06-01"
    # the card's baselines, fitted on train, as unranked reference rows
    summary = sweep(list(load_instance(citecast_embedded_dir).tasks.values())).summary
    for name in ("blind_constant", "category_constant", "band_oracle"):
        row = board.loc[f"baseline/{name}"]
        want = summary[(summary["baseline"] == name) & (summary["split"] == "test")]["mean_reward"].item()
        assert row["mean_reward"] == pytest.approx(want) and pd.isna(row["rank"])
    meta = json.loads((board_dir / "board.json").read_text())
    assert meta["track"] == "citecast"
    # one version story, as the RAP board's: the instance's benchmark version and the package's
    cc_version = load_instance(citecast_embedded_dir).manifest["citecast_version"]
    assert (meta["benchmark_version"], meta["package_version"]) == (cc_version, package_version())
    assert not {"instance_version", "scorer_version", "citecast_version"} & set(meta)
    page = (board_dir / "index.html").read_text(encoding="utf-8")
    assert "CiteCast leaderboard" in page and "constant/3" in page and "baseline/band_oracle" in page
    assert f"benchmark version <b>CiteCast {cc_version}</b>" in page
    assert f"scored by the rap_benchmark package {package_version()};" in page

    hub = flow / "hub"
    assert main(["hub", "export-board", str(board_dir), "--out", str(hub)]) == 0
    exported = pd.read_parquet(hub / "rap" / "leaderboard" / "data" / "citecast" / "test.parquet")
    assert exported.set_index("model").loc["constant/3", "mean_reward"] == pytest.approx(c3["mean_reward"])
    card = (hub / "rap" / "leaderboard" / "README.md").read_text(encoding="utf-8")
    assert "CiteCast track (config `citecast`)" in card and '"rap/leaderboard", "citecast"' in card
    assert "pretty_name: CiteCast leaderboard" in card and "\n# CiteCast leaderboard\n" in card  # not "RAP"
    assert f"benchmark version CiteCast {cc_version}" in card


def _write(path: Path, rows: list[dict], meta: dict) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    Path(f"{path}.meta.json").write_text(json.dumps(meta), encoding="utf-8")
    return path


def _more(rows: list[dict], meta: dict, row: dict) -> tuple[list[dict], dict]:
    """One row more, that spent nothing, and the usage's task count to match (the usage is not what is tested)."""
    spent = {"prompt_tokens": 0, "completion_tokens": 0, "n_tool_calls": 0}
    return [*rows, {**row, **spent}], {**meta, "usage": {**meta["usage"], "tasks": len(rows) + 1}}


@pytest.mark.parametrize(
    ("change", "phrase"),
    [
        (lambda rows, meta: _more(rows, meta, {**rows[0], "task_id": "cc_nope"}), "a task this instance does not have"),
        (lambda rows, meta: _more(rows, meta, rows[0]), "repeat a task; every copy is dropped"),
        (lambda rows, meta: ([{**rows[0], "prediction": -1}, *rows[1:]], meta), "no usable prediction"),
        (lambda rows, meta: ([{**rows[0], "model": "other"}, *rows[1:]], meta), "[fatal] mixed models"),
        (lambda rows, meta: ([{**r, "reward": 1.0} for r in rows], meta), "[fatal] unknown_column"),
        (lambda rows, meta: (rows, {**meta, "manifest_hash": "0" * 64}), "is not this CiteCast instance's"),
        (lambda rows, meta: (rows, {**meta, "knowledge_cutoff": "soon"}), "knowledge_cutoff must be YYYY-MM-DD"),
        (lambda rows, meta: (rows, {**meta, "usage": {**meta["usage"], "tool_calls": 1}}), "usage.tool_calls is 1"),
    ],
)
def test_each_bad_citecast_submission_is_named(flow: Path, citecast_embedded_dir: Path, change, phrase: str) -> None:
    good = flow / "subs" / "c3.jsonl"
    rows = [json.loads(line) for line in good.read_text(encoding="utf-8").splitlines()]
    meta = json.loads(Path(f"{good}.meta.json").read_text(encoding="utf-8"))
    bad = _write(flow / "bad.jsonl", *change(rows, meta))
    report = validate_citecast_submission(bad, load_instance(citecast_embedded_dir))
    assert any(phrase in p for p in report.problems), report.summary()
    dropped_rows = (
        "a task this instance does not have",
        "repeat a task; every copy is dropped",
        "no usable prediction",
    )
    assert report.accepted == (phrase in dropped_rows)  # a bad row is dropped or scored 0; a bad file is refused


def test_a_train_task_is_dropped(flow: Path, citecast_embedded_dir: Path) -> None:
    inst = load_instance(citecast_embedded_dir)
    train = next(t for t, task in sorted(inst.tasks.items()) if task.split is TaskSplit.TRAIN)
    good = flow / "subs" / "c3.jsonl"
    rows = [json.loads(line) for line in good.read_text(encoding="utf-8").splitlines()]
    meta = json.loads(Path(f"{good}.meta.json").read_text(encoding="utf-8"))
    report = validate_citecast_submission(
        _write(flow / "train.jsonl", *_more(rows, meta, {**rows[0], "task_id": train})), inst
    )
    assert report.accepted and train not in report.predictions
    assert any("are train tasks; the board scores Test (dropped)" in p for p in report.problems)


def test_a_submission_and_an_instance_of_different_benchmarks_are_refused(
    flow: Path, citecast_embedded_dir: Path, mini_dir: Path, capsys
) -> None:
    assert main(["submit", "validate", str(flow / "subs" / "c3.jsonl"), "--instance", str(mini_dir)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("rap submit validate: ") and "is a CiteCast submission: give --instance" in err
    assert main(["submit", "validate", str(flow / "subs" / "c3.jsonl")]) == 2  # the default instance is RAP's mini
    capsys.readouterr()
    rap = flow / "rap-style.jsonl"  # metadata of a RAP submission: scored on the CiteCast track, refused in one problem
    rap.write_bytes((flow / "subs" / "c3.jsonl").read_bytes())
    Path(f"{rap}.meta.json").write_text(json.dumps({"model": "constant/3", "conditions": ["A0"]}), encoding="utf-8")
    board = flow / "board-rap-style"
    assert main(["leaderboard", "score", str(rap), "--instance", str(citecast_embedded_dir), "--out", str(board)]) == 1
    err = capsys.readouterr().err
    assert (
        '[fatal] metadata: not a CiteCast submission (no "benchmark": "citecast"): '
        "score a RAP one against a RAP instance"
    ) in err
    # every file refused: no board of baselines alone is written (it was, as a complete folder), as on RAP's track
    assert not board.exists()
    assert err.rstrip().endswith(
        "rap leaderboard score: every submission was refused (1 of 1), so no board was written; "
        "each file's reasons are printed above"
    )


def test_a_citecast_run_folder_given_as_a_submission_names_submit_prepare(
    flow: Path, citecast_embedded_dir: Path, capsys
) -> None:
    """``rap submit validate RUN`` on a ``rap citecast run`` folder said it was "a RAP submission (no
    "benchmark": "citecast" in its metadata)"; a run becomes a submission with rap submit prepare."""
    run = flow / "runs" / "c3"
    assert main(["submit", "validate", str(run), "--instance", str(citecast_embedded_dir)]) == 1
    assert capsys.readouterr().out.splitlines() == [
        f"{run}: REJECTED",
        f"  [fatal] file_missing: {run} is a run folder, not a submission: "
        f"rap submit prepare {run} --out subs/c3.jsonl writes one",
    ]
