"""The board folder is built whole and swapped in at once (``rap leaderboard score --out``).

Regression: the board's files were written into ``--out`` one after another, so a failure while
drawing the page left old and new files mixed; and ``--split-models`` wrote its split submissions
into ``--out/split/`` before scoring, so a board built beside ``--out`` named the temporary
folder in its verdicts. Now every file, split parts included, is written into a folder beside
``--out`` that takes its place in one swap, and names the final paths; a failure or a kill leaves
the previous board byte-identical; a folder that is not a board is refused, never replaced.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from rap_benchmark.cli import main

RESAMPLES = ("--resamples", "50")
REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def baselines(mini_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """rap baselines' file: one file of several models, what --split-models splits."""
    out = tmp_path_factory.mktemp("board_folder") / "baselines.jsonl"
    assert main(["baselines", str(mini_dir), "--out", str(out)]) == 0
    return out


def _score(mini_dir: Path, out: Path, *files: Path, extra: tuple[str, ...] = ()) -> list[str]:
    where = ["--instance", str(mini_dir), "--out", str(out)]
    return ["leaderboard", "score", *map(str, files), *where, *RESAMPLES, *extra]


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _board(mini_dir: Path, baselines: Path, out: Path) -> dict[str, bytes]:
    """A --split-models board at ``out``; its files."""
    assert main(_score(mini_dir, out, baselines, extra=("--split-models",))) == 0
    return _snapshot(out)


def test_split_models_board_names_its_final_paths(mini_dir: Path, baselines: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "board"
    files = _board(mini_dir, baselines, out)
    _, err = capsys.readouterr()
    verdicts = json.loads((out / "submissions.json").read_text(encoding="utf-8"))
    parts = sorted((out / "split" / "baselines").glob("*.jsonl"))
    assert len(parts) > 1 and all(v["accepted"] for v in verdicts)
    assert sorted(v["submission"] for v in verdicts) == sorted(map(str, parts))
    for part in parts:
        assert f"{part}: accepted" in err  # stderr names them where they are
    leaked = [name for name, data in files.items() if b".board." in data or b"building-" in data]
    assert not leaked and not [p.name for p in tmp_path.iterdir() if p.name != "board"]
    # a second run replaces the whole board: a split part of the first that the second lacks is gone
    (out / "split" / "baselines" / "stale.jsonl").write_text("{}\n", encoding="utf-8")
    assert _board(mini_dir, baselines, out) == files


def test_a_failure_while_drawing_the_page_leaves_the_previous_board(
    mini_dir: Path, baselines: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The forest figure is drawn, then the cost figure fails: nothing of the new board shows."""
    from rap_benchmark.evaluation.board import page
    from rap_benchmark.evaluation.live import LiveResult, write_live_board

    out = tmp_path / "board"
    before = _board(mini_dir, baselines, out)

    def broken(*_args: object, **_kwargs: object) -> None:
        raise RuntimeError("drawing failed")

    monkeypatch.setattr(page, "plot_cost_vs_score", broken)
    one = tmp_path / "one" / "part.jsonl"
    one.parent.mkdir()
    part = sorted((out / "split" / "baselines").glob("*.jsonl"))[0]
    for suffix in ("", ".meta.json"):
        shutil.copyfile(f"{part}{suffix}", f"{one}{suffix}")
    for argv in (_score(mini_dir, out, baselines, extra=("--split-models",)), _score(mini_dir, out, one)):
        with pytest.raises(RuntimeError, match="drawing failed"):
            main(argv)
        assert _snapshot(out) == before
        assert sorted(p.name for p in tmp_path.iterdir()) == ["board", "one"]  # the building folder went too
    with pytest.raises(RuntimeError, match="drawing failed"):  # the Forecast-Live board is written the same way
        write_live_board(LiveResult((), pd.DataFrame(), {"instance": "mini"}), out)
    assert _snapshot(out) == before


def test_a_killed_run_leaves_the_previous_board(mini_dir: Path, baselines: Path, tmp_path: Path) -> None:
    """SIGKILL while the page is drawn (no cleanup runs): the previous board stays whole; the next
    run removes what the killed one left and replaces the board."""
    out = tmp_path / "board"
    before = _board(mini_dir, baselines, out)
    argv = _score(mini_dir, out, baselines, extra=("--split-models",))
    kill = (
        "import os, signal, sys\n"
        "from rap_benchmark.evaluation.board import page\n"
        "page.plot_cost_vs_score = lambda *a, **k: os.kill(os.getpid(), signal.SIGKILL)\n"
        "from rap_benchmark.cli import main\n"
        f"sys.exit(main({argv!r}))\n"
    )
    proc = subprocess.run([sys.executable, "-c", kill], cwd=REPO, capture_output=True, timeout=600)
    assert proc.returncode == -9, proc.stderr.decode()[-2000:]
    assert _snapshot(out) == before
    (left,) = [p for p in tmp_path.iterdir() if p.name != "board"]
    assert left.name.startswith(".board.building-") and (left / "split").is_dir()
    assert _board(mini_dir, baselines, out) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["board"]


@pytest.mark.parametrize("live", [False, True], ids=["retrospective", "live"])
def test_a_folder_that_is_not_a_board_is_refused(
    mini_dir: Path, baselines: Path, tmp_path: Path, capsys, live: bool
) -> None:
    extra = ("--live", "--seals", str(tmp_path / "seals.jsonl")) if live else ()
    foreign = tmp_path / "notes"
    foreign.mkdir()
    (foreign / "mine.txt").write_text("keep me\n", encoding="utf-8")
    as_file = tmp_path / "file.txt"
    as_file.write_text("a file\n", encoding="utf-8")
    for out, phrase in ((foreign, "is a non-empty folder that is not a board"), (as_file, "is a file")):
        assert main(_score(mini_dir, out, baselines, extra=extra)) == 2
        (line,) = capsys.readouterr().err.splitlines()
        assert line.startswith("rap leaderboard score: ") and phrase in line, line
    assert _snapshot(foreign) == {"mine.txt": b"keep me\n"} and as_file.read_text() == "a file\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file.txt", "notes"]


def test_an_input_inside_the_board_is_refused(mini_dir: Path, baselines: Path, tmp_path: Path, capsys) -> None:
    """The board is replaced whole, so a submission read from inside it would be deleted: refused."""
    out = tmp_path / "board"
    before = _board(mini_dir, baselines, out)
    capsys.readouterr()
    part = sorted((out / "split" / "baselines").glob("*.jsonl"))[0]
    assert main(_score(mini_dir, out, part)) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"rap leaderboard score: {part} lies inside --out"), line
    assert _snapshot(out) == before
    # the model registry too: it is read before the swap, which would delete it
    registry = out / "registry.json"
    registry.write_text("{}\n", encoding="utf-8")
    assert main(_score(mini_dir, out, baselines, extra=("--registry", str(registry)))) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"rap leaderboard score: {registry} lies inside --out"), line
    assert _snapshot(out) == {**before, "registry.json": b"{}\n"}
