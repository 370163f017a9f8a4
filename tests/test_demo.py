"""``rap demo``: one folder in, nothing touched outside it, a closing summary of where things are."""

from __future__ import annotations

from pathlib import Path

import pytest

from rap_benchmark.cli import main
from rap_benchmark.cli.demo_flow import MARKER, STEPS, prepare_folder
from rap_benchmark.core.errors import InputError
from rap_benchmark.core.sums import verify


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_demo_runs_every_step_inside_its_folder_only(tmp_path: Path, capsys, monkeypatch):
    """Regression (issue 14): ``rap demo --out X/demo`` replaced the contents of the sibling folders
    X/report, X/predictions and X/citecast without warning, and wrote to X/runs."""
    parent = tmp_path / "X"
    for name in ("report", "predictions", "citecast", "runs"):
        (parent / name).mkdir(parents=True)
        (parent / name / "mine.txt").write_text(f"the user's own {name}\n", encoding="utf-8")
    monkeypatch.chdir(parent)
    before = _files(parent)

    assert main(["demo", "--out", str(parent / "demo"), "--quiet"]) == 0
    out = capsys.readouterr().out

    after = {k: v for k, v in _files(parent).items() if not k.startswith("demo/")}
    assert after == before, "rap demo wrote or changed files outside its folder"
    assert sorted(p.name for p in parent.iterdir()) == ["citecast", "demo", "predictions", "report", "runs"]
    demo = parent / "demo"
    for k, step in enumerate(STEPS, 1):
        assert f"== [{k}/{len(STEPS)}] {step.title} ==" in out
    assert "blocks.parquet: sha256 mismatch" in out
    assert verify(demo / "mini") == []
    assert not list(demo.glob(".tamper-check-*")), "the tampered copy is cleaned up"
    # the closing summary names where the instance, the predictions and report.html are, and they exist
    summary = out[out.index("demo finished") :]
    for path in (
        demo / "mini",
        demo / "predictions" / "baselines.jsonl",
        demo / "runs" / "reference-search-hits" / "predictions.jsonl",
        demo / "report" / "report.html",
    ):
        assert str(path) in summary and path.exists()


def test_prepare_folder_reuses_only_its_own_folder(tmp_path: Path):
    fresh = prepare_folder(tmp_path / "new")  # absent: created and marked
    assert (fresh / MARKER).is_file()
    assert prepare_folder(fresh) == fresh  # an earlier demo's folder is reused
    empty = tmp_path / "empty"
    empty.mkdir()
    assert (prepare_folder(empty) / MARKER).is_file()
    other = tmp_path / "other"
    other.mkdir()
    (other / "thesis.tex").write_text("\\documentclass{article}\n", encoding="utf-8")
    with pytest.raises(InputError, match="did not write"):
        prepare_folder(other)
    assert sorted(p.name for p in other.iterdir()) == ["thesis.tex"]
    with pytest.raises(InputError, match="is a file"):
        prepare_folder(other / "thesis.tex")
