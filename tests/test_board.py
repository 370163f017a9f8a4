"""The leaderboard people compare models on, end to end on mini: cost beside score (from the run
store, through ``rap submit prepare``, checked by the validator, unknown never 0), model-vs-model
contrasts that agree with ``rap report``'s, rank intervals, strict/exposed strata, the page in a
real browser and the board as a dataset that ``load_dataset`` reads offline."""

from __future__ import annotations

import json
import math
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from rap_benchmark.cli import main

RESAMPLES = "1000"
REFERENCE = "reference/search-hits"


@pytest.fixture(scope="module")
def runs(mini_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The baselines split into submissions, and a reference run prepared from its run store."""
    root = tmp_path_factory.mktemp("board")
    baselines = root / "baselines.jsonl"
    assert main(["baselines", str(mini_dir), "--out", str(baselines)]) == 0
    assert main(["submit", "split", str(baselines), "--out", str(root / "subs")]) == 0
    run = root / "runs" / "ref"
    argv = ["run", str(mini_dir), "--backend", "reference", "--out", str(run), "--conditions", "A0,A1", "--no-progress"]
    assert main(argv) == 0
    ref = root / "subs" / "reference.jsonl"
    assert main(["submit", "prepare", str(run), "--out", str(ref), "--knowledge-cutoff", "2024-07-01"]) == 0
    return {"root": root, "baselines": baselines, "run": run, "reference": ref, "subs": root / "subs"}


@pytest.fixture(scope="module")
def board_dir(runs: dict[str, Path], mini_dir: Path) -> Path:
    out = runs["root"] / "board"
    files = sorted(str(p) for p in runs["subs"].glob("*.jsonl"))
    assert (
        main(["leaderboard", "score", *files, "--instance", str(mini_dir), "--out", str(out), "--resamples", RESAMPLES])
        == 0
    )
    return out


def _meta(path: Path) -> dict:
    return json.loads(Path(str(path) + ".meta.json").read_text(encoding="utf-8"))


# -- cost beside score -----------------------------------------------------------------------


def test_prepare_states_what_the_run_store_spent(runs: dict[str, Path]) -> None:
    from rap_benchmark.agents.store import RunStore

    units = [r for r in RunStore(runs["run"]).iter_units()]
    usage = _meta(runs["reference"])["usage"]
    assert usage["source"].startswith("rap run store")
    for cond in ("A0", "A1"):
        mine = [u for u in units if u["key"]["condition"] == cond]
        entry = usage["by_condition"][cond]
        assert entry["episodes"] == len(mine) == 60
        assert entry["search_calls"] == sum(u.get("n_search_calls", 0) for u in mine)
        assert entry["input_tokens"] == 0 and entry["cost_usd"] == 0.0  # a reference agent: known zeros
    assert usage["by_condition"]["A1"]["search_calls"] > 0


def test_a_search_submission_that_also_has_a0_draws_no_tools_warning(runs, mini) -> None:
    """Regression: every prepared run with A0 beside a Search condition was warned that 'A0 is
    closed-book but tools are listed', though its tools are those of its Search conditions."""
    from rap_benchmark.evaluation.submissions import validate_submission

    report = validate_submission(runs["reference"], mini)
    assert report.accepted and not [p for p in report.problems if "tools" in p]
    only_a0 = _variant(runs, "a0_tools", lambda m: m.update(conditions=["A0"]))
    assert any("closed-book, yet tools are listed" in p for p in validate_submission(only_a0, mini).problems)


def test_board_rows_carry_usage_per_episode_and_total(board_dir: Path) -> None:
    board = pd.read_csv(board_dir / "leaderboard.csv")
    row = board[(board["model"] == REFERENCE) & (board["condition"] == "A1")].iloc[0]
    assert row["search_calls_per_episode"] == pytest.approx(row["search_calls"] / 60)
    assert row["cost_usd"] == 0.0
    base = board[board["model"] == "baseline/ewma"].iloc[0]
    assert base["input_tokens"] == 0 and base["search_calls"] == 0  # no model calls: zero is known


def _variant(runs: dict[str, Path], name: str, edit) -> Path:
    """A copy of the reference submission whose metadata ``edit`` changes."""
    out = runs["root"] / "variants" / f"{name}.jsonl"
    out.parent.mkdir(exist_ok=True)
    shutil.copy(runs["reference"], out)
    meta = _meta(runs["reference"])
    edit(meta)
    Path(str(out) + ".meta.json").write_text(json.dumps(meta), encoding="utf-8")
    return out


def _set(path: tuple[str, ...], value):
    def edit(meta: dict) -> None:
        d = meta
        for k in path[:-1]:
            d = d[k]
        d[path[-1]] = value

    return edit


@pytest.mark.parametrize(
    ("name", "edit", "phrase"),
    [
        ("episodes", _set(("usage", "by_condition", "A1", "episodes"), 7), "usage counts 7 episodes"),
        ("budget", _set(("usage", "by_condition", "A1", "search_calls"), 60 * 21), "exceed the budget"),
        ("rows", _set(("usage", "by_condition", "A1", "search_calls"), 3), "rows' n_search_calls sum to"),
        ("negative", _set(("usage", "by_condition", "A0", "input_tokens"), -5), "nonnegative integer"),
        ("nan_cost", _set(("usage", "by_condition", "A0", "cost_usd"), "free"), "finite number"),
        ("undeclared", _set(("usage", "by_condition", "A3"), {"episodes": 1}), "does not declare"),
        ("unknown_key", _set(("usage", "tokens"), 5), "unknown key(s) tokens"),
        ("no_source", _set(("usage", "source"), ""), "source must say"),
    ],
)
def test_implausible_usage_is_refused_with_its_reason(runs, mini, name, edit, phrase) -> None:
    from rap_benchmark.evaluation.submissions import validate_submission

    report = validate_submission(_variant(runs, name, edit), mini)
    assert not report.accepted
    assert any(p.startswith("[fatal] usage:") and phrase in p for p in report.problems), report.problems


def test_missing_usage_is_unknown_never_zero(runs, mini_dir: Path, tmp_path: Path) -> None:
    from rap_benchmark.evaluation.submissions import validate_submission

    def drop(meta: dict) -> None:
        del meta["usage"]

    sub = _variant(runs, "no_usage", drop)
    report = validate_submission(sub, __import__("rap_benchmark").load(mini_dir))
    assert report.accepted and any("usage: none given" in p for p in report.problems)
    out = tmp_path / "board"
    assert (
        main(["leaderboard", "score", str(sub), "--instance", str(mini_dir), "--out", str(out), "--resamples", "200"])
        == 0
    )
    board = pd.read_csv(out / "leaderboard.csv")
    assert board["input_tokens"].isna().all() and board["cost_usd_per_episode"].isna().all()
    lines = [ln for ln in (out / "leaderboard.md").read_text(encoding="utf-8").splitlines() if REFERENCE in ln]
    assert lines and all("unknown" in ln and "$0" not in ln for ln in lines)


def test_converters_state_tokens_only_when_the_harness_counted_them(runs, tmp_path: Path) -> None:
    from rap_benchmark.integrations.submission import write_submission

    frame = pd.read_json(runs["reference"], lines=True)
    frame = frame[frame["condition"] == "A1"].assign(model="org/unpriced", prompt_tokens=100, completion_tokens=10)
    frame = frame.drop(columns=["cost_usd"])
    _, inspect_meta = write_submission(frame, tmp_path / "inspect.jsonl", source="Inspect logs")
    entry = json.loads(inspect_meta.read_text(encoding="utf-8"))["usage"]["by_condition"]["A1"]
    assert entry["input_tokens"] == 100 * len(frame) and entry["output_tokens"] == 10 * len(frame)
    assert entry["cost_usd"] is None  # not in the price table: unknown, not 0
    _, lmeval_meta = write_submission(frame, tmp_path / "lmeval.jsonl", source="lm-eval samples", tokens_known=False)
    entry = json.loads(lmeval_meta.read_text(encoding="utf-8"))["usage"]["by_condition"]["A1"]
    assert entry["input_tokens"] is None and entry["cost_usd"] is None
    assert entry["search_calls"] == int(frame["n_search_calls"].sum())
    priced = frame.assign(model="gpt-4o-mini")
    _, meta = write_submission(priced, tmp_path / "priced.jsonl", source="Inspect logs")
    cost = json.loads(meta.read_text(encoding="utf-8"))["usage"]["by_condition"]["A1"]["cost_usd"]
    assert cost == pytest.approx((100 * 0.15 + 10 * 0.6) * len(frame) / 1e6)


def test_prepare_and_seal_refuse_cleanly(runs, tmp_path: Path, capsys) -> None:
    assert main(["submit", "prepare", str(tmp_path), "--out", str(tmp_path / "x.jsonl")]) == 2
    assert "not a rap run folder" in capsys.readouterr().err
    assert not (tmp_path / "x.jsonl").exists()
    seal = tmp_path / "seal.json"
    salt = tmp_path / "salt.hex"
    argv = ["submit", "seal", str(runs["reference"]), "--out", str(seal), "--salt-file", str(salt)]
    assert main(argv) == 0
    before = seal.read_bytes()
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "never overwritten" in err[0]
    assert seal.read_bytes() == before


# -- which differences are real ----------------------------------------------------------------


def test_contrasts_and_strata_agree_with_rap_report(runs, mini, tmp_path: Path) -> None:
    """The board's model-vs-EWMA contrasts are ``rap report``'s to 1e-12, and so are its strict and
    exposed strata under the same cutoff (given to the report as a registry entry); compared in
    memory, at full precision."""
    from rap_benchmark.evaluation.report import build_report
    from rap_benchmark.evaluation.submissions import score_submissions

    registry = tmp_path / "registry.json"
    entry = {"model": REFERENCE, "knowledge_cutoff": "2024-07-01", "source": "test"}
    registry.write_text(json.dumps([entry]), encoding="utf-8")
    files = [runs["baselines"], runs["reference"]]
    report = build_report(mini, files, tmp_path / "report", registry=registry, n_resamples=int(RESAMPLES))
    result = score_submissions(sorted(runs["subs"].glob("*.jsonl")), mini, n_resamples=int(RESAMPLES))
    theirs = report.tables.contrasts
    theirs = theirs[theirs["contrast"] == "A0 vs baseline/ewma"]
    board = result.contrasts
    ours = board[(board["reference"] == "baseline/ewma") & (board["condition"] == "A0")]
    merged = ours.merge(theirs, left_on=["candidate", "metric"], right_on=["model", "metric"], suffixes=("", "_r"))
    assert len(merged) == len(theirs) == 3 * 6  # 5 baselines + the reference agent, three metrics
    for col in ("estimate", "lo", "hi", "field_lo", "field_hi"):
        np.testing.assert_allclose(merged[col], merged[f"{col}_r"], rtol=0, atol=1e-12)
    assert (merged["n_cells"] == merged["n_cells_r"]).all()
    # antisymmetric: a - b = -(b - a), on the same cells
    flip = board.merge(
        board,
        left_on=["condition", "metric", "candidate", "reference"],
        right_on=["condition", "metric", "reference", "candidate"],
        suffixes=("", "_f"),
    )
    np.testing.assert_allclose(flip["estimate"], -flip["estimate_f"], atol=1e-12)

    strata = report.tables.exposure
    rows = result.board.set_index(["model", "condition"])
    for cond in ("A0", "A1"):
        r = rows.loc[(REFERENCE, cond)]
        for stratum in ("strict", "exposed"):
            s = strata[(strata["model"] == REFERENCE) & (strata["condition"] == cond) & (strata["stratum"] == stratum)]
            assert r[f"{stratum}_cells"] == s["n_cells"].iloc[0]
            if s["n_cells"].iloc[0]:
                assert abs(r[f"spearman_{stratum}"] - s["spearman"].iloc[0]) <= 1e-12
        assert r["strict_cells"] + r["exposed_cells"] == r["n_episodes"]
    assert rows["strict_cells"].xs("baseline/ewma").isna().all()  # no cutoff stated: no strata


def test_registry_gives_strata_to_models_whose_metadata_states_no_cutoff(board_dir, runs, mini_dir, tmp_path) -> None:
    registry = tmp_path / "registry.json"
    entries = [
        {"model": "baseline/ewma", "release_date": "2024-07-01", "source": "test"},
        {"model": REFERENCE, "knowledge_cutoff": "2020-01-01", "source": "test: the metadata's cutoff wins"},
    ]
    registry.write_text(json.dumps(entries), encoding="utf-8")
    out = tmp_path / "board"
    files = [str(runs["subs"] / "reference.jsonl"), *map(str, sorted(runs["subs"].glob("baseline_ewma*.jsonl")))]
    argv = ["leaderboard", "score", *files, "--instance", str(mini_dir), "--out", str(out), "--resamples", "200"]
    assert main([*argv, "--registry", str(registry)]) == 0
    rows = pd.read_csv(out / "leaderboard.csv").set_index(["model", "condition"])
    before = pd.read_csv(board_dir / "leaderboard.csv").set_index(["model", "condition"])
    assert rows.loc[("baseline/ewma", "A0"), "strict_cells"] > 0
    assert rows.loc[(REFERENCE, "A1"), "strict_cells"] == before.loc[(REFERENCE, "A1"), "strict_cells"]
    bad = tmp_path / "bad.json"
    bad.write_text("[{", encoding="utf-8")
    assert main([*argv[:-2], "--out", str(tmp_path / "never"), "--registry", str(bad)]) == 2
    assert not (tmp_path / "never").exists()


def test_rank_intervals_match_ranking_each_models_own_bootstrap() -> None:
    """Oracle: the same draws through the module's own one-model statistic, ranked by hand."""
    from scipy.stats import rankdata

    from rap_benchmark.evaluation.scoring import rank_intervals
    from rap_benchmark.evaluation.scoring.bootstrap import resample_statistics

    rng = np.random.default_rng(3)
    fields = np.repeat([f"f{i}" for i in range(12)], 5)
    blocks = {f"f{i}": f"b{i // 2}" for i in range(12)}
    values = [rng.normal(loc, 0.3, size=fields.size) for loc in (0.5, 0.45, 0.1, 0.1)]
    got = rank_intervals(values, [fields] * 4, blocks, n_resamples=500, seed=11)
    stats = []
    for v in values:
        means = pd.Series(v).groupby(fields).mean()
        by_block = means.groupby(means.index.map(blocks))
        stats.append(
            resample_statistics(by_block.sum().to_numpy(), by_block.count().to_numpy(float), n_resamples=500, seed=11)
        )
    ranks = rankdata(-np.column_stack(stats), "min", axis=1)
    want = np.column_stack(
        [np.quantile(ranks, 0.025, axis=0, method="lower"), np.quantile(ranks, 0.975, axis=0, method="higher")]
    )
    np.testing.assert_array_equal(got, want.astype(int))
    assert got[0, 0] == 1 and got[2, 0] >= 3  # clear winners and losers stay apart


def test_exact_ties_share_a_rank() -> None:
    """Regression: ARIMA tuned to phi = 0 forecasts exactly as Recent; the two were ranked 1 and 2 by
    name while every bootstrap draw ranked both first, so rank 2 lay outside its own interval."""
    from rap_benchmark.evaluation.submissions import apply_ranking_rule

    board = pd.DataFrame({"model": ["b", "a", "c", "d"], "condition": ["A0"] * 4, "spearman": [0.8, 0.8, 0.7, 0.9]})
    ranked = apply_ranking_rule(board, {("d", "A0"): ("f1@2025-01-01",)}, 10)
    assert dict(zip(ranked["model"], ranked["rank"].astype(object), strict=True)) == {
        "a": 1,
        "b": 1,
        "c": 3,
        "d": pd.NA,
    }


def test_every_ranked_row_has_an_interval_around_its_rank(board_dir: Path) -> None:
    board = pd.read_csv(board_dir / "leaderboard.csv")
    ranked = board[board["rank"].notna()]
    assert len(ranked) == len(board)
    assert ((ranked["rank_lo"] <= ranked["rank"]) & (ranked["rank"] <= ranked["rank_hi"])).all()


# -- the page ------------------------------------------------------------------------------------


def _dump_dom(html: Path) -> str:
    chromium = shutil.which("chromium")
    with tempfile.TemporaryDirectory(prefix="rap-chromium-") as profile:
        cmd = [
            chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            f"--user-data-dir={profile}", "--dump-dom", html.resolve().as_uri(),
        ]  # fmt: skip
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


@pytest.mark.skipif(shutil.which("chromium") is None, reason="Debian's chromium is not installed")
def test_index_html_renders_every_section_in_chromium(board_dir: Path) -> None:
    html = (board_dir / "index.html").read_text(encoding="utf-8")
    assert not re.search(r"""(src|href)=["']?https?:""", html)  # offline: nothing to fetch
    dom = _dump_dom(board_dir / "index.html")
    for section in ("leaderboard", "figures", "contrasts", "submissions"):
        assert f'<section id="{section}">' in dom, section
    board = pd.read_csv(board_dir / "leaderboard.csv")
    body = dom.split('<table id="board">', 1)[1].split("</table>", 1)[0]
    assert body.count("<tr data-track=") == len(board)
    for header in ("rank (95% CI)", "Spearman [95% block CI]", "USD/ep.", "Search calls/ep.", "strict"):
        assert f'title="sort by {header}">' in body, header  # a long header is drawn on two lines
    assert dom.count('src="data:image/png;base64,') == 2 and 'id="cost"' in dom and 'id="forest"' in dom
    assert '<table class="matrix" data-condition="A0">' in dom and 'data-condition="A1"' in dom
    subs = json.loads((board_dir / "submissions.json").read_text(encoding="utf-8"))
    assert dom.count('<details class="submission"') == len(subs) == 7
    assert "accepted" in dom and "rap run store" in dom  # verdicts and where the usage came from


# -- the dataset --------------------------------------------------------------------------------


def test_board_exports_as_a_dataset_that_loads_offline(board_dir: Path, tmp_path: Path, monkeypatch) -> None:
    import datasets

    from rap_benchmark.hub import verify_repo
    from rap_benchmark.hub.publish import plan

    hub = tmp_path / "hub"
    assert main(["hub", "export-board", str(board_dir), "--out", str(hub), "--org", "rap"]) == 0
    repo = hub / "rap" / "leaderboard"
    assert verify_repo(repo) == []
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    loaded = datasets.load_dataset(
        str(repo), "retrospective", split="test", cache_dir=str(tmp_path / "hf-cache")
    ).to_pandas()
    board = pd.read_csv(board_dir / "leaderboard.csv")
    assert len(loaded) == len(board) and list(loaded["model"]) == list(board["model"])
    np.testing.assert_allclose(loaded["spearman"], board["spearman"], atol=0)
    subs = datasets.load_dataset(
        str(repo), "submissions", split="submissions", cache_dir=str(tmp_path / "hf-cache")
    ).to_pandas()
    ref = subs[(subs["model"] == REFERENCE) & (subs["condition"] == "A1")].iloc[0]
    assert ref["knowledge_cutoff"] == "2024-07-01" and ref["usage_search_calls"] > 0
    card = (repo / "README.md").read_text(encoding="utf-8")
    meta = json.loads((board_dir / "board.json").read_text(encoding="utf-8"))
    for fact in (meta["manifest_hash"], f"seed {meta['seed']}", f"rap_benchmark package {meta['package_version']}"):
        assert fact in card
    assert "config_name: retrospective" in card and "config_name: contrasts" in card
    assert [s.repo_id for s in plan(hub, org="my-org", local_org="rap", tag="v1")][0] == "my-org/leaderboard"


def test_export_refuses_a_folder_without_a_board(tmp_path: Path, capsys) -> None:
    assert main(["hub", "export-board", str(tmp_path), "--out", str(tmp_path / "hub")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "holds no leaderboard.csv" in err[0]
    assert not (tmp_path / "hub").exists()


def test_usage_formatting_never_prints_unknown_as_zero() -> None:
    from rap_benchmark.evaluation.usage import fmt_cost, fmt_usage

    assert fmt_cost(math.nan) == fmt_usage(None) == "unknown"
    assert fmt_cost(0.0) == "$0" and fmt_usage(0) == "0"


@pytest.mark.slow
@pytest.mark.shared_data
def test_board_on_arxiv_sample(arxiv_sample_dir: Path, arxiv_sample_baselines: Path, tmp_path: Path) -> None:
    """The issue's board on arxiv-sample: the six baselines (the session's ``rap baselines
    --tune-dev`` run, which the report test reads too) and the two reference agents from their run
    stores; usage filled from the runs, contrasts equal to the report's, the page and the dataset.
    (A SmolLM2 row is shown by hand in the report: minutes of CPU per episode.)"""
    import datasets

    import rap_benchmark as rap
    from rap_benchmark.evaluation.predictions import combine_validated, validate_predictions
    from rap_benchmark.evaluation.report import compute_tables
    from rap_benchmark.evaluation.submissions import score_submissions

    inst = rap.load(arxiv_sample_dir)
    subs = tmp_path / "subs"
    baselines = arxiv_sample_baselines
    assert main(["submit", "split", str(baselines), "--out", str(subs)]) == 0
    for name, conditions in (("uniform", "A0,A1"), ("search-hits", "A1")):
        run = tmp_path / "runs" / name
        argv = ["run", str(arxiv_sample_dir), "--backend", "reference", "--model", f"reference/{name}"]
        assert main([*argv, "--conditions", conditions, "--out", str(run), "--no-progress"]) == 0
        assert main(["submit", "prepare", str(run), "--out", str(subs / f"reference-{name}.jsonl")]) == 0
    board_dir = tmp_path / "board"
    files = sorted(str(p) for p in subs.glob("*.jsonl"))
    assert main(["leaderboard", "score", *files, "--instance", str(arxiv_sample_dir), "--out", str(board_dir)]) == 0
    board = pd.read_csv(board_dir / "leaderboard.csv")
    assert len(board) == 6 + 2 + 1 and board["rank"].notna().all()
    hits = board[board["model"] == "reference/search-hits"].iloc[0]
    assert hits["search_calls_per_episode"] > 0 and hits["cost_usd"] == 0.0

    result = score_submissions(files, inst)
    preds, _ = combine_validated([validate_predictions(p, inst) for p in [baselines, *subs.glob("reference-*.jsonl")]])
    theirs = compute_tables(inst, preds).contrasts
    theirs = theirs[theirs["contrast"] == "A0 vs baseline/ewma"]
    ours = result.contrasts[
        (result.contrasts["reference"] == "baseline/ewma") & (result.contrasts["condition"] == "A0")
    ]
    merged = ours.merge(theirs, left_on=["candidate", "metric"], right_on=["model", "metric"], suffixes=("", "_r"))
    assert len(merged) == len(theirs) == 3 * 6
    for col in ("estimate", "lo", "hi", "field_lo", "field_hi"):
        np.testing.assert_allclose(merged[col], merged[f"{col}_r"], rtol=0, atol=1e-12)

    if shutil.which("chromium"):
        dom = _dump_dom(board_dir / "index.html")
        for section in ("leaderboard", "figures", "contrasts", "submissions"):
            assert f'<section id="{section}">' in dom
        assert dom.count("<tr data-track=") == len(board)
    hub = tmp_path / "hub"
    assert main(["hub", "export-board", str(board_dir), "--out", str(hub)]) == 0
    # a cache of its own: datasets keys a local folder's cache by its repo name and data file names,
    # not by its content, so a session cache that has seen another rap/leaderboard returns its rows
    loaded = datasets.load_dataset(
        str(hub / "rap" / "leaderboard"), "retrospective", split="test", cache_dir=str(tmp_path / "hf-cache")
    )
    assert loaded.num_rows == len(board)


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["A0", "A1", "A3"]),
            st.integers(0, 10**7),
            st.integers(0, 10**5),
            st.integers(0, 20),
            st.one_of(st.none(), st.floats(0, 50, allow_nan=False)),
        ),
        min_size=1,
        max_size=30,
    )
)
@example([("A0", 0, 0, 0, 1.0)])  # found by hypothesis: a price paid for no token
@example([("A0", 0, 0, 0, 4.1428448127829995e-98)])  # found by hypothesis: a price below what usage states
@settings(max_examples=60, deadline=None)
def test_usage_of_any_rows_passes_its_own_check(rows) -> None:
    """Invariant: what ``usage_from_rows`` states about rows, ``check_usage`` accepts for them unless
    the rows price a condition that used no token at all (then exactly that condition is refused); a
    null cost anywhere makes the condition's cost unknown, never a partial sum."""
    from rap_benchmark.core.records import Condition
    from rap_benchmark.evaluation.usage import check_usage, usage_from_rows

    frame = pd.DataFrame(
        rows, columns=["condition", "prompt_tokens", "completion_tokens", "n_search_calls", "cost_usd"]
    ).assign(model="org/m")
    raw = usage_from_rows(frame, source="test")
    conditions = tuple(sorted({Condition(c) for c in frame["condition"]}, key=lambda c: c.value))
    usage, problems = check_usage(raw, conditions, frame, max_search_calls=20)
    fatal = [p for p in problems if p.startswith("[fatal]")]
    priced_without_tokens = {
        c
        for c, part in frame.groupby("condition")
        if part["cost_usd"].notna().all()
        and round(part["cost_usd"].sum(), 10) > 0  # usage states costs to 1e-10 USD
        and part[["prompt_tokens", "completion_tokens"]].sum().sum() == 0
    }
    # the one implausible thing rows can say: a price paid for no token at all
    assert sorted(p.split(":")[1].strip() for p in fatal) == sorted(priced_without_tokens), problems
    assert (usage is None) == bool(priced_without_tokens)
    for cond, part in frame.groupby("condition"):
        entry = raw["by_condition"][cond]
        assert entry["episodes"] == len(part) and entry["input_tokens"] == part["prompt_tokens"].sum()
        assert (entry["cost_usd"] is None) == bool(part["cost_usd"].isna().any())
