"""Field-resampled intervals for audit statistics (rows of one field are not independent)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

__all__ = ["Estimate", "field_bootstrap", "field_resampled", "finite_mean"]


def finite_mean(z: np.ndarray) -> float:
    """Mean of the finite entries (NaN when there are none)."""
    return float(np.nanmean(z)) if np.isfinite(z).any() else float("nan")


@dataclass(frozen=True)
class Estimate:
    """A statistic on all rows and its 95% percentile interval; ``n`` rows."""

    estimate: float
    lo: float
    hi: float
    n: int


def _check_resamples(n_resamples: int) -> None:
    if n_resamples < 1:
        raise ValueError("n_resamples must be >= 1")


def _percentile_interval(boot: np.ndarray) -> tuple[float, float]:
    """The 95% percentile interval of the finite bootstrap statistics (NaN, NaN when none is)."""
    boot = boot[np.isfinite(boot)]
    if not boot.size:
        return float("nan"), float("nan")
    lo, hi = np.percentile(boot, [2.5, 97.5])
    return float(lo), float(hi)


def field_bootstrap(
    fields: np.ndarray, stats: dict[str, Callable[[np.ndarray], float]], *, n_resamples: int, seed: int
) -> dict[str, Estimate]:
    """Each statistic (a function of row positions) on all rows, with a 95% percentile interval
    from resampling whole fields with replacement (rows of one field are not independent)."""
    _check_resamples(n_resamples)
    uniq = np.unique(fields)
    by_field = [np.flatnonzero(fields == f) for f in uniq]
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, len(uniq), size=(n_resamples, len(uniq)))
    out: dict[str, Estimate] = {}
    everything = np.arange(len(fields))
    for name, fn in stats.items():
        boot = np.array([fn(np.concatenate([by_field[j] for j in row])) for row in draws]) if len(uniq) else []
        out[name] = Estimate(fn(everything), *_percentile_interval(np.asarray(boot, dtype=float)), len(fields))
    return out


def field_resampled(values: np.ndarray, *, n_resamples: int, seed: int) -> Estimate:
    """The mean of per-field ``values`` (finite ones) with a field-resampled 95% percentile
    interval: :func:`field_bootstrap` with one row per field, drawn as one array."""
    _check_resamples(n_resamples)
    values = values[np.isfinite(values)]
    if values.size == 0:
        return Estimate(float("nan"), float("nan"), float("nan"), 0)
    rng = np.random.default_rng(seed)
    stats = values[rng.integers(0, values.size, size=(n_resamples, values.size))].mean(axis=1)
    return Estimate(float(values.mean()), *_percentile_interval(stats), values.size)
