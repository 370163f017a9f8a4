"""A refusal is reported as one, never as a traceback nor as a success.

Regressions: ``rap leaderboard score`` of files that were all refused crashed in the forest plot
(``KeyError: 'spearman'``) and left a board folder without its page; ``rap citecast leak-probe
--url`` read its key only from ``$CITECAST_API_KEY`` while ``rap citecast run --url`` read only
``--api-key``, and a missing key or an unreachable server ended in a traceback.

A board whose every file is refused is still a complete board folder (what the board code is
built for: the empty-board text, the empty forest figure, the page's list of every verdict), so
the maintainer can read and publish the refusals; the command exits 1 and says on stderr that
nothing was accepted.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from matplotlib.image import imread

from rap_benchmark.cli import main

BOARD_FILES = ("board.json", "cost_vs_score.png", "forest.png", "index.html")


def _bad_submission(root: Path) -> Path:
    """A prediction file the validator refuses: an unknown column, every required one missing, no metadata."""
    path = root / "bad.jsonl"
    path.write_text('{"bad": 1}\n', encoding="utf-8")
    return path


def _refused_board(out: Path, capsys: pytest.CaptureFixture[str], files: tuple[str, ...], stem: str) -> str:
    """The board folder is complete (every figure an image, the page there), and stderr ends with one
    line saying that nothing was accepted; the stderr text is returned."""
    _, err = capsys.readouterr()
    assert "Traceback" not in err
    assert err.splitlines()[-1].startswith("rap leaderboard score: no "), err
    for name in (*BOARD_FILES, *files):
        assert (out / name).is_file(), name
    for png in ("forest.png", "cost_vs_score.png"):
        assert imread(out / png).ndim == 3  # a real image, read back by matplotlib
    assert "No accepted submissions." in (out / f"{stem}.md").read_text(encoding="utf-8")
    return err


def test_a_board_whose_every_submission_is_refused_is_complete_and_exits_1(mini_dir: Path, tmp_path: Path, capsys):
    bad, out = _bad_submission(tmp_path), tmp_path / "board"
    code = main(["leaderboard", "score", str(bad), "--instance", str(mini_dir), "--out", str(out)])
    assert code == 1
    files = ("leaderboard.csv", "leaderboard.md", "submissions.json", "contrasts.csv", "strict_vs_exposed.csv")
    err = _refused_board(out, capsys, files, "leaderboard")
    assert "no submission accepted (1 refused)" in err and str(out / "submissions.json") in err
    (verdict,) = json.loads((out / "submissions.json").read_text(encoding="utf-8"))
    assert verdict["accepted"] is False and any("unknown_column" in p for p in verdict["problems"])
    page = (out / "index.html").read_text(encoding="utf-8")
    assert "bad.jsonl" in page and "unknown_column" in page  # the page lists the refusal and its reasons


def test_a_live_board_whose_every_reveal_is_refused_is_complete_and_exits_1(mini_dir: Path, tmp_path: Path, capsys):
    bad, out = _bad_submission(tmp_path), tmp_path / "live"
    seals = tmp_path / "seals.jsonl"
    seals.write_text(json.dumps({"sealed_at": "2025-01-01T00:00:00Z", "commitment": "0" * 64}) + "\n")
    argv = ["leaderboard", "score", str(bad), "--live", "--seals", str(seals), "--instance", str(mini_dir)]
    assert main([*argv, "--out", str(out)]) == 1
    err = _refused_board(
        out, capsys, ("leaderboard_live.csv", "leaderboard_live.md", "reveals.json"), "leaderboard_live"
    )
    assert "no reveal accepted (1 refused)" in err
    (verdict,) = json.loads((out / "reveals.json").read_text(encoding="utf-8"))
    assert verdict["accepted"] is False and verdict["message"] in (out / "index.html").read_text(encoding="utf-8")


def test_a_board_with_one_refusal_names_how_many(mini_dir: Path, mini, tmp_path: Path, capsys):
    """One good file and one bad: the good one is ranked, the command still exits 1 and counts the refusal."""
    from rap_benchmark.evaluation.predictions import write_predictions
    from rap_benchmark.evaluation.scoring import baseline_predictions
    from rap_benchmark.evaluation.submissions import split_by_model

    frame, _ = baseline_predictions(mini)
    mixed = write_predictions(frame[frame["model"] == "baseline/ewma"].reset_index(drop=True), tmp_path / "all.jsonl")
    (good,) = split_by_model(mixed, tmp_path / "subs", meta={})
    out = tmp_path / "board"
    argv = ["leaderboard", "score", str(good), str(_bad_submission(tmp_path)), "--instance", str(mini_dir)]
    assert main([*argv, "--out", str(out)]) == 1
    out_text, err = capsys.readouterr()
    assert "Traceback" not in err and "baseline/ewma" in out_text
    assert err.splitlines()[-1].startswith("rap leaderboard score: 1 of 2 submissions refused"), err
    assert imread(out / "forest.png").ndim == 3
