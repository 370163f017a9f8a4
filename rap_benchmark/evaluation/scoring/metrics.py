"""The paper's episode metrics, vectorised over rows.

Every function takes arrays of shape ``(n, 8)`` (one row per episode; a single 8-vector is
accepted and treated as one row) in float64 and returns shape ``(n,)``. There are no per-row
Python loops: ranks come from one row-wise ``scipy.stats.rankdata``, correlations from row sums.

Conventions (the paper's reporting layer):

- ranks are average ranks (ties share the mean of their positions), 1-based;
- a row containing NaN (an invalid or missing composition) scores NaN in every metric;
- ``spearman(p, y)``: a *constant* (e.g. uniform) prediction ``p`` scores 0.0 (it carries no
  ordering), a constant target ``y`` makes the score undefined (NaN, reported, not coerced);
  the target rule wins when both are constant;
- ``rank_correlation(a, b)`` is the symmetric version: NaN whenever either side is constant
  (used where neither side is a model output, e.g. truth stability and reliability);
- ``centred_cosine(p, y)`` follows the same rule as ``spearman``: constant ``p`` -> 0.0,
  constant ``y`` -> NaN. Constancy is tested exactly (``max == min``), never through a norm
  that rounding can make tiny but nonzero.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numpy.typing import ArrayLike, NDArray

Array = NDArray[np.float64]


def _rows(a: ArrayLike) -> Array:
    arr = np.asarray(a, dtype=np.float64)
    if arr.ndim == 1:
        arr = arr[None, :]
    if arr.ndim != 2:
        raise ValueError(f"expected shape (n, d) or (d,), got {arr.shape}")
    return arr


def _pair(a: ArrayLike, b: ArrayLike) -> tuple[Array, Array]:
    a2, b2 = _rows(a), _rows(b)
    if a2.shape != b2.shape:
        raise ValueError(f"shape mismatch: {a2.shape} vs {b2.shape}")
    return a2, b2


def rankdata_rows(a: ArrayLike) -> Array:
    """Average ranks (1-based) along each row, as ``scipy.stats.rankdata``; rows containing NaN or
    an infinity get NaN ranks."""
    from scipy.stats import rankdata

    arr = _rows(a)
    ranks = rankdata(arr, method="average", axis=1)
    ranks[~np.isfinite(arr).all(axis=1)] = np.nan
    return ranks


def _constant(arr: Array) -> NDArray[np.bool_]:
    return arr.max(axis=1) == arr.min(axis=1)


def _centred_corr(a: Array, b: Array) -> Array:
    """Pearson correlation per row; NaN where either side has zero spread."""
    ac = a - a.mean(axis=1, keepdims=True)
    bc = b - b.mean(axis=1, keepdims=True)
    num = (ac * bc).sum(axis=1)
    den = np.sqrt((ac * ac).sum(axis=1) * (bc * bc).sum(axis=1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return num / den


def _constant_rule(a: Array, b: Array, a_constant_value: float) -> Callable[[Array], Array]:
    """The conventions above for rows (a, b), masks computed once: constant ``a`` scores
    ``a_constant_value``; constant ``b`` or a non-finite row scores NaN; values clip to [-1, 1]."""
    const_a = _constant(a)
    undefined = _constant(b) | ~(np.isfinite(a).all(axis=1) & np.isfinite(b).all(axis=1))

    def rule(values: Array) -> Array:
        return np.clip(np.where(undefined, np.nan, np.where(const_a, a_constant_value, values)), -1.0, 1.0)

    return rule


def rank_correlation(a: ArrayLike, b: ArrayLike) -> Array:
    """Spearman per row, symmetric: NaN whenever either row is constant or non-finite."""
    a2, b2 = _pair(a, b)
    return _constant_rule(a2, b2, np.nan)(_centred_corr(rankdata_rows(a2), rankdata_rows(b2)))


def spearman(p: ArrayLike, y: ArrayLike) -> Array:
    """rho(p, y) = corr(rank(p), rank(y)) per row; constant p -> 0.0, constant y -> NaN."""
    p2, y2 = _pair(p, y)
    return _constant_rule(p2, y2, 0.0)(_centred_corr(rankdata_rows(p2), rankdata_rows(y2)))


def centred_cosine(a: ArrayLike, b: ArrayLike) -> Array:
    """(a - mean a)ᵀ(b - mean b) / (||a - mean a|| ||b - mean b||) per row.

    Constant ``a`` -> 0.0 (no direction), constant ``b`` -> NaN (undefined).
    """
    a2, b2 = _pair(a, b)
    return _constant_rule(a2, b2, 0.0)(_centred_corr(a2, b2))


def tv(p: ArrayLike, y: ArrayLike) -> Array:
    """Total variation distance ½ Σ_d |p_d - y_d| per row."""
    p2, y2 = _pair(p, y)
    return 0.5 * np.abs(p2 - y2).sum(axis=1)


def jsd(p: ArrayLike, y: ArrayLike) -> Array:
    """Jensen-Shannon divergence, natural log, no smoothing: ½KL(p||m) + ½KL(y||m), m = (p+y)/2.

    KL(a||b) sums over the directions with a_d > 0 (``scipy.special.rel_entr`` gives
    a_d ln(a_d / m_d), and 0 where a_d = 0). Inputs are normalised compositions.
    Equals ``scipy.spatial.distance.jensenshannon(p, y) ** 2``.
    """
    from scipy.special import rel_entr

    p2, y2 = _pair(p, y)
    m = 0.5 * (p2 + y2)
    out = 0.5 * rel_entr(p2, m).sum(axis=1) + 0.5 * rel_entr(y2, m).sum(axis=1)
    finite = np.isfinite(p2).all(axis=1) & np.isfinite(y2).all(axis=1)
    return np.where(finite, np.maximum(out, 0.0), np.nan)


DIFF_SNAP = 1e-12
"""Differences of compositions smaller than this are renormalisation rounding, not signal."""


def _snap(d: Array) -> Array:
    """Zero out rounding-level differences so that their ranks are ties, not noise."""
    return np.where(np.abs(d) <= DIFF_SNAP, 0.0, d)


def residual_spearman(p: ArrayLike, y: ArrayLike, e: ArrayLike) -> Array:
    """Residual association beyond a reference forecast e (EWMA): rho(p - e, y - e).

    A prediction equal to e up to rounding has a constant (zero) residual and scores 0.
    """
    p2, y2 = _pair(p, y)
    e2, _ = _pair(e, y2)
    return spearman(_snap(p2 - e2), _snap(y2 - e2))


def revision_alignment(p_t: ArrayLike, p_th: ArrayLike, y_t: ArrayLike, y_th: ArrayLike) -> Array:
    """Rolling revision alignment (adaptivity): rho(p[T+h] - p[T], y[T+h] - y[T])."""
    pt, pth = _pair(p_t, p_th)
    yt, yth = _pair(y_t, y_th)
    return spearman(_snap(pth - pt), _snap(yth - yt))


def revision_alignment_cc(p_t: ArrayLike, p_th: ArrayLike, y_t: ArrayLike, y_th: ArrayLike) -> Array:
    """Centred-cosine sensitivity of revision alignment."""
    pt, pth = _pair(p_t, p_th)
    yt, yth = _pair(y_t, y_th)
    return centred_cosine(pth - pt, yth - yt)


def pred_recent(p: ArrayLike, x: ArrayLike) -> Array:
    """Pred-Recent: rho(p, x)."""
    return spearman(p, x)


def prediction_stability(p_t: ArrayLike, p_th: ArrayLike) -> Array:
    """Prediction stability: rho(p[T+h], p[T])."""
    return spearman(p_th, p_t)


def truth_stability(y_t: ArrayLike, y_th: ArrayLike) -> Array:
    """Truth stability: rho(y[T+h], y[T]) (symmetric; NaN when either is constant)."""
    return rank_correlation(y_th, y_t)


def episode_scores(p: ArrayLike, y: ArrayLike) -> dict[str, Array]:
    """The four per-episode scores: spearman, centred_cosine, tv, jsd (NaN for invalid rows).

    Same values as calling ``spearman``, ``centred_cosine``, ``tv`` and ``jsd`` one by one; the
    masks (finite rows, constant rows) are computed once.
    """
    p2, y2 = _pair(p, y)
    rule = _constant_rule(p2, y2, 0.0)
    return {
        "spearman": rule(_centred_corr(rankdata_rows(p2), rankdata_rows(y2))),
        "centred_cosine": rule(_centred_corr(p2, y2)),
        "tv": tv(p2, y2),
        "jsd": jsd(p2, y2),
    }


def change_rich_mask(x: ArrayLike, y: ArrayLike, quantile: float = 0.25) -> NDArray[np.bool_]:
    """Change-rich episodes, chosen from truth and baselines only (never model outputs).

    ``x`` is a baseline forecast (the Recent window by default, or EWMA) and ``y`` the truth; an
    episode is change-rich when rho(x, y) is at or below the ``quantile`` of rho over the
    episodes where it is defined. Undefined rows are never change-rich.
    """
    if not 0 < quantile < 1:
        raise ValueError(f"quantile must be in (0, 1), got {quantile}")
    rho = rank_correlation(x, y)
    ok = np.isfinite(rho)
    if not ok.any():
        return np.zeros(rho.shape, dtype=bool)
    cut = np.quantile(rho[ok], quantile)
    return ok & (rho <= cut)
