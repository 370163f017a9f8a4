"""Episode metrics against scipy oracles (the paper's metrics)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from scipy.spatial.distance import jensenshannon
from scipy.stats import pearsonr, rankdata, spearmanr

from rap_benchmark.evaluation.scoring import metrics as M

int_rows = arrays(np.float64, st.tuples(st.integers(1, 12), st.just(8)), elements=st.integers(0, 4).map(float))


def _scipy_spearman(a: np.ndarray, b: np.ndarray) -> float:
    with np.errstate(invalid="ignore", divide="ignore"):
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return float(spearmanr(a, b).statistic)


@settings(max_examples=300, deadline=None)
@given(int_rows, st.data())
def test_rankdata_rows_matches_scipy(a: np.ndarray, data: st.DataObject) -> None:
    np.testing.assert_array_equal(M.rankdata_rows(a), rankdata(a, method="average", axis=1))


@settings(max_examples=300, deadline=None)
@given(
    st.integers(1, 12).flatmap(
        lambda n: st.tuples(*(arrays(np.float64, (n, 8), elements=st.integers(0, 4).map(float)),) * 2)
    )
)
def test_spearman_matches_scipy_per_row_with_ties(pair: tuple[np.ndarray, np.ndarray]) -> None:
    p, y = pair
    got = M.spearman(p, y)
    for i in range(p.shape[0]):
        if np.ptp(y[i]) == 0:
            assert np.isnan(got[i])  # constant truth: undefined
        elif np.ptp(p[i]) == 0:
            assert got[i] == 0.0  # uniform prediction: no ordering
        else:
            assert abs(got[i] - _scipy_spearman(p[i], y[i])) <= 1e-12


def test_spearman_continuous_rows_match_scipy() -> None:
    rng = np.random.default_rng(0)
    p = rng.dirichlet(np.ones(8), size=500)
    y = rng.dirichlet(np.ones(8), size=500)
    ref = np.array([spearmanr(a, b).statistic for a, b in zip(p, y, strict=True)])
    np.testing.assert_allclose(M.spearman(p, y), ref, rtol=0, atol=1e-12)


def test_uniform_and_constant_rules() -> None:
    y = np.array([0.3, 0.2, 0.1, 0.1, 0.1, 0.1, 0.05, 0.05])
    uniform = np.full(8, 0.125)
    assert M.spearman(uniform, y)[0] == 0.0
    assert M.centred_cosine(uniform, y)[0] == 0.0
    assert np.isnan(M.spearman(y, uniform)[0])
    assert np.isnan(M.spearman(uniform, uniform)[0])  # the target rule wins
    assert np.isnan(M.rank_correlation(uniform, y)[0])
    # a constant that is not exactly representable still counts as constant
    thirds = np.full(8, 0.1)
    assert M.spearman(thirds, y)[0] == 0.0
    assert M.centred_cosine(thirds, y)[0] == 0.0


def test_nan_rows_score_nan_in_every_metric() -> None:
    p = np.array([[np.nan] * 8, [0.125] * 8])
    y = np.array([[0.2, 0.1, 0.1, 0.1, 0.1, 0.1, 0.2, 0.1]] * 2)
    for name, values in M.episode_scores(p, y).items():
        assert np.isnan(values[0]), name
        assert np.isfinite(values[1]), name


@settings(max_examples=200, deadline=None)
@given(arrays(np.float64, (2, 8), elements=st.floats(-10, 10, allow_nan=False)))
def test_centred_cosine_is_pearson(ab: np.ndarray) -> None:
    a, b = ab
    got = M.centred_cosine(a, b)[0]
    if np.ptp(b) == 0:
        assert np.isnan(got)
    elif np.ptp(a) == 0:
        assert got == 0.0
    else:
        ac, bc = a - a.mean(), b - b.mean()
        denom = np.linalg.norm(ac) * np.linalg.norm(bc)
        if denom > 1e-6:
            assert got == pytest.approx(float(ac @ bc / denom), abs=1e-9)
            assert got == pytest.approx(pearsonr(a, b).statistic, abs=1e-9)


simplex_rows = arrays(np.float64, (2, 8), elements=st.sampled_from([0.0, 0.0, 1.0, 2.0, 3.0, 0.5, 7.0])).filter(
    lambda a: (a.sum(axis=1) > 0).all()
)


@settings(max_examples=300, deadline=None)
@given(simplex_rows)
def test_jsd_matches_scipy_natural_log(raw: np.ndarray) -> None:
    pq = raw / raw.sum(axis=1, keepdims=True)
    p, y = pq[0], pq[1]
    ref = jensenshannon(p, y) ** 2  # natural log by default
    assert M.jsd(p, y)[0] == pytest.approx(ref, abs=1e-12)
    assert 0 <= M.jsd(p, y)[0] <= np.log(2) + 1e-12
    assert M.tv(p, y)[0] == pytest.approx(0.5 * np.abs(p - y).sum(), abs=1e-15)


def test_jsd_disjoint_support_is_ln2() -> None:
    p = np.array([0.5, 0.5, 0, 0, 0, 0, 0, 0])
    y = np.array([0, 0, 0.5, 0.5, 0, 0, 0, 0])
    assert M.jsd(p, y)[0] == pytest.approx(np.log(2), abs=1e-15)
    assert M.tv(p, y)[0] == 1.0


def test_residual_and_revision_are_spearman_on_differences() -> None:
    rng = np.random.default_rng(3)
    p, y, e, p2, y2 = (rng.dirichlet(np.ones(8), size=50) for _ in range(5))
    ref_res = [spearmanr(a - c, b - c).statistic for a, b, c in zip(p, y, e, strict=True)]
    np.testing.assert_allclose(M.residual_spearman(p, y, e), ref_res, atol=1e-12)
    ref_rev = [spearmanr(b - a, d - c).statistic for a, b, c, d in zip(p, p2, y, y2, strict=True)]
    np.testing.assert_allclose(M.revision_alignment(p, p2, y, y2), ref_rev, atol=1e-12)
    ref_cc = [pearsonr(b - a, d - c).statistic for a, b, c, d in zip(p, p2, y, y2, strict=True)]
    np.testing.assert_allclose(M.revision_alignment_cc(p, p2, y, y2), ref_cc, atol=1e-12)
    # a prediction equal to the reference has no residual ordering: score 0 (uniform rule)
    assert (M.residual_spearman(e, y, e) == 0.0).all()
    # no revision at all scores 0, no ordering to align
    assert (M.revision_alignment(p, p, y, y2) == 0.0).all()


def test_named_pairs() -> None:
    rng = np.random.default_rng(4)
    p, x, y, s = (rng.dirichlet(np.ones(8), size=20) for _ in range(4))
    np.testing.assert_array_equal(M.pred_recent(p, x), M.spearman(p, x))
    np.testing.assert_array_equal(M.prediction_stability(p, s), M.spearman(s, p))
    np.testing.assert_array_equal(M.truth_stability(x, y), M.rank_correlation(y, x))


def test_change_rich_uses_lowest_quartile_of_truth_persistence() -> None:
    rng = np.random.default_rng(5)
    x = rng.dirichlet(np.ones(8), size=400)
    y = rng.dirichlet(np.ones(8), size=400)
    y[:3] = 0.125  # undefined rows are never change-rich
    mask = M.change_rich_mask(x, y)
    rho = M.rank_correlation(x, y)
    ok = np.isfinite(rho)
    assert not mask[:3].any()
    cut = rho[mask].max()
    # Spearman on 8 directions takes few values: ties at the cut all join the subset
    assert (ok & (rho < cut)).sum() < 0.25 * ok.sum() <= mask.sum()
    assert cut < rho[ok & ~mask].min()


def test_shape_errors() -> None:
    with pytest.raises(ValueError):
        M.spearman(np.zeros((3, 8)), np.zeros((2, 8)))
    with pytest.raises(ValueError):
        M.tv(np.zeros((2, 2, 8)), np.zeros((2, 2, 8)))
