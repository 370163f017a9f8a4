"""Every message names the next step (issue 36, item 5), and following it works.

Regressions, each the message a new user met on the evaluator's path:

- ``rap score``/``run``/``show``/``report`` before a build: ``no instance folder at build/mini``, with
  no word of ``rap build``;
- a run folder given where a prediction file is expected: ``no such prediction file:
  runs/my-model``, with no hint of ``runs/my-model/predictions.jsonl``;
- a line cut short in a submission: ``Invalid control character at column 121`` (or, for a line
  cut where a value ends, "at column 1": the column of the line's own newline, on a "second line");
- ``--conditons``: ``rap: unrecognized arguments: --conditons A0`` (not ``rap run:``, no "did you mean");
- ``rap citecast run`` ended in a raw JSON line where ``rap run`` ends in a summary and a ``next:`` line.

(``rap leaderboard score`` with every submission refused: tests/test_cli_refusals.py.)
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rap_benchmark.cli import main

REPO = Path(__file__).resolve().parents[1]


def _call(argv: list[str]) -> int:
    try:
        return main(argv)
    except SystemExit as exc:  # argparse errors exit from parse_args
        return exc.code if isinstance(exc.code, int) else 1


def _one_line(capsys: pytest.CaptureFixture[str], argv: list[str], code: int = 2) -> str:
    """The one stderr line of a refused command (exit ``code``, no traceback)."""
    got = _call(argv)
    out, err = capsys.readouterr()
    assert got == code, (out, err)
    assert "Traceback" not in err
    (line,) = err.splitlines()
    return line


@pytest.fixture(scope="module")
def run_dir(mini_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small finished reference run (5 units, A0, one field)."""
    out = tmp_path_factory.mktemp("next_step") / "runs" / "my-model"
    argv = ["run", str(mini_dir), "--backend", "reference", "--conditions", "A0", "--fields", "f000"]
    assert main([*argv, "--no-progress", "--out", str(out)]) == 0
    return out


# -- an instance folder that is not there names the command that builds it --------------------------------------
INSTANCE_COMMANDS = {
    "score": ["score", "{inst}", "p.jsonl"],
    "run": ["run", "{inst}", "--backend", "reference", "--out", "r"],
    "show": ["show", "{inst}", "--field", "f000"],
    "report": ["report", "{inst}", "p.jsonl", "--out", "rep"],
    "info": ["info", "{inst}"],
    "verify": ["verify", "{inst}"],
    "baselines": ["baselines", "{inst}", "--out", "b.jsonl"],
    "search": ["search", "{inst}", "--field", "f000", "--origin", "2025-01-01", "graph"],
    "submit validate": ["submit", "validate", "p.jsonl", "--instance", "{inst}"],
    "leaderboard score": ["leaderboard", "score", "p.jsonl", "--instance", "{inst}", "--out", "board"],
}


@pytest.mark.parametrize("command", sorted(INSTANCE_COMMANDS))
def test_a_missing_instance_names_the_build_command(command, tmp_path: Path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("p.jsonl").write_text("{}\n", encoding="utf-8")
    argv = [a.replace("{inst}", "build/mini") for a in INSTANCE_COMMANDS[command]]
    line = _one_line(capsys, argv)
    assert (
        line
        == f"rap {command}: no instance folder at build/mini; build it with: rap build --instance mini --out build/mini"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.jsonl"]  # nothing written


def test_the_named_build_command_works_and_names_follow_the_folder(tmp_path: Path, capsys, monkeypatch):
    """The command the message names builds the folder, after which the refused command runs. A
    folder named after another shipped instance names that one; a typo names the folder beside it;
    an empty folder is not taken for a build."""
    monkeypatch.chdir(tmp_path)
    line = _one_line(capsys, ["info", "build/mini"])
    command = line.split("build it with: ")[1]
    assert _call(shlex.split(command)[1:]) == 0
    assert _call(["info", "build/mini"]) == 0
    capsys.readouterr()
    line = _one_line(capsys, ["info", "build/minii"])
    assert line == (
        "rap info: no instance folder at build/minii; did you mean build/mini? "
        "(to build one there: rap build --instance mini --out build/minii)"
    )
    assert _one_line(capsys, ["info", "build/arxiv-sample"]).endswith(
        "rap build --instance arxiv-sample --out build/arxiv-sample"
    )
    assert _one_line(capsys, ["info", "other place/full"]).endswith(
        "rap build --instance full --source CORPUS --out 'other place/full'"
    )
    Path("empty").mkdir()
    assert _one_line(capsys, ["show", "empty", "--field", "f000"]) == (
        "rap show: empty is an empty folder, not a built instance; build it with: rap build --instance mini --out empty"
    )


def test_a_missing_citecast_instance_names_its_build_command(tmp_path: Path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    line = _one_line(capsys, ["citecast", "serve", "build/cc"])
    assert line.endswith("no such folder; build it with: rap citecast build --instance embedded --out build/cc")


# -- a run folder where a prediction file is expected ----------------------------------------------------------
@pytest.mark.parametrize("command", ["score", "report", "submit split", "submit seal"])
def test_a_run_folder_given_as_a_prediction_file_names_its_predictions(
    command, run_dir: Path, mini_dir: Path, tmp_path: Path, capsys
):
    argv = {
        "score": ["score", str(mini_dir), str(run_dir)],
        "report": ["report", str(mini_dir), str(run_dir), "--out", str(tmp_path / "rep")],
        "submit split": ["submit", "split", str(run_dir), "--out", str(tmp_path / "subs")],
        "submit seal": ["submit", "seal", str(run_dir), "--out", str(tmp_path / "seal.json")],
    }[command]
    line = _one_line(capsys, argv)
    assert line == (
        f"rap {command}: no such prediction file: {run_dir} (a run folder); did you mean {run_dir}/predictions.jsonl?"
    )
    assert list(tmp_path.iterdir()) == []


def test_following_the_hint_scores_and_other_folders_say_what_to_do(
    run_dir: Path, mini_dir: Path, tmp_path: Path, capsys
):
    """The file the hint names is scored; a run folder without predictions says how to finish the
    run; a typo names the file beside it; a CiteCast run folder is named as one; a file that is
    nowhere near names the commands that write one."""
    line = _one_line(capsys, ["score", str(mini_dir), str(run_dir)])
    assert _call(["score", str(mini_dir), line.split("did you mean ")[1].rstrip("?"), "--split", "all"]) == 0
    assert "reference/search-hits" in capsys.readouterr().out
    unfinished = tmp_path / "unfinished"
    unfinished.mkdir()
    shutil.copy(run_dir / "run.json", unfinished / "run.json")
    assert _one_line(capsys, ["score", str(mini_dir), str(unfinished)]) == (
        f"rap score: no such prediction file: {unfinished} (a run folder without predictions.jsonl yet); run the "
        f"same rap run command again to finish it (finished units are kept), then give {unfinished}/predictions.jsonl"
    )
    typo = run_dir.parent / "my-modle"
    assert _one_line(capsys, ["score", str(mini_dir), str(typo)]) == (
        f"rap score: no such prediction file: {typo}; did you mean {run_dir}/predictions.jsonl?"
    )
    citecast = tmp_path / "cc"
    citecast.mkdir()
    (citecast / "run.json").write_text(json.dumps({"kind": "citecast"}), encoding="utf-8")
    assert "(a CiteCast run folder: its rewards are in" in _one_line(capsys, ["score", str(mini_dir), str(citecast)])
    nowhere = tmp_path / "nothing.jsonl"
    assert _one_line(capsys, ["score", str(mini_dir), str(nowhere)]) == (
        f"rap score: no such prediction file: {nowhere} (rap run --out RUN writes RUN/predictions.jsonl, "
        "rap baselines --out FILE the baselines')"
    )


def test_a_run_folder_given_as_a_submission_names_submit_prepare(run_dir: Path, mini_dir: Path, capsys):
    """``rap submit validate RUN`` said "write my-model.meta.json next to the file" and "no file at
    RUN"; a run folder becomes a submission with rap submit prepare."""
    assert _call(["submit", "validate", str(run_dir), "--instance", str(mini_dir)]) == 1
    out = capsys.readouterr().out
    assert out.splitlines() == [
        f"{run_dir}: REJECTED",
        f"  [fatal] file_missing: {run_dir} is a run folder, not a submission: "
        f"rap submit prepare {run_dir} --out subs/my-model.jsonl writes one",
    ]


# -- a line cut short ------------------------------------------------------------------------------------------
def test_a_line_cut_short_is_named_as_such_with_what_to_do(run_dir: Path, mini_dir: Path, tmp_path: Path, capsys):
    """A line cut inside a string (then a newline: "Invalid control character") or where a value
    ends ("Expecting ',' delimiter", which said "at column 1") is named: the file, the line, the
    line's own column, that it was cut short, and that the command that wrote it writes it again
    (here: the same rap run, which rewrites predictions.jsonl from the units it kept)."""
    whole = (run_dir / "predictions.jsonl").read_bytes()
    lines = whole.splitlines(keepends=True)
    cut_in_string = lines[2].index(b'"manifest_hash": "') + 30
    cut_after_value = lines[3].index(b', "D1"')
    torn = run_dir.parent / "torn"
    shutil.copytree(run_dir, torn)
    (torn / "predictions.jsonl").write_bytes(
        b"".join([*lines[:2], lines[2][:cut_in_string] + b"\n", lines[3][:cut_after_value] + b"\n", *lines[4:]])
    )
    assert (
        _call(["score", str(mini_dir), str(torn / "predictions.jsonl"), "--split", "all"]) == 1
    )  # a file with problems
    (line,) = [x for x in capsys.readouterr().err.splitlines() if "bad_json" in x]
    assert line.startswith(f"{torn}/predictions.jsonl: [error] bad_json: 2 row(s) are cut short, as a torn or ")
    assert "write it again with the command that wrote it: rap run rewrites RUN/predictions.jsonl" in line
    assert f"line 3: Invalid control character at column {cut_in_string + 1}" in line
    assert f"line 4: Expecting ',' delimiter at column {cut_after_value + 1}" in line
    assert line.endswith(": lines 3, 4")
    # following it: the same rap run reuses every unit and writes the whole file again
    argv = ["run", str(mini_dir), "--backend", "reference", "--conditions", "A0", "--fields", "f000"]
    assert main([*argv, "--no-progress", "--out", str(torn)]) == 0
    assert (torn / "predictions.jsonl").read_bytes() == whole
    capsys.readouterr()


def test_a_badly_formed_line_is_not_called_cut_short(tmp_path: Path) -> None:
    from rap_benchmark.evaluation.predictions import ProblemKind, load_predictions

    path = tmp_path / "p.jsonl"
    path.write_text('{"model": "m", "D0": 1,, "D1": 2}\n{"model": "m", "D0": 1, "D1": 2}\n', encoding="utf-8")
    (problem,) = [p for p in load_predictions(path)[1] if p.kind is ProblemKind.BAD_JSON]
    assert problem.message.startswith("1 row(s) are not valid JSON (skipped)"), problem.message


def test_a_file_cut_off_at_its_end_says_what_to_do(run_dir: Path, tmp_path: Path) -> None:
    from rap_benchmark.evaluation.predictions import ProblemKind, load_predictions

    path = tmp_path / "p.jsonl"
    path.write_bytes((run_dir / "predictions.jsonl").read_bytes()[:-40])
    (problem,) = load_predictions(path)[1]
    assert problem.kind is ProblemKind.TRUNCATED
    assert problem.message.endswith(
        "so none of it is scored: write it again with the command that wrote it: "
        "rap run rewrites RUN/predictions.jsonl from the units it kept"
    )


# -- a misspelt option -----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("argv", "line"),
    [
        (
            ["run", "build/mini", "--backend", "reference", "--conditons", "A0", "--out", "r"],
            "rap run: unrecognized argument --conditons; did you mean --conditions? (see rap run --help)",
        ),
        (
            ["citecast", "run", "build/cc", "--backnd", "constant", "--out", "r"],
            "rap citecast run: unrecognized argument --backnd; did you mean --backend? (see rap citecast run --help)",
        ),
        (
            ["leaderboard", "score", "p.jsonl", "--instance", "i", "--out", "b", "--splt-models"],
            "rap leaderboard score: unrecognized argument --splt-models; did you mean --split-models? "
            "(see rap leaderboard score --help)",
        ),
        (["--verison"], "rap: unrecognized argument --verison; did you mean --version? (see rap --help)"),
        (
            ["run", "build/mini", "--conditons=A0", "--limt", "3", "--out", "r"],
            "rap run: unrecognized arguments --conditons (did you mean --conditions?), --limt (did you mean --limit?) "
            "(see rap run --help)",
        ),
        (["info", "build/mini", "--zzzz"], "rap info: unrecognized argument --zzzz (see rap info --help)"),
        (["info", "build/mini", "extra"], "rap info: unrecognized argument extra (see rap info --help)"),
    ],
    ids=["run", "citecast-run", "leaderboard-score", "top-level", "two-options", "no-close-option", "a-stray-word"],
)
def test_a_misspelt_option_is_refused_by_its_command_with_the_closest_one(argv, line, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert _one_line(capsys, argv) == line
    assert list(tmp_path.iterdir()) == []


def test_a_misspelt_option_in_a_real_process(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "rap_benchmark", "run", "build/mini", "--conditons", "A0", "--out", "r"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 2 and proc.stdout == ""
    assert (
        proc.stderr == "rap run: unrecognized argument --conditons; did you mean --conditions? (see rap run --help)\n"
    )


# -- rap citecast run ends as rap run does ---------------------------------------------------------------------
def test_citecast_run_ends_in_a_summary_and_a_next_line(citecast_embedded_dir: Path, tmp_path: Path, capsys):
    out = tmp_path / "const3"
    argv = ["citecast", "run", str(citecast_embedded_dir), "--backend", "constant", "--limit", "3", "--no-progress"]
    assert main([*argv, "--out", str(out)]) == 0
    lines = capsys.readouterr().out.splitlines()
    rows = [json.loads(x) for x in (out / "predictions.jsonl").read_text(encoding="utf-8").splitlines()]
    mean = sum(r["reward"] for r in rows) / len(rows)
    assert lines == [
        "units: 3 selected, 3 run now, 0 already done (reused)",
        "run now: 3 valid, 0 invalid",
        "tokens: 0; cost: $0.0000",
        f"reward: mean {mean:.4f} over 3 tasks (3 submitted; a task without a valid submission scores 0)",
        f"predictions: {out}/predictions.jsonl (3 rows)",
        f"next: rap citecast sweep {citecast_embedded_dir} --out {out}-sweep   # the baselines' reward, to compare",
    ]
    assert main([*argv, "--out", str(out), "--json"]) == 0  # the machine-readable form, as rap run --json
    tallies = json.loads(capsys.readouterr().out)
    assert tallies["mean_reward"] == pytest.approx(mean) and tallies["skipped"] == 3
    assert tallies["predictions"] == str(out / "predictions.jsonl")


def test_citecast_run_against_an_evaluation_server_names_who_scores_it(
    citecast_embedded_dir: Path, tmp_path: Path, capsys, monkeypatch
):
    """An evaluation-mode server returns no reward: the summary says so, and who scores it."""
    from citecast_http import http_client

    import rap_benchmark.citecast.client as client_module
    from rap_benchmark.citecast.env import CiteCastEnv, Mode

    env = CiteCastEnv.from_instance(citecast_embedded_dir, mode=Mode.EVALUATION)
    monkeypatch.setattr(
        client_module, "HttpClient", lambda url, api_key=None, **_: http_client(env, api_key, {"k": "a"})
    )
    out = tmp_path / "eval"
    argv = ["citecast", "run", str(citecast_embedded_dir), "--url", "http://server", "--api-key", "k"]
    assert main([*argv, "--backend", "constant", "--limit", "2", "--no-progress", "--out", str(out)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "reward: not returned (an evaluation-mode server keeps it until its operator scores the sessions)" in lines
    assert lines[-1] == (
        f"next: the server's operator scores it: rap citecast score {citecast_embedded_dir} --store STORE --key KEY"
    )
