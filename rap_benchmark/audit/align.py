"""Hungarian alignment of a second instrument's directions to the frozen ones.

A second, independently drafted instrument labels the same memberships with its own direction
slots, in an arbitrary order. Per field, the slot-to-direction map that maximises agreement is
fitted with the Hungarian algorithm on a fitting subset (half of the pre-cutoff papers), and
agreement is then scored only on the other papers (cross-fit, out of sample).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np
from scipy.optimize import linear_sum_assignment

from rap_benchmark.core.records import N_DIRECTIONS
from rap_benchmark.pipeline.policies import direction_index

__all__ = ["CrossFitResult", "contingency", "cross_fit", "direction_index", "fit_half", "hungarian_map"]


def contingency(a: np.ndarray, b: np.ndarray, n: int = N_DIRECTIONS) -> np.ndarray:
    """Counts of (a == i, b == j) over items where both are directions (0..n-1)."""
    ok = (a >= 0) & (b >= 0)
    return np.bincount(a[ok] * n + b[ok], minlength=n * n).reshape(n, n).astype(np.float64)


def hungarian_map(frozen: np.ndarray, second: np.ndarray, n: int = N_DIRECTIONS) -> np.ndarray:
    """``m`` such that second-instrument slot ``j`` maps to frozen direction ``m[j]``.

    Maximises the number of agreeing items; ties are broken deterministically by scipy's
    implementation on the fixed matrix order.
    """
    table = contingency(second, frozen, n)  # rows: second slots, cols: frozen directions
    rows, cols = linear_sum_assignment(table, maximize=True)
    mapping = np.empty(n, dtype=np.int64)
    mapping[rows] = cols
    return mapping


def fit_half(arxiv_ids: np.ndarray, salt: str = "rap-crossfit") -> np.ndarray:
    """Deterministic half split by a hash of the id (True = fitting half)."""
    return np.fromiter(
        (hashlib.sha256(f"{salt}:{a}".encode()).digest()[0] & 1 == 0 for a in arxiv_ids),
        dtype=bool,
        count=len(arxiv_ids),
    )


@dataclass(frozen=True)
class CrossFitResult:
    mapping: np.ndarray  # second slot -> frozen direction
    agree: np.ndarray  # per item: 1.0/0.0 agreement out of sample, NaN for fitting items or non-directions
    n_fit: int


def cross_fit(frozen: np.ndarray, second: np.ndarray, fit_mask: np.ndarray) -> CrossFitResult:
    """Fit the Hungarian map on ``fit_mask`` items and score agreement on the rest."""
    mapping = hungarian_map(frozen[fit_mask], second[fit_mask])
    agree = np.full(len(frozen), np.nan)
    score = ~fit_mask & (frozen >= 0) & (second >= 0)
    agree[score] = (mapping[second[score]] == frozen[score]).astype(np.float64)
    return CrossFitResult(mapping=mapping, agree=agree, n_fit=int(fit_mask.sum()))
