"""The CLI's one error boundary: a user mistake is one line, ``rap <cmd>: <message>``, exit 2, no
traceback, and nothing written.

Regression tests for issue 11 ("tracebacks for user mistakes"): ``rap run --conditions A9``, a
missing instance folder, ``--shard 3``, an unknown spec key, and ``rap search``/``rap score`` on a
tampered folder each ended in a traceback, and ``rap run`` wrote ``run.json`` before it checked
``--fields``, so the refused run pinned the folder.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rap_benchmark.cli import main

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def ws(mini_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A workspace: a tampered copy of mini, bad input files, a pinned run folder."""
    root = tmp_path_factory.mktemp("cli_errors")
    tampered = root / "tampered"
    shutil.copytree(mini_dir, tampered, ignore=shutil.ignore_patterns(".cache"))
    with (tampered / "blocks.parquet").open("ab") as fh:
        fh.write(b"\0")
    (root / "bad-key.json").write_text(json.dumps({"seed": 1, "n_feilds": 12}), encoding="utf-8")
    (root / "not-json.json").write_text("{seed: 1", encoding="utf-8")
    (root / "bad-order.json").write_text(json.dumps({"origins": ["2025-01-01", "2024-01-01"]}), encoding="utf-8")
    (root / "prices.json").write_text("[1, 2", encoding="utf-8")
    (root / "calls.jsonl").write_text('{"field_id": "f000"\n', encoding="utf-8")
    (root / "preds.jsonl").write_text("", encoding="utf-8")
    (root / "a-file").write_text("not a folder\n", encoding="utf-8")
    pinned = root / "pinned"
    pinned.mkdir()
    (pinned / "run.json").write_text(json.dumps({"model": "someone/else"}) + "\n", encoding="utf-8")
    return root


def _snapshot(*roots: Path) -> dict[str, tuple[int, int]]:
    """Every file (size, mtime) and folder under the roots; ``.cache/`` (derived, never hashed) is
    excluded, and so are folder mtimes (a run folder's lock file comes and goes while it is checked)."""
    out = {}
    for root in roots:
        for path in root.rglob("*"):
            if ".cache" in path.relative_to(root).parts:
                continue
            st = path.stat()
            out[str(path)] = (st.st_size, st.st_mtime_ns) if path.is_file() else (-1, 0)
    return out


# (id, argv with {mini}/{ws} placeholders, the command's name, text the message must contain)
CASES: list[tuple[str, list[str], str, str]] = [
    # argparse-level mistakes
    ("unknown-command", ["frobnicate"], "rap", "frobnicate"),
    ("run-no-out", ["run", "{mini}"], "rap run", "--out"),
    ("run-limit-zero", ["run", "{mini}", "--out", "{ws}/r", "--limit", "0"], "rap run", "--limit"),
    ("run-concurrency-word", ["run", "{mini}", "--out", "{ws}/r", "--concurrency", "many"], "rap run", "many"),
    ("run-bad-backend", ["run", "{mini}", "--out", "{ws}/r", "--backend", "gpt"], "rap run", "gpt"),
    ("build-bad-instance", ["build", "--instance", "huge", "--out", "{ws}/b"], "rap build", "huge"),
    ("score-bad-split", ["score", "{mini}", "{ws}/preds.jsonl", "--split", "train"], "rap score", "train"),
    (
        "search-bad-regime",
        ["search", "{mini}", "--field", "f000", "--origin", "2025-01-01", "--regime", "x", "q"],
        "rap search",
        "'x'",
    ),
    (
        "report-negative-fields",
        ["report", "{mini}", "{ws}/preds.jsonl", "--out", "{ws}/rep", "--fields", "-1"],
        "rap report",
        "--fields",
    ),
    # rap run: every argument is checked before run.json is written
    (
        "run-condition-A9",
        ["run", "{mini}", "--backend", "reference", "--conditions", "A9", "--out", "{ws}/r"],
        "rap run",
        "A9",
    ),
    (
        "run-no-conditions",
        ["run", "{mini}", "--backend", "reference", "--conditions", ",", "--out", "{ws}/r"],
        "rap run",
        "--conditions",
    ),
    (
        "run-missing-instance",
        ["run", "{ws}/nowhere", "--backend", "reference", "--out", "{ws}/r"],
        "rap run",
        "no instance folder",
    ),
    (
        "run-not-an-instance",
        ["run", "{ws}/pinned", "--backend", "reference", "--out", "{ws}/r"],
        "rap run",
        "not a built instance",
    ),
    (
        "run-tampered",
        ["run", "{ws}/tampered", "--backend", "reference", "--out", "{ws}/r"],
        "rap run",
        "blocks.parquet",
    ),
    (
        "run-shard-3",
        ["run", "{mini}", "--backend", "reference", "--shard", "3", "--out", "{ws}/r"],
        "rap run",
        "--shard",
    ),
    (
        "run-shard-4-of-4",
        ["run", "{mini}", "--backend", "reference", "--shard", "4/4", "--out", "{ws}/r"],
        "rap run",
        "4/4",
    ),
    (
        "run-unknown-field",
        ["run", "{mini}", "--backend", "reference", "--fields", "f999", "--out", "{ws}/r"],
        "rap run",
        "f999",
    ),
    (
        "run-unknown-origin",
        ["run", "{mini}", "--backend", "reference", "--origins", "2030-01-01", "--out", "{ws}/r"],
        "rap run",
        "2030-01-01",
    ),
    (
        "run-bad-date",
        ["run", "{mini}", "--backend", "reference", "--origins", "2025-13-01", "--out", "{ws}/r"],
        "rap run",
        "2025-13-01",
    ),
    (
        "run-openai-no-url",
        ["run", "{mini}", "--backend", "openai", "--model", "m", "--out", "{ws}/r"],
        "rap run",
        "--base-url",
    ),
    (
        "run-bad-prices",
        ["run", "{mini}", "--backend", "reference", "--prices", "{ws}/prices.json", "--out", "{ws}/r"],
        "rap run",
        "prices.json",
    ),
    (
        "run-pinned-folder",
        ["run", "{mini}", "--backend", "reference", "--out", "{ws}/pinned"],
        "rap run",
        "different run",
    ),
    ("run-out-is-a-file", ["run", "{mini}", "--backend", "reference", "--out", "{ws}/a-file"], "rap run", "a-file"),
    # build, verify, info
    ("build-unknown-spec-key", ["build", "--spec", "{ws}/bad-key.json", "--out", "{ws}/b"], "rap build", "n_feilds"),
    ("build-spec-not-json", ["build", "--spec", "{ws}/not-json.json", "--out", "{ws}/b"], "rap build", "not-json.json"),
    ("build-spec-missing", ["build", "--spec", "{ws}/nowhere.json", "--out", "{ws}/b"], "rap build", "nowhere.json"),
    (
        "build-no-corpus",
        ["build", "--instance", "arxiv-sample", "--source", "{ws}/nowhere", "--out", "{ws}/b"],
        "rap build",
        "no corpus",
    ),
    # the refusal names the kind of folder it would have replaced (it said "not a built instance" for all)
    (
        "build-out-not-an-instance",
        ["build", "--instance", "mini", "--out", "{ws}/pinned"],
        "rap build",
        "pinned is a non-empty folder that is not a RAP instance",
    ),
    *(
        (
            f"{verb}-out-not-an-instance",
            [verb, "{mini}", "--source", "{mini}", *more, "--out", "{ws}/pinned"],
            f"rap {verb}",
            "pinned is a non-empty folder that is not a RAP instance",
        )
        for verb, more in (("extend", ["--origin", "2026-07-01"]), ("resolve", []))
    ),
    (
        "citecast-build-out-not-an-instance",
        ["citecast", "build", "--out", "{ws}/pinned"],
        "rap citecast build",
        "pinned is a non-empty folder that is not a CiteCast instance",
    ),
    ("build-spec-bad-origins", ["build", "--spec", "{ws}/bad-order.json", "--out", "{ws}/b"], "rap build", "origins"),
    ("verify-missing", ["verify", "{ws}/nowhere"], "rap verify", "nowhere"),
    ("info-missing", ["info", "{ws}/nowhere"], "rap info", "nowhere"),
    ("info-tampered", ["info", "{ws}/tampered"], "rap info", "blocks.parquet"),
    # search
    (
        "search-tampered",
        ["search", "{ws}/tampered", "--field", "f000", "--origin", "2025-01-01", "graph"],
        "rap search",
        "blocks.parquet",
    ),
    (
        "search-unknown-field",
        ["search", "{mini}", "--field", "f999", "--origin", "2025-01-01", "graph"],
        "rap search",
        "f999",
    ),
    (
        "search-bad-date",
        ["search", "{mini}", "--field", "f000", "--origin", "2025-02-30", "graph"],
        "rap search",
        "2025-02-30",
    ),
    ("search-no-query", ["search", "{mini}", "--field", "f000", "--origin", "2025-01-01"], "rap search", "query"),
    ("audit-tampered", ["audit", "search", "{ws}/tampered", "{ws}/calls.jsonl"], "rap audit search", "blocks.parquet"),
    ("audit-bad-calls", ["audit", "search", "{mini}", "{ws}/calls.jsonl"], "rap audit search", "calls.jsonl:1"),
    ("audit-missing-calls", ["audit", "search", "{mini}", "{ws}/nowhere.jsonl"], "rap audit search", "nowhere.jsonl"),
    ("audit-not-a-run", ["audit", "search", "{mini}", "{ws}/tampered"], "rap audit search", "not a run folder"),
    ("audit-one-arg", ["audit", "search", "{mini}"], "rap audit search", "CALLS"),
    # scoring and reports
    ("score-tampered", ["score", "{ws}/tampered", "{ws}/preds.jsonl"], "rap score", "blocks.parquet"),
    ("score-missing-file", ["score", "{mini}", "{ws}/nowhere.jsonl"], "rap score", "nowhere.jsonl"),
    ("baselines-tampered", ["baselines", "{ws}/tampered", "--out", "{ws}/b.jsonl"], "rap baselines", "blocks.parquet"),
    ("report-missing-file", ["report", "{mini}", "{ws}/nowhere.jsonl", "--out", "{ws}/rep"], "rap report", "nowhere"),
    (
        "report-missing-registry",
        ["report", "{mini}", "{ws}/preds.jsonl", "--out", "{ws}/rep", "--registry", "{ws}/no.json"],
        "rap report",
        "no.json",
    ),
    # run folders
    ("merge-not-a-run", ["runs", "merge", "{ws}/m", "{ws}/nowhere"], "rap runs merge", "not a run folder"),
    ("diagnose-not-a-run", ["diagnose", "trace-stats", "{mini}", "{ws}/nowhere"], "rap diagnose", "not a run folder"),
    (
        "sft-export-not-a-run",
        ["sft", "export", "{mini}", "{ws}/nowhere", "--out", "{ws}/s.jsonl"],
        "rap sft export",
        "not a run folder",
    ),
    (
        "sft-export-bad-condition",
        ["sft", "export", "{mini}", "{ws}/pinned", "--out", "{ws}/s.jsonl", "--conditions", "B1"],
        "rap sft export",
        "B1",
    ),
    (
        "diagnose-bad-variant",
        ["diagnose", "oracle", "{mini}", "{ws}/pinned", "--backend", "reference", "--variants", "x"],
        "rap diagnose",
        "oracle variant 'x'",
    ),
    (
        "baselines-negative-seed",
        ["baselines", "{mini}", "--random-seed", "-1", "--out", "{ws}/b.jsonl"],
        "rap baselines",
        "--random-seed",
    ),
    ("export-hf-tampered", ["hub", "export", "{ws}/tampered", "--out", "{ws}/hf"], "rap hub export", "blocks.parquet"),
    (
        "audit-analyse-bad-key",
        ["audit", "analyse", "{mini}", "{ws}/prices.json", "{ws}/prices.json"],
        "rap audit analyse",
        "prices.json",
    ),
    (
        "report-bad-registry",
        ["report", "{mini}", "{ws}/preds.jsonl", "--out", "{ws}/rep", "--registry", "{ws}/not-json.json"],
        "rap report",
        "not-json.json",
    ),
    ("audit-truth-missing", ["audit", "truth", "{ws}/nowhere"], "rap audit truth", "nowhere"),
    ("demo-out-is-a-file", ["demo", "--out", "{ws}/a-file"], "rap demo", "a-file"),
    ("demo-out-holds-other-files", ["demo", "--out", "{ws}/pinned"], "rap demo", "did not write"),
    # a RAP instance or a missing folder where a CiteCast instance is expected (it said "SHA256SUMS is missing")
    ("citecast-serve-rap-instance", ["citecast", "serve", "{mini}"], "rap citecast serve", "is a RAP instance"),
    ("citecast-score-no-folder", ["citecast", "score", "{ws}/nowhere"], "rap citecast score", "no such folder"),
    # serve's counts are parsed by the shared types, in their words (it checked them by hand after parsing)
    *(
        (
            f"citecast-serve-{flag[2:]}-{value}",
            ["citecast", "serve", "{ws}/nowhere", flag, value],
            "rap citecast serve",
            f"argument {flag}: {value!r} is not {what}",
        )
        for flag, value, what in (
            ("--workers", "0", "a positive integer"),
            ("--workers", "-2", "a positive integer"),
            ("--session-ttl-s", "0", "a number > 0"),
            ("--session-ttl-s", "nan", "a number > 0"),
            ("--session-ttl-s", "inf", "a number > 0"),
            ("--port", "99999", "a port (0 to 65535)"),
            ("--port", "-5", "a port (0 to 65535)"),
            ("--port", "http", "a port (0 to 65535)"),
        )
    ),
    # a seed numpy refuses was a ValueError traceback from inside the generator
    (
        "citecast-build-seed-negative",
        ["citecast", "build", "--instance", "embedded", "--out", "{ws}/cc", "--seed", "-1"],
        "rap citecast build",
        "argument --seed: '-1' is not an integer >= 0",
    ),
    (
        "citecast-build-n-tasks-0",
        ["citecast", "build", "--instance", "embedded", "--out", "{ws}/cc", "--n-tasks", "0"],
        "rap citecast build",
        "argument --n-tasks: '0' is not a positive integer",
    ),
    # counts, seeds and resamples are bounded where they are parsed (each was a numpy traceback, an
    # IndexError, [nan, nan] intervals or an empty sample written with exit 0)
    *(
        (
            f"audit-sample-{flag[2:]}-{value}",
            ["audit", "sample", "{mini}", "--out", "{ws}/as", flag, value],
            "rap audit sample",
            flag,
        )
        for flag, value in (
            ("--fields", "-1"),
            ("--fields", "0"),
            ("--per-cell", "-1"),
            ("--population", "-1"),
            ("--retrieved", "-1"),
            ("--seed", "-1"),
        )
    ),
    (
        "audit-sample-nothing-to-draw",
        ["audit", "sample", "{mini}", "--out", "{ws}/as", "--per-cell", "0", "--population", "0", "--retrieved", "0"],
        "rap audit sample",
        "nothing to draw",
    ),
    *(
        (
            f"audit-parallel-{flag[2:]}-{value}",
            ["audit", "parallel", "{mini}", "--out", "{ws}/p.csv", flag, value],
            "rap audit parallel",
            flag,
        )
        for flag, value in (("--resamples", "0"), ("--seed", "-1"))
    ),
    *(
        (
            f"audit-analyse-{flag[2:]}-{value}",
            ["audit", "analyse", "{mini}", "{ws}/prices.json", "{ws}/prices.json", flag, value],
            "rap audit analyse",
            flag,
        )
        for flag, value in (("--resamples", "0"), ("--permutations", "0"), ("--seed", "-1"))
    ),
    # the maintainer's flags are refused as such, not blamed on every submission
    *(
        (
            f"leaderboard-{flag[2:]}-{value}",
            ["leaderboard", "score", "{ws}/preds.jsonl", "--instance", "{mini}", "--out", "{ws}/board", flag, value],
            "rap leaderboard score",
            flag,
        )
        for flag, value in (("--seed", "-5"), ("--resamples", "0"))
    ),
    # SFT reads Forecast conditions with Search only (A2 was a ValueError traceback from export and
    # accepted by the gate, which scored its State answers against y; A0 crashed the gate)
    *(
        (
            f"sft-{action}-{condition}",
            ["sft", action, "{mini}", *paths, "--conditions", f"A1,{condition}"],
            f"rap sft {action}",
            needle,
        )
        for action, paths in (("export", ["{ws}/pinned", "--out", "{ws}/s.jsonl"]), ("gate", ["{ws}/pinned"] * 2))
        for condition, needle in (
            ("A0", "A0 is closed-book"),
            ("A2", "A2 is a State condition"),
            ("A4", "A4 is a State condition"),
        )
    ),
    # ... and refused before the instance is loaded (a tampered one fails its slow hash check)
    *(
        (
            f"sft-{action}-A0-before-load",
            ["sft", action, "{ws}/tampered", *paths, "--conditions", "A0"],
            f"rap sft {action}",
            "A0 is closed-book",
        )
        for action, paths in (("export", ["{ws}/pinned", "--out", "{ws}/s.jsonl"]), ("gate", ["{ws}/pinned"] * 2))
    ),
    (
        "diagnose-replay-A9-before-load",
        ["diagnose", "replay", "{ws}/tampered", "{ws}/pinned", "--backend", "reference", "--conditions", "A9"],
        "rap diagnose",
        "A9",
    ),
    # CiteCast: a count below 1, a server that cannot be reached
    (
        "citecast-leak-probe-n-0",
        ["citecast", "leak-probe", "{ws}/nowhere", "--n", "0"],
        "rap citecast leak-probe",
        "--n",
    ),
    (
        "citecast-run-unreachable",
        ["citecast", "run", "{ws}/nowhere", "--url", "http://127.0.0.1:9", "--backend", "constant", "--out", "{ws}/cc"],
        "rap citecast run",
        "cannot reach the CiteCast server at http://127.0.0.1:9",
    ),
]


def _argv(template: list[str], mini: Path, ws: Path) -> list[str]:
    return [a.replace("{mini}", str(mini)).replace("{ws}", str(ws)) for a in template]


def _call(argv: list[str]) -> int:
    try:
        return main(argv)
    except SystemExit as exc:  # argparse errors exit from parse_args
        return exc.code if isinstance(exc.code, int) else 1


def test_at_least_thirty_cases():
    assert len(CASES) >= 30
    assert len({c[0] for c in CASES}) == len(CASES)


@pytest.mark.parametrize(("argv", "prog", "needle"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_user_error_is_one_line_exit_2_and_writes_nothing(
    argv, prog, needle, ws: Path, mini_dir: Path, capsys, monkeypatch
):
    monkeypatch.chdir(ws)  # anything written relative to the working directory is seen too
    before = _snapshot(ws, mini_dir)
    code = _call(_argv(argv, mini_dir, ws))
    out, err = capsys.readouterr()
    assert code == 2, (out, err)
    assert "Traceback" not in err + out
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"{prog}: "), err
    assert needle in lines[0], err
    assert _snapshot(ws, mini_dir) == before, "a refused command wrote files"


@pytest.mark.parametrize(
    "argv",
    [
        ["run", "{mini}", "--backend", "reference", "--conditions", "A9", "--out", "{ws}/r"],
        ["run", "{ws}/nowhere", "--backend", "reference", "--out", "{ws}/r"],
        ["search", "{ws}/tampered", "--field", "f000", "--origin", "2025-01-01", "graph"],
        ["build", "--spec", "{ws}/bad-key.json", "--out", "{ws}/b"],
        ["run", "{mini}", "--out"],
    ],
    ids=["condition", "missing-instance", "tampered-search", "spec-key", "argparse"],
)
def test_user_error_in_a_real_process(argv, ws: Path, mini_dir: Path):
    """Through a real interpreter (as the ``rap`` script runs it): one stderr line, exit 2."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    cmd = [sys.executable, "-c", "from rap_benchmark.cli import main; raise SystemExit(main())"]
    proc = subprocess.run([*cmd, *_argv(argv, mini_dir, ws)], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert len(proc.stderr.splitlines()) == 1 and proc.stderr.startswith("rap "), proc.stderr


def test_harvest_without_network_is_one_line(tmp_path: Path):
    """Regression: ``rap citecast build --instance harvest`` with no network ended in an
    ``httpx.ConnectError`` traceback. A proxy on a closed local port stands in for no network."""
    closed = "http://127.0.0.1:9"
    env = {**os.environ, "PYTHONPATH": str(REPO), "NO_PROXY": "", "no_proxy": ""}
    env.update(
        {k: closed for k in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")}
    )
    out = tmp_path / "cc"
    argv = ["citecast", "build", "--instance", "harvest", "--out", str(out)]
    proc = subprocess.run(
        [sys.executable, "-m", "rap_benchmark", *argv], capture_output=True, text=True, env=env, timeout=300
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip() and not line.startswith("arXiv days")]
    assert len(lines) == 1 and lines[0].startswith("rap citecast build: cannot reach export.arxiv.org"), proc.stderr
    assert not out.exists()  # the progress bar of the first step is all that showed before


def test_a_closed_pipe_ends_quietly(mini_dir: Path):
    """Regression: ``rap build ... | head -3`` ended in a BrokenPipeError traceback. The reader is
    gone before rap writes: exit 141 (128 + SIGPIPE) and nothing on stderr."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    cmd = [sys.executable, "-m", "rap_benchmark", "show", str(mini_dir), "--field", "f003"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    proc.stdout.close()
    err = proc.stderr.read().decode()
    proc.stderr.close()
    assert proc.wait(timeout=300) == 141 and err == "", err


def test_debug_shows_the_traceback(ws: Path):
    """``rap --debug`` re-raises the UserError so the traceback is printed."""
    from rap_benchmark.core.errors import UserError

    with pytest.raises(UserError, match="no instance folder"):
        main(["--debug", "info", str(ws / "nowhere")])
    with pytest.raises(UserError, match="--conditions"):  # after the command too
        main(["run", str(ws / "nowhere"), "--conditions", "A9", "--out", str(ws / "r"), "--debug"])
    assert not (ws / "r").exists()


def test_a_refused_run_does_not_pin_the_folder(mini_dir: Path, tmp_path: Path, capsys):
    """Regression (issue 11): ``rap run --fields f999`` wrote run.json before refusing, so the
    corrected rerun was refused as "a different run"."""
    out = tmp_path / "run"
    base = ["run", str(mini_dir), "--backend", "reference", "--model", "reference/search-hits", "--out", str(out)]
    assert main([*base, "--fields", "f999", "--conditions", "A0"]) == 2
    assert not out.exists()
    assert main([*base, "--fields", "f000", "--origins", "2025-01-01", "--conditions", "A0", "--no-progress"]) == 0
    assert (out / "run.json").is_file() and (out / "predictions.jsonl").is_file()
    capsys.readouterr()


def test_one_line_bounds_long_messages():
    from rap_benchmark.core.errors import MAX_MESSAGE_CHARS, one_line

    text = one_line("first line\n  second line\n" + "x" * 10_000)
    assert "\n" not in text and len(text) <= MAX_MESSAGE_CHARS and text.startswith("first line; second line")
