"""The report and the board page as a reader sees them at 1400 px (issue 36): the evaluated models
lead the report, a report without a baseline file says so in a note, panel titles are whole, the
board's table and contrast matrices fit the page (measured in headless Chromium), the cost plot
keeps unknown apart from a known 0 on axes from 0 with no name over another, and a statistical
baseline's cutoff reads n/a."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from markupsafe import escape

from rap_benchmark.cli import main

RESAMPLES = "200"
MODEL = "my-org/my-model"
REFERENCE = "reference/search-hits"
PAGE_WIDTH = 1400


@pytest.fixture(scope="module")
def work(mini_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Baselines, a reference run (A0, A1) and a copy of it renamed to a model whose USD cost and
    knowledge cutoff are unknown, each as a submission; the board of all of them."""
    root = tmp_path_factory.mktemp("pages")
    baselines, subs = root / "baselines.jsonl", root / "subs"
    assert main(["baselines", str(mini_dir), "--out", str(baselines)]) == 0
    assert main(["submit", "split", str(baselines), "--out", str(subs)]) == 0
    run = root / "run"
    argv = ["run", str(mini_dir), "--backend", "reference", "--conditions", "A0,A1", "--out", str(run)]
    assert main([*argv, "--no-progress"]) == 0
    ref = subs / "reference.jsonl"
    assert main(["submit", "prepare", str(run), "--out", str(ref), "--knowledge-cutoff", "2024-07-01"]) == 0
    model = subs / "my-model.jsonl"
    rows = [json.loads(line) | {"model": MODEL} for line in ref.read_text(encoding="utf-8").splitlines()]
    model.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    meta = json.loads(Path(f"{ref}.meta.json").read_text(encoding="utf-8")) | {"model": MODEL, "knowledge_cutoff": None}
    for entry in meta["usage"]["by_condition"].values():
        entry["cost_usd"] = None  # a model the price table does not know
    Path(f"{model}.meta.json").write_text(json.dumps(meta), encoding="utf-8")
    board = root / "board"
    files = sorted(str(p) for p in subs.glob("*.jsonl"))
    argv = ["leaderboard", "score", *files, "--instance", str(mini_dir), "--out", str(board), "--resamples", RESAMPLES]
    assert main(argv) == 0
    return {"root": root, "baselines": baselines, "predictions": run / "predictions.jsonl", "board": board}


def _report(mini_dir: Path, out: Path, *files: Path) -> tuple[str, dict]:
    assert main(["report", str(mini_dir), *map(str, files), "--out", str(out), "--resamples", RESAMPLES]) == 0
    return (out / "report.html").read_text(encoding="utf-8"), json.loads((out / "report.json").read_text("utf-8"))


# -- the report --------------------------------------------------------------------------------


def test_the_evaluated_model_leads_the_headline_cards_and_the_summary(work, mini_dir: Path) -> None:
    """Regression: the report's cards and closing summary named only the baselines and the ceiling,
    never the model being evaluated."""
    html, summary = _report(mini_dir, work["root"] / "report-both", work["baselines"], work["predictions"])
    cards = re.findall(r'<div class="anchor (\w+)">(.*?)</div>\n', html)
    assert cards[0][0] == "model" and f'<div class="m">{REFERENCE}</div>' in cards[0][1]
    assert [kind for kind, _ in cards].count("model") == 1  # one evaluated model, then the anchors
    board = pd.read_csv(work["root"] / "report-both" / "leaderboard.csv").set_index(["model", "condition"])
    best = board.loc[REFERENCE]["spearman"].idxmax()
    assert f'<div class="v">{board.loc[(REFERENCE, best), "spearman"]:.3f}</div>' in cards[0][1]
    assert f"{best}, best of A0, A1" in cards[0][1] and "vs EWMA" in cards[0][1]
    note = summary["closing_note"]
    lead = note.split(": ", 1)[1]
    assert lead.startswith(f"{REFERENCE} A0 ") and ", A1 " in lead.split(";")[0]
    assert note.index(REFERENCE) < note.index("Statistical baselines: Recent") < note.index("; EWMA ")
    assert f"({best} minus EWMA " in lead.split(";")[0]  # the best condition against EWMA


def test_a_report_without_a_baseline_file_says_so_in_a_note(work, mini_dir: Path) -> None:
    """Regression: a report made from a model's file alone listed "statistical baselines computed
    ..." under "Validation problems", and the forest plot that followed sat under that heading."""
    html, summary = _report(mini_dir, work["root"] / "report-model", work["predictions"])
    assert "Validation problems" not in html and summary["problems"] == []
    (note,) = summary["notes"]
    assert note.startswith("No baseline file was given") and "rap baselines" in note
    assert f'<p class="note">{escape(note)}</p>' in html
    board_section = html.split('<h2 id="leaderboard">', 1)[1].split("<h2 ", 1)[0]
    assert 'alt="leaderboard with interval bars"' in board_section  # the forest plot sits in its section


def test_a_bad_file_is_still_a_validation_problem(work, mini_dir: Path) -> None:
    bad = work["root"] / "bad.jsonl"
    bad.write_text('{"model": "x"}\n', encoding="utf-8")
    html, summary = _report(mini_dir, work["root"] / "report-bad", work["baselines"], bad)
    assert summary["problems"] and summary["notes"] == []
    assert '<h2 id="validation-problems">Validation problems' in html


def test_field_panel_titles_are_whole(mini, tmp_path: Path) -> None:
    """Regression: panel titles were cut at 28 characters ("D3 parameter-efficient fine-tu...")."""
    from rap_benchmark.core.records import DIRECTION_KEYS
    from rap_benchmark.evaluation.report.plots import field_figure, panel_title
    from rap_benchmark.evaluation.scoring import baseline_predictions

    longest = max(mini.codebooks, key=lambda f: max(len(d.name) for d in mini.codebooks[f].directions))
    names = [d.name for d in mini.codebooks[longest].directions]
    assert max(map(len, names)) > 28  # mini has a name the old rule cut
    fig = field_figure(mini, baseline_predictions(mini)[0], longest, units=[("baseline/ewma", "A0")])
    fig.draw_without_rendering()
    renderer = fig.canvas.get_renderer()
    axes = fig.axes[:8]
    for key, name, ax in zip(DIRECTION_KEYS, names, axes, strict=True):
        text = ax.get_title(loc="left")
        assert " ".join(text.split()) == f"{key} {name}" and "…" not in text
        assert ax._left_title.get_window_extent(renderer).x1 <= ax.get_window_extent(renderer).x1 + 1, name
    assert panel_title("D0", "a " + "x" * 40) == "D0 a\n" + "x" * 40  # a long word stays whole


# -- the board page ------------------------------------------------------------------------------


def _measure(html: Path) -> dict:
    """The page at 1400 px in headless Chromium: the viewport, the document's width and each
    table's width beside its container's."""
    probe = html.with_name("measure.html")
    script = """<script>
var o = {viewport: window.innerWidth, document: document.documentElement.scrollWidth, tables: []};
document.querySelectorAll("table").forEach(function (t) {
  o.tables.push({id: t.id || t.className, width: t.getBoundingClientRect().width, room: t.parentElement.clientWidth});
});
var pre = document.createElement("pre"); pre.id = "measure"; pre.textContent = JSON.stringify(o);
document.body.appendChild(pre);
</script>"""
    probe.write_text(html.read_text(encoding="utf-8").replace("</body>", script + "</body>"), encoding="utf-8")
    with tempfile.TemporaryDirectory(prefix="rap-chromium-") as profile:
        cmd = [
            shutil.which("chromium"), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", f"--user-data-dir={profile}",
            f"--window-size={PAGE_WIDTH},2000", "--dump-dom", probe.resolve().as_uri(),
        ]  # fmt: skip
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    found = re.search(r'<pre id="measure">(.*?)</pre>', proc.stdout)
    assert found is not None, proc.stdout[-2000:]
    return json.loads(found.group(1).replace("&quot;", '"'))


@pytest.mark.skipif(shutil.which("chromium") is None, reason="Debian's chromium is not installed")
def test_the_board_fits_a_1400px_page(work) -> None:
    """Regression: at 1400 px the board's table was 1,908 px wide (tokens, USD, cutoff and invalid
    behind a scrollbar) and the A0 contrast matrix 1,371 px in a 1,353 px column."""
    got = _measure(work["board"] / "index.html")
    assert got["viewport"] <= PAGE_WIDTH and got["document"] <= got["viewport"], got
    tables = {t["id"]: t for t in got["tables"]}
    assert "board" in tables and sum(t["id"] == "matrix" for t in got["tables"]) == 2  # A0 and A1
    for t in got["tables"]:
        assert t["width"] <= t["room"], t


def test_the_boards_columns_are_grouped(work) -> None:
    """The columns the page shows: target folded into the condition, invalid into the coverage,
    usage per episode only (totals in leaderboard.csv and the cells' tooltips), no one-value track."""
    from rap_benchmark.evaluation.board.display import display_board
    from rap_benchmark.evaluation.board.page import table_rows

    board = pd.read_csv(work["board"] / "leaderboard.csv")
    headers = list(display_board(board).columns)
    assert headers == [
        "rank (95% CI)", "model", "cond.", "coverage", "Spearman [95% block CI]", "TV", "JSD", "strict",
        "exposed", "tokens/ep. (in + out)", "Search calls/ep.", "USD/ep.", "cutoff",
    ]  # fmt: skip
    shown, rows = table_rows(board)
    assert shown == headers
    usd = [r["cells"][headers.index("USD/ep.")] for r in rows]
    assert all(c["title"].startswith("in total: ") for c in usd)
    html = (work["board"] / "index.html").read_text(encoding="utf-8")
    assert '<th data-col="4" title="sort by Spearman [95% block CI]">Spearman<br>[95% block CI]</th>' in html
    assert "0.0,\u00a0" not in html and re.search(r"\[-?\d\.\d{3},\u00a0-?\d\.\d{3}\]", html)  # whole intervals


def test_a_statistical_baseline_has_no_cutoff_not_an_unknown_one(work) -> None:
    """Regression: statistical baselines showed "unknown cutoff" where "n/a" is the truth."""
    from rap_benchmark.evaluation.board.display import display_board

    board = pd.read_csv(work["board"] / "leaderboard.csv")
    shown = display_board(board).assign(model=board["model"])
    base = shown[shown["model"].str.startswith("baseline/")]
    assert len(base) == 6 and set(base["cutoff"]) == set(base["strict"]) == set(base["exposed"]) == {"n/a"}
    model = shown[shown["model"] == MODEL]
    assert set(model["cutoff"]) == {"unknown"} and set(model["strict"]) == {"unknown cutoff"}
    assert set(shown.loc[shown["model"] == REFERENCE, "cutoff"]) == {"2024-07-01"}
    html = (work["board"] / "index.html").read_text(encoding="utf-8")
    assert "knowledge cutoff n/a;" in html and "knowledge cutoff unknown;" in html


def test_the_cost_plot_keeps_unknown_apart_from_a_known_zero(work) -> None:
    """Regression: with every known cost 0 the plot was one vertical line of overprinted names on
    a USD axis with negative ticks, and a row with unknown USD but known tokens was named "unknown
    (not drawn)" over one panel while the other drew it."""
    from matplotlib.text import Text

    from rap_benchmark.evaluation.board.plots import COST_PANELS, cost_figure

    board = pd.read_csv(work["board"] / "leaderboard.csv")
    fig = cost_figure(board, title="t")
    renderer = fig.canvas.get_renderer()
    axes = fig.axes
    assert len(axes) == 2 * len(COST_PANELS)
    named = {f"{m} {c}" for m, c in zip(board["model"], board["condition"], strict=True)}
    unknown_usd = {f"{MODEL} A0", f"{MODEL} A1"}
    boxes = []
    for (main_ax, strip), (column, _) in zip(zip(axes[::2], axes[1::2], strict=True), COST_PANELS, strict=True):
        lo, hi = main_ax.get_xlim()
        assert lo >= 0 and hi > lo, column
        assert all(t >= 0 for t in main_ax.get_xticks() if lo <= t <= hi), column
        drawn = {a.get_text() for a in main_ax.texts}
        apart = {a.get_text() for a in strip.texts}
        assert drawn | apart == named and not drawn & apart  # every row once: drawn, or apart as unknown
        assert apart == (unknown_usd if column == "cost_usd_per_episode" else set()), column
        for ann in main_ax.texts:
            if ann.get_text().startswith("baseline/"):
                assert ann.xy[0] == 0  # a known 0 sits at 0
        for ann in [*main_ax.texts, *strip.texts]:
            ann.update_positions(renderer)
            box = Text.get_window_extent(ann, renderer)
            assert all(not box.overlaps(b) for b in boxes), ann.get_text()  # no name over another
            boxes.append(box)


def test_the_board_names_each_version_as_what_it_is(work, mini) -> None:
    """Regression: the board said "(version 1.0.0)" for the instance and "benchmark 1.1.0, scorer
    rap_benchmark 1.1.0" beside it."""
    from rap_benchmark.core.spec import package_version

    meta = json.loads((work["board"] / "board.json").read_text(encoding="utf-8"))
    assert meta["benchmark_version"] == mini.spec.version and meta["package_version"] == package_version()
    assert "instance_version" not in meta and "scorer_version" not in meta
    html = (work["board"] / "index.html").read_text(encoding="utf-8")
    assert f"benchmark version <b>{mini.spec.version}</b> (the instance's: what its scores mean)" in html
    assert f"scored by the rap_benchmark package {package_version()};" in html


def test_header_lines_split_outside_brackets() -> None:
    from rap_benchmark.evaluation.board.page import header_lines

    assert header_lines("Spearman [95% block CI]") == ["Spearman", "[95% block CI]"]
    assert header_lines("rank (95% CI)") == ["rank", "(95% CI)"]
    assert header_lines("coverage") == ["coverage"]
    assert header_lines("USD/ep.") == ["USD/ep."]


def test_names_stack_in_their_points_order() -> None:
    from rap_benchmark.evaluation.board.plots import stack

    got = stack([0.5, 0.5, 0.5, 0.9], 0.1)
    np.testing.assert_allclose(sorted(got[:3]), [0.4, 0.5, 0.6])
    assert got[3] == 0.9 and np.all(np.diff(stack([0.1, 0.12, 0.11], 0.05)[[0, 2, 1]]) > 0)
