"""Instrument audits: Hungarian cross-fit alignment, the human-audit analysis and its null."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from rap_benchmark.audit.align import cross_fit, direction_index, fit_half, hungarian_map
from rap_benchmark.audit.human import analyse, corpus_cell_shares, design_sample, sheet_html, tv_permutation_test
from rap_benchmark.audit.parallel import parallel_agreement, second_instrument, truth_agreement
from rap_benchmark.core.records import DIRECTION_KEYS


@settings(max_examples=50, deadline=None)
@given(st.permutations(list(range(8))), st.integers(0, 2**32 - 1))
def test_hungarian_recovers_any_permutation(perm: list[int], seed: int) -> None:
    rng = np.random.default_rng(seed)
    frozen = rng.integers(0, 8, size=400)
    frozen[:8] = np.arange(8)  # every direction present
    perm_a = np.asarray(perm)
    second = perm_a[frozen]  # slot = perm[direction]
    mapping = hungarian_map(frozen, second)
    assert np.array_equal(mapping[perm_a], np.arange(8))


def test_cross_fit_scores_only_out_of_sample_items() -> None:
    rng = np.random.default_rng(1)
    frozen = rng.integers(0, 8, size=1000)
    second = (frozen + 3) % 8
    noisy = rng.random(1000) < 0.2
    second[noisy] = rng.integers(0, 8, size=noisy.sum())
    fit = fit_half(np.array([f"id{i}" for i in range(1000)]))
    res = cross_fit(frozen, second, fit)
    assert np.isnan(res.agree[fit]).all()
    assert np.isfinite(res.agree[~fit]).all()
    expected = 0.8 + 0.2 / 8
    assert abs(np.nanmean(res.agree) - expected) < 0.05


def test_permuted_codebook_copy_is_recovered_exactly_on_mini(mini) -> None:
    """A second instrument that is the frozen one with its directions renamed aligns perfectly."""
    perm = np.array([3, 7, 0, 5, 1, 6, 2, 4])
    asg = mini.assignments
    frozen = direction_index(asg["primary"].to_numpy())
    second = pd.DataFrame(
        {"arxiv_id": asg["arxiv_id"], "field_id": asg["field_id"], "slot": np.where(frozen >= 0, perm[frozen], 0)}
    )
    for field_id, g in asg.groupby("field_id"):
        idx = g.index.to_numpy()
        f = frozen[idx]
        s = second["slot"].to_numpy()[idx]
        ok = f >= 0
        mapping = hungarian_map(f[ok], s[ok])
        assert np.array_equal(mapping[perm], np.arange(8)), field_id
    table, summary = parallel_agreement(mini.papers, asg, second, mini.spec.codebook_cutoff, n_resamples=200, seed=0)
    assert summary["overall"].estimate == pytest.approx(1.0)
    assert (table["agree_all"] == 1.0).all()


def test_offline_instrument_agrees_with_truth_on_mini(mini) -> None:
    truth = mini.extras["truth"]
    table = truth_agreement(mini.assignments, truth)
    assert len(table) == len(mini.codebooks)
    # eight directions: chance is 1/8; the instrument must recover most latent labels
    assert table["exact"].mean() > 0.5
    assert (table["within_pair"] >= table["exact"]).all()


def test_second_instrument_agreement_on_mini(mini) -> None:
    second = second_instrument(mini.papers, mini.assignments, mini.spec.codebook_cutoff, seed=3)
    assert set(second["slot"]) <= set(range(8))
    table, summary = parallel_agreement(
        mini.papers, mini.assignments, second, mini.spec.codebook_cutoff, n_resamples=500, seed=0
    )
    assert summary["overall"].lo <= summary["overall"].estimate <= summary["overall"].hi
    assert summary["overall"].estimate > 1 / 8 + 0.1  # far above chance: the directions are real


def test_an_instrument_compared_with_itself_agrees_fully_and_a_third_is_scored_alike(mini) -> None:
    """slots_as_primary lets two independent instruments be compared by the same cross-fit measure."""
    from rap_benchmark.audit.parallel import slots_as_primary

    fields = sorted(mini.codebooks)[:3]
    asg = mini.assignments.loc[mini.assignments["field_id"].isin(fields)].reset_index(drop=True)
    cutoff = mini.spec.codebook_cutoff
    second = second_instrument(mini.papers, asg, cutoff, seed=3)
    as_frozen = slots_as_primary(asg, second)
    assert len(as_frozen) == len(asg) and set(as_frozen["primary"]) <= {f"D{k}" for k in range(8)}
    _, same = parallel_agreement(mini.papers, as_frozen, second, cutoff, n_resamples=100, seed=0)
    assert same["overall"].estimate == 1.0
    third = second_instrument(mini.papers, asg, cutoff, seed=4, representation="bigram")
    _, cross = parallel_agreement(mini.papers, as_frozen, third, cutoff, n_resamples=100, seed=0)
    assert 1 / 8 + 0.1 < cross["overall"].estimate <= 1.0
    with pytest.raises(ValueError, match="representation must be one of"):
        second_instrument(mini.papers, asg, cutoff, seed=3, representation="chars")


def test_second_instrument_never_reads_the_frozen_labels(mini) -> None:
    """Built independently: scrambling the frozen primaries, secondaries and types changes no slot."""
    fields = sorted(mini.codebooks)[:2]
    asg = mini.assignments.loc[mini.assignments["field_id"].isin(fields)].reset_index(drop=True)
    scrambled = asg.copy()
    rng = np.random.default_rng(0)
    for col in ("primary", "secondary", "type"):
        scrambled[col] = rng.permutation(scrambled[col].to_numpy())
    a = second_instrument(mini.papers, asg, mini.spec.codebook_cutoff, seed=3)
    b = second_instrument(mini.papers, scrambled, mini.spec.codebook_cutoff, seed=3)
    pd.testing.assert_frame_equal(a, b)


def test_permutation_null_is_uniform_under_exchangeable_labellers() -> None:
    """Labellers drawn from one distribution give uniform p-values; a shift is detected."""
    rng = np.random.default_rng(12345)
    q = np.array([0.3, 0.2, 0.15, 0.1, 0.1, 0.08, 0.05, 0.02])
    pvals = []
    for r in range(300):
        a = rng.choice(8, size=114, p=q)
        b = rng.choice(8, size=114, p=q)
        pvals.append(tv_permutation_test(a, b, n_permutations=199, seed=r).p_value)
    pvals = np.array(pvals)
    # the test statistic is discrete, so p-values are at most slightly conservative
    assert stats.kstest(pvals, "uniform").pvalue > 0.01
    reject = float(np.mean(pvals <= 0.05))
    lo, hi = stats.binom.ppf([0.0005, 0.9995], 300, 0.05) / 300
    assert lo <= reject <= hi
    # power: a labeller with a shifted marginal is detected almost always
    q2 = np.roll(q, 2)
    power = np.mean(
        [
            tv_permutation_test(
                rng.choice(8, size=114, p=q), rng.choice(8, size=114, p=q2), n_permutations=199, seed=r
            ).p_value
            <= 0.05
            for r in range(50)
        ]
    )
    assert power > 0.9


def test_permutation_test_observed_tv_matches_direct_formula() -> None:
    a = np.array([0, 0, 1, 2, 3, 7])
    b = np.array([0, 1, 1, 2, 4, 7])
    res = tv_permutation_test(a, b, n_permutations=99, seed=0)
    ma = np.bincount(a, minlength=8) / 6
    mb = np.bincount(b, minlength=8) / 6
    assert res.tv == pytest.approx(0.5 * np.abs(ma - mb).sum())
    with pytest.raises(ValueError):
        tv_permutation_test(np.array([0, 9]), np.array([1, 2]), seed=0)


def test_human_audit_sheet_is_blind_and_analysis_matches_hand_counts(mini) -> None:
    fields = mini.field_ids[:4]
    cutoff = mini.spec.codebook_cutoff
    sample = design_sample(
        mini.papers, mini.assignments, mini.codebooks, fields, cutoff, per_cell=2, population=1, seed=7
    )
    sheet, key = sample.sheet, sample.key
    assert len(sheet) == len(key) > 0
    for col in ("primary", "secondary", "type", "stratum", "cell", "arxiv_id"):
        assert col not in sheet.columns or sheet[col].eq("").all()
    assert not sheet["abstract"].isna().any()
    html = sheet_html(sheet)
    assert "http://" not in html and "https://" not in html
    for aid in key["arxiv_id"]:
        assert aid not in html  # no ids, no labels: title and abstract only
    # an annotator who copies the frozen primary on accepted items: exact match 1.0
    answers = pd.DataFrame(
        {
            "item_id": key["item_id"],
            "member": "yes",
            "primary": key["primary"].where(key["primary"].isin(DIRECTION_KEYS), "other"),
            "secondary": "",
            "clarity": "clear",
            "confidence": "high",
        }
    )
    pi = corpus_cell_shares(mini.assignments, cutoff)
    res = analyse(key, answers, pi, n_resamples=200, seed=1)
    assert res["membership_reproduction"].estimate == 1.0
    assert res["exact_primary_match"].estimate == pytest.approx(1.0)
    # now reject every boundary item's primary: reweighted estimate = sum of single-cell shares
    wrong = answers.copy()
    boundary = key["type"].isin(["boundary", "bridge"]).to_numpy()
    wrong.loc[boundary, "primary"] = "other"
    res2 = analyse(key, wrong, pi, n_resamples=200, seed=1)
    present = {c for c in key["cell"].dropna()}
    weights = {c: pi[c] for c in present}
    expected = sum(w for c, w in weights.items() if c.startswith("single")) / sum(weights.values())
    assert res2["exact_match_reweighted"].estimate == pytest.approx(expected)
    assert res2["exact_match_reweighted"].lo <= res2["exact_match_reweighted"].hi


def test_report_carries_the_instrument_audit_table(mini, tmp_path) -> None:
    from rap_benchmark.evaluation.report import build_report

    result = build_report(mini, [], tmp_path / "report", audit=True, n_resamples=200)
    table = pd.read_csv(tmp_path / "report" / "instrument_audit.csv")
    measures = table["measure"].tolist()
    assert any(m.startswith("parallel instrument: out-of-sample") for m in measures)
    assert any(m.startswith("frozen instrument vs latent truth: exact") for m in measures)
    assert ((table["lo"] <= table["estimate"]) & (table["estimate"] <= table["hi"])).all()
    assert "Instrument audit" in result.html.read_text(encoding="utf-8")


def test_audit_sheet_asks_for_a_rating_of_every_direction_of_every_sampled_field(mini, tmp_path) -> None:
    from rap_benchmark.audit.human import save_sample
    from rap_benchmark.audit.readability import RATINGS

    fields = mini.field_ids[:3]
    sample = design_sample(mini.papers, mini.assignments, mini.codebooks, fields, mini.spec.codebook_cutoff, seed=3)
    d = sample.directions
    assert d[["field_id", "key"]].values.tolist() == [[f, k] for f in fields for k in DIRECTION_KEYS]
    assert d["rating"].eq("").all() and d["name"].tolist()[:8] == [x.name for x in mini.codebooks[fields[0]].directions]
    paths = save_sample(sample, tmp_path / "sheet")
    back = pd.read_csv(paths["directions"], dtype=str, keep_default_na=False)
    assert len(back) == 8 * len(fields) and "rating" in back.columns
    form = (tmp_path / "sheet" / "sheet.html").read_text(encoding="utf-8")
    assert form.count('<select name="rating">') == 8 * len(fields)
    assert all(f"<option>{r}</option>" in form for r in RATINGS) and "downloadRatings()" in form
    for aid in sample.key["arxiv_id"]:
        assert aid not in form


def _write(path, rows: list[tuple], columns: tuple[str, ...]) -> str:
    pd.DataFrame(rows, columns=list(columns)).to_csv(path, index=False)
    return str(path)


def test_audit_analyse_two_readers_gives_the_hand_computed_shares(mini_dir, tmp_path, capsys) -> None:
    """Two made-up readers of six items in two fields and of their sixteen directions, through the CLI;
    every share below is counted by hand from the rows."""
    import json

    from rap_benchmark.cli import main

    key = _write(
        tmp_path / "key.csv",
        [
            ("i1", "f000", "p1", "cell:single/pre", "single/pre", "D0", "", "single"),
            ("i2", "f000", "p2", "cell:single/post", "single/post", "D1", "", "single"),
            ("i3", "f000", "p3", "cell:boundary/pre", "boundary/pre", "D2", "D3", "boundary"),
            ("i4", "f001", "p4", "cell:single/pre", "single/pre", "D0", "", "single"),
            ("i5", "f001", "p5", "cell:boundary/post", "boundary/post", "D1", "D2", "boundary"),
            ("i6", "f001", "p6", "population", "boundary/post", "D4", "D5", "bridge"),
        ],
        ("item_id", "field_id", "arxiv_id", "stratum", "cell", "primary", "secondary", "type"),
    )
    cols = ("item_id", "member", "primary", "secondary", "clarity", "confidence")
    # reader a: exact on i1, i4, i5; i3 inside the pair; i2 and i6 wrong
    a = _write(
        tmp_path / "a.csv",
        [(f"i{i}", "yes", p, "", "clear", "high") for i, p in enumerate(["D0", "D2", "D3", "D0", "D1", "D6"], 1)],
        cols,
    )
    # reader b agrees with a on i1, i5, i6
    b = _write(
        tmp_path / "b.csv",
        [(f"i{i}", "yes", p, "", "clear", "high") for i, p in enumerate(["D0", "D1", "D2", "D7", "D1", "D6"], 1)],
        cols,
    )
    c, p, n = "coherent", "partly", "not a direction"
    ra = [c] * 5 + [p, p, n] + [c] * 6 + [p, n]
    rb = [c] * 4 + [n, p, p, p] + [c] * 8
    slots = [(f, k) for f in ("f000", "f001") for k in DIRECTION_KEYS]
    rcols = ("field_id", "key", "rating")
    ra_path = _write(tmp_path / "ra.csv", [(*s, r) for s, r in zip(slots, ra, strict=True)], rcols)
    rb_path = _write(tmp_path / "rb.csv", [(*s, r.upper()) for s, r in zip(slots, rb, strict=True)], rcols)

    argv = ["audit", "analyse", str(mini_dir), key, a, b, "--ratings", ra_path, "--ratings", rb_path]
    assert main([*argv, "--json", "--resamples", "50", "--permutations", "99"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    r1 = out["reader_1"]
    assert r1["exact_primary_match"]["estimate"] == pytest.approx(3 / 6)
    assert r1["exact_primary_match_single"]["estimate"] == pytest.approx(2 / 3)
    assert r1["within_pair_match"]["estimate"] == pytest.approx(2 / 3)
    assert out["readers"]["readers_primary_agree"]["estimate"] == pytest.approx(3 / 6)
    assert out["readers"]["readers_primary_agree_single"]["estimate"] == pytest.approx(1 / 3)
    assert out["readers"]["readers_primary_agree_others"]["estimate"] == pytest.approx(2 / 3)
    shares = out["direction_ratings"]
    assert shares["coherent_by_both"]["estimate"] == pytest.approx(10 / 16)
    assert shares["not_a_direction_by_either"]["estimate"] == pytest.approx(3 / 16)
    assert shares["readers_rate_alike"]["estimate"] == pytest.approx(12 / 16)
    assert shares["coherent_by_both"]["lo"] <= 10 / 16 <= shares["coherent_by_both"]["hi"]
    # one reader alone: plain shares
    assert main(["audit", "analyse", str(mini_dir), key, a, "--ratings", ra_path, "--json", "--resamples", "50"]) == 0
    one = json.loads(capsys.readouterr().out.strip().splitlines()[-1])["direction_ratings"]
    assert [one[k]["estimate"] for k in ("coherent", "partly", "not_a_direction")] == pytest.approx(
        [11 / 16, 3 / 16, 2 / 16]
    )
    # a rating outside the three is one line, exit 2
    bad = _write(tmp_path / "bad.csv", [("f000", "D0", "great")], rcols)
    assert main(["audit", "analyse", str(mini_dir), key, a, "--ratings", bad]) == 2
    assert "unknown rating" in capsys.readouterr().err


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.one_of(st.floats(-1, 1), st.just(float("nan"))), max_size=30),
    st.integers(1, 300),
    st.integers(0, 2**32 - 1),
)
def test_the_per_field_mean_interval_is_the_field_bootstrap_with_one_row_per_field(
    values: list[float], n_resamples: int, seed: int
) -> None:
    """field_resampled (the parallel-instrument summaries) is field_bootstrap's rule drawn as one
    array: on the finite values, one row per field, both give the same estimate and interval."""
    from rap_benchmark.audit.intervals import field_bootstrap, field_resampled

    v = np.asarray(values, dtype=float)
    fast = field_resampled(v, n_resamples=n_resamples, seed=seed)
    finite = v[np.isfinite(v)]
    if finite.size == 0:
        assert fast.n == 0 and np.isnan([fast.estimate, fast.lo, fast.hi]).all()
        return
    fields = np.array([f"f{i:03d}" for i in range(finite.size)])
    slow = field_bootstrap(
        fields, {"mean": lambda rows: float(finite[rows].mean())}, n_resamples=n_resamples, seed=seed
    )
    assert fast == slow["mean"]


def test_the_audit_resamplers_refuse_zero_draws_as_the_scorer_does() -> None:
    """Regression: ``rap audit`` bounded its flags, but the library functions behind them still
    took 0 resamples and answered with an IndexError or a silent ``[nan, nan]`` interval; they now
    refuse it like ``evaluation.scoring.bootstrap.draw_weights``."""
    from rap_benchmark.audit.intervals import field_bootstrap, field_resampled

    fields, labels = np.array(["f1", "f1", "f2"]), np.array([0, 1, 2])
    with pytest.raises(ValueError, match="n_resamples must be >= 1"):
        field_bootstrap(fields, {"mean": lambda rows: float(labels[rows].mean())}, n_resamples=0, seed=1)
    with pytest.raises(ValueError, match="n_resamples must be >= 1"):
        field_resampled(np.array([0.5, 0.7]), n_resamples=0, seed=1)
    with pytest.raises(ValueError, match="n_permutations must be >= 1"):
        tv_permutation_test(labels, labels, n_permutations=0, seed=1)
    assert np.isfinite(field_resampled(np.array([0.5, 0.7]), n_resamples=1, seed=1).lo)
