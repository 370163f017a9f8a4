"""Leaderboard submissions: a corpus of bad submissions (generated here, one per kind) each gets a
clear message, none crashes the scorer, and none changes another submission's score."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from rap_benchmark.core.records import DIRECTION_KEYS
from rap_benchmark.evaluation.predictions import write_predictions
from rap_benchmark.evaluation.submissions import score_submissions, validate_submission, write_leaderboard

MODEL = "baseline/ewma"


@pytest.fixture(scope="module")
def good_frame(mini) -> pd.DataFrame:
    from rap_benchmark.evaluation.scoring import baseline_predictions

    frame, _ = baseline_predictions(mini)
    return frame[frame["model"] == MODEL].reset_index(drop=True)


def _meta(mini, **over) -> dict:
    meta = {
        "model": MODEL,
        "knowledge_cutoff": None,
        "conditions": ["A0"],
        "tools": [],
        "attempts": 1,
        "manifest_hash": mini.manifest_hash,
    }
    meta.update(over)
    return {k: v for k, v in meta.items() if v is not ...}


def _write(path: Path, frame: pd.DataFrame, meta: dict | None) -> Path:
    write_predictions(frame, path)
    if meta is not None:
        Path(str(path) + ".meta.json").write_text(json.dumps(meta), encoding="utf-8")
    return path


def _bad_corpus(mini, good: pd.DataFrame, root: Path) -> dict[str, tuple[Path, str]]:
    """kind -> (file, a phrase its message must contain)."""
    root.mkdir(parents=True, exist_ok=True)
    m = _meta(mini)
    out: dict[str, tuple[Path, str]] = {}

    def add(kind: str, phrase: str, build: Callable[[Path], Path]) -> None:
        out[kind] = (build(root / f"{kind}.jsonl"), phrase)

    add("wrong_columns", "missing_column", lambda p: _write_raw(p, good.drop(columns=["D3"]), m))
    add("unknown_column", "unknown_column", lambda p: _write_raw(p, good.assign(secret=1), m))
    add("duplicate_rows", "duplicate", lambda p: _write(p, pd.concat([good, good.head(3)]), m))
    add(
        "unknown_episodes",
        "unknown_episode",
        lambda p: _write(p, pd.concat([good, good.head(2).assign(field_id="no_such_field")]), m),
    )
    add(
        "nan_weights",
        "NaN, which is not JSON",
        lambda p: _write_raw(p, _set(good, 0, "D0", float("nan")), m, allow_nan=True),
    )
    add("negative_weights", "bad_weights", lambda p: _write(p, _set(good, 0, "D1", -0.5), m))
    add("all_zero_weights", "bad_weights", lambda p: _write(p, _zero(good, 1), m))
    add("wrong_manifest_rows", "manifest_hash", lambda p: _write(p, good.assign(manifest_hash="f" * 64), m))
    add(
        "wrong_manifest_meta",
        "metadata: manifest_hash",
        lambda p: _write(p, good, _meta(mini, manifest_hash="e" * 64)),
    )
    add("truncated_jsonl", "truncated", lambda p: _truncate(_write(p, good, m)))
    add("wrong_encoding", "UTF-16", lambda p: _recode(_write(p, good, m)))
    add("empty_file", "empty", lambda p: _touch(p, m))
    add("wrong_types", "bad_type", lambda p: _write_raw(p, good.assign(D2=good["D2"].map(lambda v: f"{v:.3f}")), m))
    add("unknown_condition", "unknown_condition", lambda p: _write_raw(p, _set(good, 0, "condition", "A9"), m))
    add("mixed_models", "mixed models", lambda p: _write(p, _set(good, 0, "model", "other/model"), m))
    add("no_metadata", "metadata: none found", lambda p: _write(p, good, None))
    add("metadata_unknown_key", "unknown key", lambda p: _write(p, good, {**m, "score": 0.99}))
    add("metadata_bad_json", "not valid JSON", lambda p: _bad_meta_json(_write(p, good, None)))
    add("undeclared_condition", "unexpected_condition", lambda p: _write(p, good, _meta(mini, conditions=["A1"])))
    add("truncated_parquet", "not a readable parquet", lambda p: _truncated_parquet(p, good, m))
    add("huge_file", "file_too_large", lambda p: _huge(p, m))
    return out


def _set(frame: pd.DataFrame, row: int, col: str, value) -> pd.DataFrame:
    out = frame.copy()
    out[col] = out[col].astype(object)
    out.at[row, col] = value
    return out


def _zero(frame: pd.DataFrame, row: int) -> pd.DataFrame:
    out = frame.copy()
    for d in DIRECTION_KEYS:
        out.at[row, d] = 0.0
    return out


def _write_raw(path: Path, frame: pd.DataFrame, meta: dict, *, allow_nan: bool = False) -> Path:
    with path.open("w", encoding="utf-8") as fh:
        for rec in frame.to_dict(orient="records"):
            rec = {k: (None if isinstance(v, float) and np.isnan(v) and not allow_nan else v) for k, v in rec.items()}
            fh.write(json.dumps(rec, default=str, allow_nan=allow_nan) + "\n")
    Path(str(path) + ".meta.json").write_text(json.dumps(meta), encoding="utf-8")
    return path


def _truncate(path: Path) -> Path:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) - 40])
    return path


def _recode(path: Path) -> Path:
    path.write_bytes(path.read_text(encoding="utf-8").encode("utf-16"))
    return path


def _touch(path: Path, meta: dict) -> Path:
    path.write_bytes(b"")
    Path(str(path) + ".meta.json").write_text(json.dumps(meta), encoding="utf-8")
    return path


def _bad_meta_json(path: Path) -> Path:
    Path(str(path) + ".meta.json").write_text('{"model": "x", ', encoding="utf-8")
    return path


def _truncated_parquet(path: Path, frame: pd.DataFrame, meta: dict) -> Path:
    real = _write(path.with_suffix(".parquet"), frame, meta)
    data = real.read_bytes()
    real.write_bytes(data[: len(data) // 2])
    return real


def _huge(path: Path, meta: dict) -> Path:
    with path.open("wb") as fh:
        fh.write(b" " * (HUGE_LIMIT + 1))
    Path(str(path) + ".meta.json").write_text(json.dumps(meta), encoding="utf-8")
    return path


HUGE_LIMIT = 2_000_000
"""The byte limit used in these tests (the real default is 512 MiB); the good file is far below."""


@pytest.fixture(scope="module")
def corpus(mini, good_frame: pd.DataFrame, tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("submissions")
    good = _write(root / "good.jsonl", good_frame, _meta(mini))
    return good, _bad_corpus(mini, good_frame, root / "bad")


def test_corpus_has_at_least_fifteen_kinds(corpus) -> None:
    _, bad = corpus
    assert len(bad) >= 15


def test_good_submission_is_accepted_with_metadata(mini, corpus) -> None:
    good, _ = corpus
    report = validate_submission(good, mini, split=None, max_bytes=HUGE_LIMIT)
    assert report.accepted, report.summary()
    assert report.meta is not None and report.meta.model == MODEL


def test_each_bad_submission_gets_a_clear_message(mini, corpus) -> None:
    _, bad = corpus
    for kind, (path, phrase) in bad.items():
        report = validate_submission(path, mini, split=None, max_bytes=HUGE_LIMIT)
        text = report.summary()
        assert phrase.lower() in text.lower(), f"{kind}: {text}"
        if kind not in (
            "duplicate_rows",
            "unknown_episodes",
            "nan_weights",
            "negative_weights",
            "all_zero_weights",
            "wrong_types",
            "unknown_condition",
            "undeclared_condition",
        ):
            assert not report.accepted, f"{kind} should be rejected: {text}"


def test_bad_submissions_never_change_a_good_score(mini, corpus, tmp_path: Path) -> None:
    good, bad = corpus
    alone = score_submissions([good], mini, split=None, n_resamples=200, seed=1, max_bytes=HUGE_LIMIT)
    paths = [p for p, _ in bad.values()]
    together = score_submissions(
        [good, *paths], mini, split=None, n_resamples=200, seed=1, max_bytes=HUGE_LIMIT
    )  # first: a later file reusing its model name is refused (test_reliability_scores)
    assert len(together.reports) == len(bad) + 1
    mine = together.board[together.board["submission"] == good.name].reset_index(drop=True)
    pd.testing.assert_frame_equal(mine, alone.board.reset_index(drop=True))
    out = write_leaderboard(together, tmp_path / "board")
    verdicts = json.loads((out / "submissions.json").read_text())
    assert len(verdicts) == len(bad) + 1
    assert all(v["problems"] for v in verdicts if not v["accepted"])


def test_leaderboard_uses_rap_scores_scorer(mini, corpus) -> None:
    from rap_benchmark.evaluation.predictions import read_predictions
    from rap_benchmark.evaluation.report.aggregates import leaderboard
    from rap_benchmark.evaluation.scoring import score_predictions

    good, _ = corpus
    ours = score_submissions([good], mini, split=None, n_resamples=200, seed=1, max_bytes=HUGE_LIMIT).board
    theirs = leaderboard(
        score_predictions(mini, read_predictions(good)), mini, split=None, n_resamples=200, seed=1, forecast_only=False
    )
    assert ours["spearman"].tolist() == theirs["spearman"].tolist()
    assert ours["spearman_lo"].tolist() == theirs["spearman_lo"].tolist()


def test_cli_submit_validate_and_score(mini_dir: Path, corpus, tmp_path: Path, capsys) -> None:
    from rap_benchmark.cli import main

    good, bad = corpus
    assert main(["submit", "validate", str(good), "--instance", str(mini_dir), "--split", "all"]) == 0
    assert main(["submit", "validate", str(bad["mixed_models"][0]), "--instance", str(mini_dir)]) == 1
    code = main(
        [
            "leaderboard",
            "score",
            str(good),
            str(bad["empty_file"][0]),
            "--instance",
            str(mini_dir),
            "--out",
            str(tmp_path / "b"),
            "--split",
            "all",
            "--resamples",
            "100",
        ]
    )
    assert code == 1
    assert (tmp_path / "b" / "leaderboard.csv").is_file()
    assert MODEL in capsys.readouterr().out
