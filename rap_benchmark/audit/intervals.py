"""Field-resampled intervals for audit statistics (rows of one field are not independent)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

__all__ = ["Estimate", "field_bootstrap", "finite_mean"]


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


def field_bootstrap(
    fields: np.ndarray, stats: dict[str, Callable[[np.ndarray], float]], *, n_resamples: int, seed: int
) -> dict[str, Estimate]:
    """Each statistic (a function of row positions) on all rows, with a 95% percentile interval
    from resampling whole fields with replacement (rows of one field are not independent)."""
    if n_resamples < 1:
        raise ValueError("n_resamples must be >= 1")
    uniq = np.unique(fields)
    by_field = [np.flatnonzero(fields == f) for f in uniq]
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, len(uniq), size=(n_resamples, len(uniq)))
    out: dict[str, Estimate] = {}
    everything = np.arange(len(fields))
    for name, fn in stats.items():
        boot = np.array([fn(np.concatenate([by_field[j] for j in row])) for row in draws]) if len(uniq) else []
        boot = np.asarray(boot, dtype=float)
        boot = boot[np.isfinite(boot)]
        lo, hi = np.percentile(boot, [2.5, 97.5]) if boot.size else (np.nan, np.nan)
        out[name] = Estimate(fn(everything), float(lo), float(hi), len(fields))
    return out
