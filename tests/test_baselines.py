"""Statistical baselines against statsmodels and an independent closed form (the paper's statistical baselines)."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rap_benchmark.core.spec import BenchmarkSpec
from rap_benchmark.evaluation.scoring import baselines as B
from rap_benchmark.evaluation.scoring.aggregate import field_macro
from rap_benchmark.evaluation.scoring.metrics import spearman


def _histories(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.dirichlet(np.full(8, 0.8), size=(n, 3))


def test_recent_and_ewma() -> None:
    H = _histories(50, 0)
    np.testing.assert_allclose(B.recent(H), H[:, 2], atol=1e-15)
    e = B.ewma(H)
    np.testing.assert_allclose(e, 0.5 * H[:, 2] + 0.25 * H[:, 1] + 0.25 * H[:, 0], atol=1e-15)
    np.testing.assert_allclose(e.sum(axis=1), 1.0, atol=1e-15)


def test_holt_matches_statsmodels() -> None:
    from statsmodels.tsa.holtwinters import Holt

    H = _histories(25, 1)
    for alpha, beta in [(0.85, 0.6), (0.3, 0.0), (1.0, 1.0), (0.05, 0.95)]:
        ours = B.holt_raw(H, alpha, beta)
        for i in range(H.shape[0]):
            for d in range(8):
                series = H[i, :, d]
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    known = Holt(
                        series,
                        initialization_method="known",
                        initial_level=series[0],
                        initial_trend=series[1] - series[0],
                    ).fit(smoothing_level=alpha, smoothing_trend=beta, optimized=False)
                    legacy = Holt(series, initialization_method="legacy-heuristic").fit(
                        smoothing_level=alpha, smoothing_trend=beta, optimized=False
                    )
                assert ours[i, d] == pytest.approx(known.forecast(1)[0], abs=1e-12)
                assert ours[i, d] == pytest.approx(legacy.forecast(1)[0], abs=1e-12)


def test_arima110_matches_statsmodels() -> None:
    from statsmodels.tsa.arima.model import ARIMA

    H = _histories(12, 2)
    for phi in (-0.4, 0.3, -0.9):
        ours = H[:, 2] + phi * (H[:, 2] - H[:, 1])
        np.testing.assert_allclose(B.arima110(H, phi), B.clip_renormalise(ours, H[:, 2]), atol=1e-15)
        for i in range(H.shape[0]):
            for d in range(8):
                model = ARIMA(H[i, :, d], order=(1, 1, 0), trend="n")
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    res = model.filter(np.array([phi, 1.0]))  # ar.L1 = phi, sigma2 irrelevant
                assert ours[i, d] == pytest.approx(res.forecast(1)[0], abs=1e-12)


def _ridge_by_lstsq(H: np.ndarray, lam: float) -> np.ndarray:
    """Solve argmin Σ||x[t+1] - A x[t]||² + λ||A - I||² as one least-squares problem in vec(A)."""
    d = H.shape[1]
    eye = np.eye(d)
    rows, rhs = [], []
    for t in range(2):
        rows.append(np.kron(eye, H[t][None, :]))  # (A x_t)_i = Σ_j A_ij x_tj, vec(A) row-major
        rhs.append(H[t + 1])
    rows.append(np.sqrt(lam) * np.eye(d * d))
    rhs.append(np.sqrt(lam) * eye.ravel())
    vec, *_ = np.linalg.lstsq(np.vstack(rows), np.concatenate(rhs), rcond=None)
    return vec.reshape(d, d) @ H[2]


@pytest.mark.parametrize("lam", [0.01, 1.0, 133.352, 1000.0])
def test_ridge_var_matches_its_objective(lam: float) -> None:
    H = _histories(30, 3)
    ours = B.ridge_var_raw(H, lam)
    ref = np.array([_ridge_by_lstsq(H[i], lam) for i in range(H.shape[0])])
    np.testing.assert_allclose(ours, ref, atol=1e-10)
    # normal equations A (Σ x xᵀ + λI) = Σ x' xᵀ + λI, solved with np.linalg.solve
    for i in range(5):
        x0, x1, x2 = H[i]
        gram = np.outer(x0, x0) + np.outer(x1, x1) + lam * np.eye(8)
        cross = np.outer(x1, x0) + np.outer(x2, x1) + lam * np.eye(8)
        A = np.linalg.solve(gram.T, cross.T).T
        np.testing.assert_allclose(ours[i], A @ x2, atol=1e-12)


def test_ridge_var_large_lambda_tends_to_recent() -> None:
    H = _histories(10, 4)
    np.testing.assert_allclose(B.ridge_var(H, 1e9), H[:, 2], atol=1e-8)


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 2**32 - 1), st.floats(-2, 2), st.floats(0.01, 1), st.floats(0, 1))
def test_outputs_are_compositions(seed: int, phi: float, alpha: float, beta: float) -> None:
    rng = np.random.default_rng(seed)
    H = rng.dirichlet(np.full(8, 0.3), size=(20, 3))
    for pred in (B.arima110(H, phi), B.holt(H, alpha, beta), B.ridge_var(H, 1.0), B.ewma(H)):
        assert (pred >= 0).all()
        np.testing.assert_allclose(pred.sum(axis=1), 1.0, atol=1e-12)


def test_all_negative_after_clipping_falls_back_to_newest() -> None:
    H = np.zeros((1, 3, 8))
    H[0, 0, 0] = H[0, 1, 0] = 1.0  # mass on D0 then moving to D1 with a strong trend
    H[0, 2, 1] = 1.0
    out = B.clip_renormalise(np.full((1, 8), -1.0), H[:, 2])
    np.testing.assert_array_equal(out, H[:, 2])


def _episodes(n_fields: int, seed: int, dev_fields: int) -> pd.DataFrame:
    """Synthetic episodes with persistent shares plus a linear trend per field."""
    rng = np.random.default_rng(seed)
    rows = []
    for f in range(n_fields):
        base = rng.dirichlet(np.full(8, 1.0))
        drift = rng.normal(0, 0.02, 8)
        series = [np.clip(base + drift * t + rng.normal(0, 0.01, 8), 1e-4, None) for t in range(8)]
        series = [s / s.sum() for s in series]
        for k in range(5):
            hist = [series[k], series[k + 1], series[k + 2]]
            rows.append(
                {
                    "field_id": f"f{f:02d}",
                    "origin": f"o{k}",
                    "split": "dev" if f < dev_fields else "test",
                    "history": [h.tolist() for h in hist],
                    "x": hist[-1].tolist(),
                    "y": series[k + 3].tolist(),
                }
            )
    return pd.DataFrame(rows)


def test_tuning_reads_dev_only_and_picks_the_grid_optimum() -> None:
    spec = BenchmarkSpec().replace(holt_alpha_grid=(0.2, 0.5, 0.85), holt_beta_grid=(0.0, 0.3, 0.6))
    eps = _episodes(20, 5, dev_fields=8)
    tuned = B.tune_baselines(eps, spec)
    dev = eps[eps["split"] == "dev"]
    assert tuned["dev_n_episodes"] == len(dev) and tuned["dev_n_fields"] == 8
    H, Y, fids = B.history_array(dev), B.composition_array(dev, "y"), dev["field_id"].to_numpy()
    scores = {phi: field_macro(spearman(B.arima110(H, phi), Y), fids) for phi in spec.arima_phi_grid}
    best = max(scores.values())
    assert scores[tuned["arima_phi"]] == pytest.approx(best, abs=1e-12)
    assert tuned["dev_scores"]["arima"]["spearman"] == pytest.approx(best, abs=1e-12)
    assert tuned["var_lambda"] in spec.var_lambda_grid
    assert (tuned["holt_alpha"], tuned["holt_beta"]) in {(a, b) for a in (0.2, 0.5, 0.85) for b in (0.0, 0.3, 0.6)}
    # Test targets cannot influence the choice: scrambling them leaves the tuned values unchanged
    scrambled = eps.copy()
    test_rows = scrambled["split"] == "test"
    scrambled.loc[test_rows, "y"] = pd.Series([[0.125] * 8] * int(test_rows.sum()), index=scrambled.index[test_rows])
    again = B.tune_baselines(scrambled, spec)
    assert {k: again[k] for k in B.TUNED_KEYS} == {k: tuned[k] for k in B.TUNED_KEYS}


def test_exact_ties_fall_back_to_grid_order() -> None:
    # identical Spearman for every phi (a trend-free series): the earliest grid value must win
    H = np.repeat(_histories(6, 6)[:, 2:3], 3, axis=1)  # flat history: every phi forecasts x
    Y = _histories(6, 7)[:, 0]
    spec = BenchmarkSpec().replace(holt_alpha_grid=(0.5,), holt_beta_grid=(0.5,))
    tuned = B.tune_on_dev(H, Y, np.array([f"f{i}" for i in range(6)]), spec)
    assert tuned["arima_phi"] == spec.arima_phi_grid[0]


def test_baseline_forecasts_missing_windows_rule() -> None:
    spec = BenchmarkSpec()
    eps = _episodes(3, 8, dev_fields=1).iloc[:4].copy()
    hist = eps["history"].tolist()
    hist[0] = [None, hist[0][1], hist[0][2]]  # oldest missing -> filled by the middle window
    hist[1] = [hist[1][0], hist[1][1], None]  # newest missing -> filled by the middle window
    hist[2] = [None, None, None]  # nothing -> no forecast
    eps["history"] = hist
    out = B.baseline_forecasts(eps, spec)
    assert set(out) == set(B.BASELINE_NAMES)
    H = B.history_array(eps)
    np.testing.assert_allclose(out["recent"][0], H[0, 2])
    np.testing.assert_allclose(out["recent"][1], H[1, 1])
    np.testing.assert_allclose(out["ewma"][0], 0.5 * H[0, 2] + 0.5 * H[0, 1])
    assert np.isnan(out["ewma"][2]).all()
    np.testing.assert_allclose(out["ewma"][3], B.ewma(H[3:4])[0])
    np.testing.assert_allclose(out["arima"][3], B.arima110(H[3:4], spec.arima_phi)[0])
    tuned = {"arima_phi": 0.5}
    np.testing.assert_allclose(B.baseline_forecasts(eps, spec, tuned)["arima"][3], B.arima110(H[3:4], 0.5)[0])


def test_on_mini_ewma_beats_random_and_stays_under_the_ceiling(mini) -> None:
    """End to end on the embedded instance: Dev-only tuning, baselines, block-bootstrap contrast
    against a uniform-random forecaster, and the split-half reliability ceiling above EWMA."""
    from rap_benchmark.evaluation.scoring.bootstrap import block_bootstrap, paired_contrast
    from rap_benchmark.evaluation.scoring.reliability import reliability

    spec = mini.spec
    eps = mini.episodes[mini.episodes["policy"] == "canonical"].reset_index(drop=True)
    tuned = B.tune_baselines(eps, spec)
    assert tuned["arima_phi"] in spec.arima_phi_grid and tuned["var_lambda"] in spec.var_lambda_grid
    preds = B.baseline_forecasts(eps, spec, tuned)
    Y = B.composition_array(eps, "y")
    test = (eps["split"] == "test").to_numpy()
    fields, origins = eps["field_id"].to_numpy()[test], eps["origin"].to_numpy()[test]
    blocks = dict(zip(mini.blocks["field_id"], mini.blocks["block_id"], strict=True))
    rng = np.random.default_rng(0)
    random_rho = spearman(rng.dirichlet(np.ones(8), size=len(eps)), Y)[test]
    ewma_rho = spearman(preds["ewma"], Y)[test]
    contrast = paired_contrast(
        ewma_rho, fields, origins, random_rho, fields, origins,
        block_of_field=blocks, n_resamples=spec.bootstrap_resamples, seed=spec.bootstrap_seed,
    )  # fmt: skip
    assert contrast.lo > 0
    ewma_iv = block_bootstrap(ewma_rho, fields, blocks, n_resamples=spec.bootstrap_resamples, seed=spec.bootstrap_seed)
    ceiling = reliability(mini, split="test", n_splits=spec.reliability_splits, progress=False).ceiling
    assert ewma_iv.estimate < ceiling <= 1
