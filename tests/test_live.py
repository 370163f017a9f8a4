"""Sealed forecasts and the Forecast-Live track on mini: seal before the last origin, reveal,
score; a seal dated on or after the origin and a tampered reveal are refused, one line each."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from rap_benchmark.core.canonical import commitment
from rap_benchmark.evaluation.live import SEAL_KEY, prediction_commitment, read_seals, score_live, seal
from rap_benchmark.evaluation.predictions import write_predictions

ORIGIN = "2026-01-01"
REPO = Path(__file__).resolve().parents[1]


def _rap(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "rap_benchmark", *args], capture_output=True, text=True, env=env)


@pytest.fixture(scope="module")
def live_files(mini, tmp_path_factory) -> dict[str, Path]:
    """EWMA and Recent forecasts of the last origin, one submission each, with sidecar metadata."""
    from rap_benchmark.evaluation.scoring import baseline_predictions

    frame, _ = baseline_predictions(mini)
    frame = frame[frame["origin"].astype(str) == ORIGIN]
    root = tmp_path_factory.mktemp("live")
    out = {}
    for model in ("baseline/ewma", "baseline/recent"):
        rows = frame[frame["model"] == model].reset_index(drop=True)
        path = write_predictions(rows, root / f"{model.split('/')[1]}.jsonl")
        meta = {"model": model, "conditions": ["A0"], "manifest_hash": mini.manifest_hash, "knowledge_cutoff": None}
        Path(str(path) + ".meta.json").write_text(json.dumps(meta), encoding="utf-8")
        out[model] = path
    return out


def test_commitment_is_the_hub_commitment_of_canonical_rows(live_files, tmp_path):
    """The same predictions hash the same as JSONL and as parquet; one changed weight changes it."""
    path = live_files["baseline/ewma"]
    salt = bytes(range(32))
    frame, digest = prediction_commitment(path, salt)
    parquet = write_predictions(frame.sample(frac=1.0, random_state=1), tmp_path / "same.parquet")
    assert prediction_commitment(parquet, salt)[1] == digest
    rows = json.loads(json.dumps([json.loads(line) for line in path.read_text().splitlines()]))
    from rap_benchmark.evaluation.predictions import REQUIRED_COLUMNS

    expected = commitment(salt, SEAL_KEY, [{c: r[c] for c in REQUIRED_COLUMNS} for r in rows])
    assert digest == expected
    changed = frame.copy()
    changed.loc[0, "D0"] = changed.loc[0, "D0"] + 1e-12
    assert prediction_commitment(write_predictions(changed, tmp_path / "c.jsonl"), salt)[1] != digest


def test_seal_reveal_score_live(mini_dir, live_files, tmp_path):
    ewma, recent = live_files["baseline/ewma"], live_files["baseline/recent"]
    log = tmp_path / "seals.jsonl"
    rows = []
    for path, when in ((ewma, "2025-12-30T09:00:00Z"), (recent, "2026-01-01T00:00:00Z")):
        out = tmp_path / f"{path.stem}.seal.json"
        r = _rap("submit", "seal", str(path), "--out", str(out), "--sealed-at", when)
        assert r.returncode == 0, r.stderr
        rows.append(out.read_text())
    log.write_text("".join(rows))
    assert Path(str(ewma) + ".salt.hex").is_file()

    r = _rap("leaderboard", "score", str(ewma), str(recent), "--live", "--seals", str(log))
    assert r.returncode == 2 and "--instance" in r.stderr  # argparse: required

    board = tmp_path / "board"
    r = _rap(
        "leaderboard", "score", str(ewma), str(recent), "--live", "--seals", str(log),
        "--instance", str(mini_dir), "--out", str(board), "--resamples", "200",
    )  # fmt: skip
    assert r.returncode == 1, r.stderr  # one reveal refused
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert any(ln.endswith("verified: sealed at 2025-12-30T09:00:00Z " + ln[-14:]) for ln in lines if "ewma" in ln)
    refused = [ln for ln in lines if "REFUSED" in ln]
    assert len(refused) == 1 and "not before origin 2026-01-01" in refused[0]
    live = pd.read_csv(board / "leaderboard_live.csv")
    assert list(live["model"]) == ["baseline/ewma"] and set(live["track"]) == {"Forecast-Live"}
    assert "Forecast-Live" in r.stdout

    # the score equals the retrospective scorer restricted to the same origin's episodes
    from rap_benchmark.core.artifacts import load_instance
    from rap_benchmark.evaluation.report.aggregates import leaderboard
    from rap_benchmark.evaluation.scoring import score_predictions

    inst = load_instance(mini_dir)
    frame, _ = prediction_commitment(ewma, bytes(16))
    ref = leaderboard(score_predictions(inst, frame), inst, n_resamples=200, forecast_only=False)
    assert live["spearman"].iloc[0] == pytest.approx(ref["spearman"].iloc[0], abs=1e-12)


def test_tampered_reveal_refused(mini, live_files, tmp_path):
    path = live_files["baseline/ewma"]
    salt_file = tmp_path / "salt.hex"
    row, _ = seal(path, salt_file=salt_file)
    log = tmp_path / "log.jsonl"
    log.write_text(json.dumps(row) + "\n")
    seals = read_seals([log])
    frame, _ = prediction_commitment(path, bytes(16))
    frame.loc[3, "D2"] = frame.loc[3, "D2"] + 0.01
    tampered = write_predictions(frame, tmp_path / "tampered.jsonl")
    Path(str(tampered) + ".salt.hex").write_text(salt_file.read_text())
    Path(str(tampered) + ".meta.json").write_text(Path(str(path) + ".meta.json").read_text())
    # sealed now (after the origin) and tampered: tampering is what is named
    result = score_live([tampered], mini, seals)
    (verdict,) = result.verdicts
    assert not verdict.accepted and "matches no published commitment" in verdict.message
    assert "\n" not in verdict.message and result.board.empty


def test_seal_reads_the_prediction_file_once(live_files, tmp_path, monkeypatch):
    """Sealing with a new salt read and hashed the file twice (once to check it, once with the
    salt); with a new salt or a given one it is read once, and the seal opens with the salt written."""
    from rap_benchmark.core.canonical import read_salt
    from rap_benchmark.evaluation import live

    reads: list[Path] = []
    read = live.read_predictions
    monkeypatch.setattr(live, "read_predictions", lambda path: reads.append(Path(path)) or read(path))
    path = live_files["baseline/ewma"]
    salt_file = tmp_path / "new.salt.hex"
    row, written = seal(path, salt_file=salt_file)
    assert reads == [path] and written == salt_file
    assert row["commitment"] == prediction_commitment(path, read_salt(salt_file))[1]  # the salt it wrote
    reads.clear()
    again, _ = seal(path, salt_file=salt_file)
    assert reads == [path] and again["commitment"] == row["commitment"]


def test_seal_refuses_a_broken_file_before_writing(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"model": "m"\n')
    r = _rap("submit", "seal", str(bad), "--out", str(tmp_path / "s.json"))
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.jsonl"]


@pytest.mark.parametrize(
    ("text", "problem"), [("zz\n", "not a hex salt ("), ("ab" * 15, "a salt needs at least 16 bytes")]
)
def test_seal_refuses_a_bad_salt_file_in_one_line(live_files, tmp_path, capsys, text, problem):
    """``rap submit seal --salt-file`` reads the salt with the hub export's reader: one line naming
    the file and the problem, exit 2, and no seal written."""
    from rap_benchmark.cli import main

    salt_file = tmp_path / "salt.hex"
    salt_file.write_text(text, encoding="ascii")
    out = tmp_path / "s.json"
    assert (
        main(["submit", "seal", str(live_files["baseline/ewma"]), "--out", str(out), "--salt-file", str(salt_file)])
        == 2
    )
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"rap submit seal: {salt_file}: {problem}")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["salt.hex"]
