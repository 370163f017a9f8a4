"""The paper's statistical baselines, vectorised over episodes, with Dev-only tuning.

Every baseline sees exactly the three six-month history compositions before T, as an array
``H`` of shape ``(n, 3, 8)`` ordered oldest, middle, newest (``H[:, 2]`` is x). Outputs have shape
``(n, 8)``, are clipped at 0 and renormalised to sum 1. When clipping leaves a row all zero the
forecast falls back to the newest history vector (Recent), which is itself a composition.

- Recent: the newest vector.
- EWMA: weights newest to oldest (default 0.50/0.25/0.25).
- ARIMA(1,1,0) per direction, no constant: x[t+1] = x[t] + phi (x[t] - x[t-1]). This is the
  one-step forecast of ``statsmodels`` ``ARIMA(order=(1,1,0), trend="n")`` with ``ar.L1 = phi``.
- Holt additive: l[0] = x_oldest, b[0] = x_middle - x_oldest, then for each of the three
  observations l[t] = alpha x[t] + (1 - alpha)(l[t-1] + b[t-1]),
  b[t] = beta (l[t] - l[t-1]) + (1 - beta) b[t-1]; forecast l[3] + b[3]. This is exactly
  ``statsmodels`` ``Holt(x, initialization_method="known", initial_level=x[0],
  initial_trend=x[1] - x[0])`` (and its ``"legacy-heuristic"`` initialisation) fitted with
  ``optimized=False`` at the same smoothing parameters.
- Ridge VAR(1) toward identity: A = argmin Σ_t ||x[t+1] - A x[t]||² + lambda ||A - I||²_F over the
  two transitions, i.e. A = (Σ x[t+1] x[t]ᵀ + lambda I)(Σ x[t] x[t]ᵀ + lambda I)^-1; forecast A x.

Missing history windows (a window with no counted paper has no composition): a missing window is
replaced by the nearest available *newer* window, and a missing newest window by the nearest
available older one (the series is treated as flat where it is unobserved). An episode whose
three windows are all missing has no baseline forecast (NaN row, scored as invalid).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray

from rap_benchmark.core.records import DIRECTION_KEYS, N_DIRECTIONS, Condition, Policy, Split, parse_enum
from rap_benchmark.core.schemas import PREDICTION_KEY
from rap_benchmark.core.spec import BenchmarkSpec
from rap_benchmark.evaluation.scoring.aggregate import field_macro
from rap_benchmark.evaluation.scoring.metrics import centred_cosine, spearman

if TYPE_CHECKING:
    from rap_benchmark.core.artifacts import Instance

Array = NDArray[np.float64]

BASELINE_NAMES: Final[tuple[str, ...]] = ("recent", "ewma", "arima", "holt", "ridge_var")
"""The baselines produced by ``baseline_forecasts``, in reporting order."""

TUNED_KEYS: Final[tuple[str, ...]] = ("arima_phi", "holt_alpha", "holt_beta", "var_lambda")

_TIE_TOL = 1e-12


def _history(H: ArrayLike) -> Array:
    arr = np.asarray(H, dtype=np.float64)
    if arr.ndim != 3 or arr.shape[1] != 3 or arr.shape[2] != N_DIRECTIONS:
        raise ValueError(f"history must have shape (n, 3, {N_DIRECTIONS}), got {arr.shape}")
    return arr


def clip_renormalise(forecast: ArrayLike, newest: ArrayLike) -> Array:
    """Clip at 0 and renormalise each row; an all-zero row falls back to ``newest``."""
    f = np.maximum(np.asarray(forecast, dtype=np.float64), 0.0)
    total = f.sum(axis=1, keepdims=True)
    ok = total > 0
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(ok, f / np.where(ok, total, 1.0), np.asarray(newest, dtype=np.float64))


def recent(H: ArrayLike) -> Array:
    """Recent: the newest history vector."""
    h = _history(H)
    return clip_renormalise(h[:, 2], h[:, 2])


def ewma(H: ArrayLike, weights: Sequence[float] = (0.5, 0.25, 0.25)) -> Array:
    """EWMA with fixed effective weights, newest to oldest."""
    h = _history(H)
    if len(weights) != 3:
        raise ValueError("ewma needs three weights (newest, middle, oldest)")
    w_new, w_mid, w_old = (float(w) for w in weights)
    return clip_renormalise(w_new * h[:, 2] + w_mid * h[:, 1] + w_old * h[:, 0], h[:, 2])


def arima110(H: ArrayLike, phi: float) -> Array:
    """ARIMA(1,1,0) without constant, per direction: x + phi (x - x_prev)."""
    h = _history(H)
    return clip_renormalise(h[:, 2] + phi * (h[:, 2] - h[:, 1]), h[:, 2])


def holt_raw(H: ArrayLike, alpha: float, beta: float) -> Array:
    """Additive Holt one-step forecast before clipping (see the module docstring)."""
    h = _history(H)
    level = h[:, 0].copy()
    trend = h[:, 1] - h[:, 0]
    for t in range(3):
        new_level = alpha * h[:, t] + (1 - alpha) * (level + trend)
        trend = beta * (new_level - level) + (1 - beta) * trend
        level = new_level
    return level + trend


def holt(H: ArrayLike, alpha: float, beta: float) -> Array:
    """Additive Holt exponential smoothing, clipped and renormalised."""
    h = _history(H)
    return clip_renormalise(holt_raw(h, alpha, beta), h[:, 2])


def ridge_var_raw(H: ArrayLike, lam: float) -> Array:
    """Ridge VAR(1) toward identity, one-step forecast A x_newest before clipping."""
    h = _history(H)
    if not lam > 0:
        raise ValueError(f"ridge_var needs lambda > 0, got {lam}")
    x0, x1, x2 = h[:, 0], h[:, 1], h[:, 2]
    eye = np.eye(N_DIRECTIONS)
    cross = x1[:, :, None] * x0[:, None, :] + x2[:, :, None] * x1[:, None, :] + lam * eye  # Σ x[t+1]x[t]ᵀ + λI
    gram = x0[:, :, None] * x0[:, None, :] + x1[:, :, None] * x1[:, None, :] + lam * eye  # Σ x[t]x[t]ᵀ + λI
    # A x2 = cross @ gram^-1 @ x2 = cross @ z with gram z = x2 (gram is symmetric positive definite)
    z = np.linalg.solve(gram, x2[:, :, None])
    return (cross @ z)[:, :, 0]


def ridge_var(H: ArrayLike, lam: float) -> Array:
    """Ridge VAR(1) shrunk toward the identity, clipped and renormalised."""
    h = _history(H)
    return clip_renormalise(ridge_var_raw(h, lam), h[:, 2])


def _forecasters(params: Mapping[str, Any]) -> dict[str, Callable[[Array], Array]]:
    return {
        "recent": recent,
        "ewma": lambda h: ewma(h, params["ewma_weights"]),
        "arima": lambda h: arima110(h, params["arima_phi"]),
        "holt": lambda h: holt(h, params["holt_alpha"], params["holt_beta"]),
        "ridge_var": lambda h: ridge_var(h, params["var_lambda"]),
    }


# -- episodes tables --------------------------------------------------------------------------


def history_array(episodes: pd.DataFrame) -> Array:
    """The ``history`` column as an ``(n, 3, 8)`` array, NaN rows for missing windows."""
    n = len(episodes)
    out = np.full((n, 3, N_DIRECTIONS), np.nan)
    for i, hist in enumerate(episodes["history"].tolist()):
        if hist is None:
            continue
        if len(hist) != 3:
            raise ValueError(f"episode row {i}: history must hold 3 windows, got {len(hist)}")
        for j, window in enumerate(hist):
            if window is not None:
                out[i, j] = np.asarray(window, dtype=np.float64)
    return out


def composition_array(episodes: pd.DataFrame, column: str) -> Array:
    """A composition column (``x`` or ``y``) as an ``(n, 8)`` array, NaN rows where null."""
    out = np.full((len(episodes), N_DIRECTIONS), np.nan)
    for i, value in enumerate(episodes[column].tolist()):
        if value is not None:
            out[i] = np.asarray(value, dtype=np.float64)
    return out


def fill_history(H: ArrayLike) -> tuple[Array, NDArray[np.bool_]]:
    """Apply the missing-window rule; return (filled history, rows with a forecast)."""
    h = _history(H).copy()
    present = np.isfinite(h).all(axis=2)  # (n, 3)
    # older windows take the nearest newer available window
    for j in (1, 0):
        take = ~present[:, j] & present[:, j + 1]
        h[take, j] = h[take, j + 1]
        present[take, j] = True
    # a missing newest (or middle) window takes the nearest older available one
    for j in (1, 2):
        take = ~present[:, j] & present[:, j - 1]
        h[take, j] = h[take, j - 1]
        present[take, j] = True
    ok = present.all(axis=1)
    h[~ok] = np.nan
    return h, ok


def _params(spec: BenchmarkSpec, tuned: Mapping[str, Any] | None) -> dict[str, Any]:
    params: dict[str, Any] = {key: getattr(spec, key) for key in TUNED_KEYS}
    params.update((key, float(value)) for key, value in (tuned or {}).items() if key in TUNED_KEYS)
    return {"ewma_weights": tuple(spec.ewma_weights), **params}


def baseline_forecasts(
    episodes: pd.DataFrame, spec: BenchmarkSpec, tuned: Mapping[str, Any] | None = None
) -> dict[str, Array]:
    """Every baseline's ``(n, 8)`` forecasts for the rows of an episodes table (one policy).

    Parameters are ``tuned`` values where given (see ``tune_on_dev``), else the spec's. Rows whose
    history is entirely missing are NaN in every baseline.
    """
    filled, ok = fill_history(history_array(episodes))
    out: dict[str, Array] = {}
    for name, fn in _forecasters(_params(spec, tuned)).items():
        pred = np.full((len(episodes), N_DIRECTIONS), np.nan)
        if ok.any():
            pred[ok] = fn(filled[ok])
        out[name] = pred
    return out


# -- Dev-only tuning --------------------------------------------------------------------------


def _select(candidates: list[tuple[Any, Array]], Y: Array, field_ids: NDArray[np.str_]) -> tuple[Any, float, float]:
    """Best candidate by field-macro Spearman, centred-cosine tie-break, then grid order."""
    best: tuple[Any, float, float] | None = None
    for value, pred in candidates:
        rho = field_macro(spearman(pred, Y), field_ids)
        cc = field_macro(centred_cosine(pred, Y), field_ids)
        if best is None or rho > best[1] + _TIE_TOL or (abs(rho - best[1]) <= _TIE_TOL and cc > best[2] + _TIE_TOL):
            best = (value, rho, cc)
    assert best is not None
    return best


def tune_on_dev(H: ArrayLike, Y: ArrayLike, field_ids: ArrayLike, spec: BenchmarkSpec) -> dict[str, Any]:
    """Grid-search ARIMA phi, Holt (alpha, beta) and ridge-VAR lambda on Dev episodes.

    The caller passes Dev episodes only (``tune_baselines`` does the filtering). The objective is
    field-macro Forecast Spearman against Y, centred cosine breaks ties (within 1e-12), then the
    earlier grid value wins. Returns plain JSON-ready values for the ledger's ``derived`` block:
    ``arima_phi``, ``holt_alpha``, ``holt_beta``, ``var_lambda``, the Dev scores of each choice
    and the grids searched.
    """
    h, ok = fill_history(H)
    y = np.asarray(Y, dtype=np.float64)
    fids = np.asarray(field_ids).astype(str)
    keep = ok & np.isfinite(y).all(axis=1)
    h, y, fids = h[keep], y[keep], fids[keep]
    if not keep.any():
        raise ValueError("no Dev episode has both a history and a target")
    best = {
        "arima": _select([(float(v), arima110(h, v)) for v in spec.arima_phi_grid], y, fids),
        "holt": _select(
            [((float(a), float(b)), holt(h, a, b)) for a in spec.holt_alpha_grid for b in spec.holt_beta_grid], y, fids
        ),
        "ridge_var": _select([(float(v), ridge_var(h, v)) for v in spec.var_lambda_grid], y, fids),
    }
    alpha, beta = best["holt"][0]
    return {
        "arima_phi": best["arima"][0],
        "holt_alpha": alpha,
        "holt_beta": beta,
        "var_lambda": best["ridge_var"][0],
        "dev_scores": {name: {"spearman": rho, "centred_cosine": cc} for name, (_, rho, cc) in best.items()},
        "dev_n_episodes": int(keep.sum()),
        "dev_n_fields": int(np.unique(fids).size),
        "grids": {key: list(getattr(spec, f"{key}_grid")) for key in TUNED_KEYS},
        "objective": "field-macro Forecast Spearman on Dev; centred cosine tie-break",
    }


def tune_baselines(episodes: pd.DataFrame, spec: BenchmarkSpec) -> dict[str, Any]:
    """``tune_on_dev`` on the Dev rows of an episodes table (one policy); Test rows are never read."""
    dev = episodes[episodes["split"].astype(str) == Split.DEV.value]
    if dev.empty:
        raise ValueError("the episodes table has no Dev rows to tune on")
    return tune_on_dev(history_array(dev), composition_array(dev, "y"), dev["field_id"].to_numpy(), spec)


BASELINE_PREFIX = "baseline/"
UNIFORM_RANDOM = "uniform_random"


def baseline_predictions(
    inst: Instance,
    *,
    tune_dev: bool = False,
    seed: int | None = None,
    policy: Policy = Policy.CANONICAL,
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """The paper's statistical baselines as an ordinary prediction frame, plus their ledger.

    Models ``baseline/recent``, ``baseline/ewma``, ``baseline/arima``, ``baseline/holt``,
    ``baseline/ridge_var`` and ``baseline/uniform_random`` (weights drawn uniformly on the
    simplex, Dirichlet(1), from ``seed``; the spec's ``seed`` by default), all under condition A0
    so they join the leaderboard, one row per episode of ``policy`` (all splits). With
    ``tune_dev`` the ARIMA, Holt and ridge-VAR parameters are tuned on Dev episodes only; the
    ledger records the values used, the grids and the Dev scores.
    """
    spec = inst.spec
    eps = inst.episodes[inst.episodes["policy"].astype(str) == parse_enum(Policy, policy).value]
    eps = eps.sort_values(["field_id", "origin"], kind="stable").reset_index(drop=True)
    tuned = tune_baselines(eps, spec) if tune_dev else None
    forecasts = baseline_forecasts(eps, spec, tuned)
    seed_ = int(spec.seed if seed is None else seed)
    forecasts[UNIFORM_RANDOM] = np.random.default_rng(seed_).dirichlet(np.ones(N_DIRECTIONS), size=len(eps))
    names = (*BASELINE_NAMES, UNIFORM_RANDOM)
    frames = []
    for name in names:
        w = forecasts[name]
        ok = np.isfinite(w).all(axis=1)
        frames.append(
            pd.DataFrame(
                {
                    "model": BASELINE_PREFIX + name,
                    "condition": Condition.A0.value,
                    "field_id": eps["field_id"].astype(str).to_numpy(),
                    "origin": eps["origin"].astype(str).str[:10].to_numpy(),
                    **{key: np.where(ok, w[:, j], np.nan) for j, key in enumerate(DIRECTION_KEYS)},
                    "valid": ok,
                    "invalid_reason": np.where(ok, None, "no history window has a counted paper"),
                    "manifest_hash": inst.manifest_hash,
                }
            )
        )
    frame = pd.concat(frames, ignore_index=True).sort_values(list(PREDICTION_KEY), kind="stable")
    used = {k: getattr(spec, k) if tuned is None else tuned[k] for k in TUNED_KEYS}
    ledger: dict[str, Any] = {
        "manifest_hash": inst.manifest_hash,
        "benchmark_version": spec.version,
        "policy": policy,
        "condition": Condition.A0.value,
        "models": [BASELINE_PREFIX + n for n in names],
        "parameters": {"ewma_weights": list(spec.ewma_weights), **used},
        "tuned_on_dev": tune_dev,
        "tuning": tuned,
        "uniform_random": {"distribution": "Dirichlet(1, ..., 1)", "seed": seed_},
    }
    return frame.reset_index(drop=True), ledger
