"""End to end on mini: `rap baselines`, `rap score`, `rap report`; the HTML draws in Chromium."""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from rap_benchmark.cli import main
from rap_benchmark.evaluation.board.display import display_board
from rap_benchmark.evaluation.report.tables import (
    LEADERBOARD_COLUMNS,
    _contrasts_wide,
    display,
    fmt,
    fmt_interval,
    interval_cell,
    to_markdown,
)

REPO = Path(__file__).resolve().parents[1]
RESAMPLES = "1000"


@pytest.fixture(scope="module")
def baselines_file(mini_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("preds") / "baselines.jsonl"
    assert main(["baselines", str(mini_dir), "--out", str(out), "--tune-dev"]) == 0
    return out


@pytest.fixture(scope="module")
def report_dir(mini_dir: Path, baselines_file: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("report")
    argv = ["report", str(mini_dir), str(baselines_file), "--out", str(out), "--resamples", RESAMPLES]
    assert main(argv) == 0
    return out


def test_baselines_file_and_ledger(mini_dir: Path, baselines_file: Path) -> None:
    from rap_benchmark.core.sums import verify

    ledger = json.loads((baselines_file.parent / "baselines_ledger.json").read_text(encoding="utf-8"))
    assert ledger["tuned_on_dev"] is True
    assert set(ledger["tuning"]["grids"]) == {"arima_phi", "holt_alpha", "holt_beta", "var_lambda"}
    assert ledger["parameters"]["arima_phi"] in ledger["tuning"]["grids"]["arima_phi"]
    assert verify(mini_dir) == []  # the instance folder is untouched
    frame = pd.read_json(baselines_file, lines=True)
    assert set(frame["condition"]) == {"A0"}
    assert set(frame["model"]) == {
        f"baseline/{n}" for n in ("recent", "ewma", "arima", "holt", "ridge_var", "uniform_random")
    }


def test_report_end_to_end_on_mini(report_dir: Path) -> None:
    for name in (
        "leaderboard",
        "paired_contrasts",
        "per_origin",
        "strict_vs_exposed",
        "policy",
        "state",
        "revision_alignment",
        "validation",
    ):
        assert (report_dir / f"{name}.csv").is_file() and (report_dir / f"{name}.md").is_file()
    assert (report_dir / "leaderboard.png").stat().st_size > 10_000
    assert len(list(report_dir.glob("field_*.png"))) == 3
    contrasts = pd.read_csv(report_dir / "paired_contrasts.csv")
    row = contrasts[
        (contrasts["model"] == "baseline/uniform_random")
        & (contrasts["contrast"] == "A0 vs baseline/ewma")
        & (contrasts["metric"] == "spearman")
    ].iloc[0]
    assert row["hi"] < 0  # EWMA beats the uniform-random forecaster; the interval excludes zero
    board = pd.read_csv(report_dir / "leaderboard.csv").set_index("model")
    summary = json.loads((report_dir / "report.json").read_text(encoding="utf-8"))
    assert summary["reliability"]["ceiling"] > board.loc["baseline/ewma", "spearman"]
    assert set(pd.read_csv(report_dir / "policy.csv")["policy"]) == {
        "canonical",
        "split_boundary",
        "single_only",
        "secondary",
    }
    assert set(pd.read_csv(report_dir / "revision_alignment.csv")["horizon_months"]) == {6, 12, 18}
    note = summary["closing_note"]
    for label in ("EWMA", "Recent", "ARIMA", "Holt", "ridge VAR", "0.803", "0.911", "No multiplicity correction"):
        assert label in note


def test_html_is_self_contained(report_dir: Path) -> None:
    html = (report_dir / "report.html").read_text(encoding="utf-8")
    assert "No multiplicity correction" in html and "0.803" in html and "0.911" in html
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", html)
    assert "url(" not in html and "@import" not in html
    images = re.findall(r'<img [^>]*src="([^"]+)"', html)
    assert len(images) == 4 and all(src.startswith("data:image/png;base64,") for src in images)


def test_report_has_a_table_of_contents_linking_every_section(report_dir: Path) -> None:
    """Regression (issue 23): a page of about 9,000 px had no table of contents."""
    html = (report_dir / "report.html").read_text(encoding="utf-8")
    toc = re.search(r'<nav class="toc"[^>]*>(.*?)</nav>', html, re.DOTALL)
    assert toc is not None and html.index("<nav") < html.index("<h2")
    links = re.findall(r'<a href="#([^"]+)">([^<]+)</a>', toc.group(1))
    headings = re.findall(r'<h2 id="([^"]+)">([^<]+)<a class="top" href="#top">', html)
    assert len(headings) == html.count("<h2") and len(headings) >= 8
    assert links == headings, "the contents list every section, in page order, with its heading"
    assert len({i for i, _ in headings}) == len(headings), "section ids are unique"
    assert '<h1 id="top">' in html


def test_report_is_deterministic(mini_dir: Path, baselines_file: Path, report_dir: Path, tmp_path: Path) -> None:
    argv = ["report", str(mini_dir), str(baselines_file), "--out", str(tmp_path), "--resamples", RESAMPLES]
    assert main(argv) == 0
    for name in ("leaderboard.csv", "paired_contrasts.csv", "tables.md", "report.html"):
        assert (tmp_path / name).read_bytes() == (report_dir / name).read_bytes(), name


def test_score_cli_and_a_bad_file_does_not_change_the_good_ones(
    mini_dir: Path, baselines_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["score", str(mini_dir), str(baselines_file), "--resamples", RESAMPLES]) == 0
    text = capsys.readouterr().out
    assert "baseline/ewma" in text and "No multiplicity correction" in text
    assert main(["score", str(mini_dir), str(baselines_file), "--json", "--resamples", RESAMPLES]) == 0
    alone = json.loads(capsys.readouterr().out)["leaderboard"]
    bad = tmp_path / "bad.jsonl"
    lines = baselines_file.read_text(encoding="utf-8").splitlines()[:50]
    rows = [json.loads(x) for x in lines]
    for r in rows:
        r["model"] = "broken"
    rows[3]["D2"] = -1.0
    bad.write_text("\n".join(json.dumps(r) for r in rows) + "\n{not json\n", encoding="utf-8")
    code = main(["score", str(mini_dir), str(baselines_file), str(bad), "--json", "--resamples", RESAMPLES])
    out = json.loads(capsys.readouterr().out)
    assert code == 1  # the bad file has errors
    assert any("bad_json" in p for p in out["problems"]) and any("negative" in p for p in out["problems"])
    together = [r for r in out["leaderboard"] if r["model"] != "broken"]
    assert together == alone


def test_clashing_files_keep_the_first_file(mini_dir: Path, baselines_file: Path, tmp_path: Path) -> None:
    """Bug: a second file reusing a model name removed both files' rows (issue 14); the first keeps them."""
    from rap_benchmark.core.artifacts import load_instance
    from rap_benchmark.evaluation.predictions import combine_validated, validate_predictions

    inst = load_instance(mini_dir)
    copy = tmp_path / "copy.jsonl"
    shutil.copy(baselines_file, copy)
    alone, _ = combine_validated([validate_predictions(baselines_file, inst)])
    preds, problems = combine_validated([validate_predictions(p, inst) for p in (baselines_file, copy)])
    pd.testing.assert_frame_equal(preds, alone)
    clash = [p for p in problems if "reuse a model and condition of an earlier file" in p]
    assert len(clash) == 1 and clash[0].startswith(f"{copy}: [error]")


def test_markdown_escapes_pipes() -> None:
    md = to_markdown(pd.DataFrame({"a|b": ["x|y"], "c": ["1"]}))
    assert md.splitlines()[0] == "| a\\|b | c |" and md.splitlines()[2] == "| x\\|y | 1 |"


@pytest.mark.parametrize("gap", [None, float("nan"), np.float32("nan"), pd.NA])
def test_a_score_without_its_interval_reads_the_same_bare_estimate_in_the_report_and_on_the_board(gap) -> None:
    """Regression: the report wrote ``0.803 [, ]`` for a score whose bounds were missing (a signed
    contrast ``+0.012 [+nan, +nan]``, or a TypeError on None) where the board wrote ``0.803``; both
    now format ``estimate [lo, hi]`` with one function."""
    row = {"model": "m", "condition": "A0", "spearman": 0.8031, "spearman_lo": gap, "spearman_hi": 0.81}
    board = display_board(pd.DataFrame([row]))["Spearman [95% block CI]"].tolist()
    report = display(pd.DataFrame([row]), LEADERBOARD_COLUMNS)["Spearman [95% block CI]"].tolist()
    assert board == report == [interval_cell(row)] == ["0.803"]
    assert interval_cell({**row, "spearman_lo": 0.79, "spearman_hi": 0.8151}) == "0.803 [0.790, 0.815]"
    assert fmt_interval(0.0123, gap, gap, signed=True) == "+0.012"
    assert fmt_interval(0.0123, -0.004, 0.03, signed=True) == "+0.012 [-0.004, +0.030]"
    assert interval_cell({**row, "spearman": gap, "spearman_lo": 0.79}) == ""


@pytest.mark.parametrize("missing", [None, float("nan"), np.float32("nan"), pd.NA, pd.NaT, np.datetime64("NaT")])
def test_fmt_blanks_every_missing_value(missing) -> None:
    """Regression: ``fmt`` blanked None and NaN but printed pandas' NA as ``<NA>`` and NaT as
    ``NaT`` (a nullable Int64 count column with a gap, say); every missing value is an empty cell."""
    assert fmt(missing) == ""
    counts = pd.DataFrame({"n_cells": pd.array([4, None], dtype="Int64")})
    assert display(counts, [("cells", "n_cells")])["cells"].tolist() == ["4", ""]
    assert [fmt(v) for v in (0.8031, np.int64(7), True, "A1")] == ["0.803", "7", "yes", "A1"]


@pytest.mark.parametrize("gap", [None, float("nan"), pd.NA])
def test_a_missing_field_clustered_interval_is_an_empty_cell_not_brackets(gap) -> None:
    """Regression: with its bounds missing (one field, or too few to resample), the leaderboard's
    ``field-clustered CI`` cell read ``[, ]`` and a contrast's ``[+nan, +nan]``; both are now empty."""
    row = {"model": "m", "condition": "A0", "spearman": 0.8, "spearman_field_lo": gap, "spearman_field_hi": gap}
    assert display(pd.DataFrame([row]), LEADERBOARD_COLUMNS)["field-clustered CI"].tolist() == [""]
    both = {**row, "spearman_field_lo": 0.7, "spearman_field_hi": 0.9}
    assert display(pd.DataFrame([both]), LEADERBOARD_COLUMNS)["field-clustered CI"].tolist() == ["[0.700, 0.900]"]
    contrast = {"model": "m", "contrast": "A1-A0", "metric": "spearman", "estimate": 0.012, "lo": -0.004}
    contrast |= {"hi": 0.03, "excludes_zero": False, "field_lo": gap, "field_hi": gap, "n_cells": 4, "n_fields": 1}
    wide = _contrasts_wide(pd.DataFrame([contrast]))
    assert wide["Δ Spearman field-clustered CI"].tolist() == [""]
    assert wide["Δ Spearman [95% block CI]"].tolist() == ["+0.012 [-0.004, +0.030]"]
    contrast |= {"field_lo": -0.01, "field_hi": 0.04}
    assert _contrasts_wide(pd.DataFrame([contrast]))["Δ Spearman field-clustered CI"].tolist() == ["[-0.010, +0.040]"]


@pytest.mark.skipif(shutil.which("chromium") is None, reason="Debian's chromium is not installed")
def test_report_renders_in_headless_chromium(report_dir: Path, tmp_path: Path) -> None:
    sys.path.insert(0, str(REPO / "benchmarks"))
    try:
        from render_report import ink_fraction, render
    finally:
        sys.path.pop(0)
    png = render(report_dir / "report.html", tmp_path / "report.png", height=1800)
    assert png.stat().st_size > 50_000
    assert ink_fraction(png) > 0.05  # the page drew text, tables and figures, not a blank canvas


@pytest.mark.slow
@pytest.mark.shared_data
def test_report_on_arxiv_sample(arxiv_sample_dir: Path, arxiv_sample_baselines: Path, tmp_path: Path) -> None:
    preds = arxiv_sample_baselines  # rap baselines --tune-dev, run once for this and the board
    out = tmp_path / "report"
    assert main(["report", str(arxiv_sample_dir), str(preds), "--out", str(out), "--resamples", RESAMPLES]) == 0
    note = json.loads((out / "report.json").read_text(encoding="utf-8"))["closing_note"]
    for label in ("EWMA", "Recent", "ARIMA", "Holt", "ridge VAR"):
        assert re.search(rf"{re.escape(label)}[^;]* -?\d\.\d{{3}} \[-?\d\.\d{{3}}, -?\d\.\d{{3}}\]", note), label
    assert "0.803" in note and "0.911" in note


def test_the_board_pages_contrast_tooltip_reads_a_missing_interval_as_the_bare_estimate() -> None:
    """Regression: the contrast matrix's cell title formatted its bounds by hand and read
    ``+0.0120 [+nan, +nan]`` when they were missing; it now uses the report's one formatter."""
    from rap_benchmark.evaluation.board.page import matrices

    row = {"condition": "A1", "metric": "spearman", "candidate": "a", "reference": "b", "estimate": 0.012}
    flipped = {**row, "candidate": "b", "reference": "a", "estimate": -0.012}
    for lo, hi, title in [(float("nan"), float("nan"), "+0.0120"), (-0.004, 0.03, "+0.0120 [-0.0040, +0.0300]")]:
        contrasts = pd.DataFrame([r | {"lo": lo, "hi": hi, "excludes_zero": False} for r in (row, flipped)])
        (matrix,) = matrices(contrasts)
        cell = matrix["rows"][0]["cells"][1]
        assert cell["title"] == f"a minus b: {title}", cell
