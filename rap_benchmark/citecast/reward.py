"""The CiteCast reward: r = 1 / cosh(2 |ln((p + 1) / (t + 1))|).

Symmetric in log space (overshooting by 2x costs what undershooting by 2x costs): 1.0 at an exact
hit, ~0.74 at 1.5x error, ~0.47 at 2x, ~0.22 at 3x, ~0.02 at 10x (on the +1-shifted counts).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from rap_benchmark.core.records import is_count

MAX_PREDICTION = 10**9  # far above any citation count; 10**400 is refused instead of overflowing


class PredictionError(ValueError):
    """A prediction that is not an integer in ``[0, MAX_PREDICTION]``."""


def validate_prediction(value: Any) -> int:
    """Return ``value`` as an int, or raise :class:`PredictionError` saying why it is refused.

    Accepted: an int in ``[0, MAX_PREDICTION]``, or an integral float in that range (``12.0``, as
    some models' JSON has it); booleans, fractions, NaN and strings are refused.
    """
    if isinstance(value, bool):
        raise PredictionError(f"prediction must be a nonnegative integer, got the boolean {value!r}")
    if isinstance(value, int):
        n = value
    elif isinstance(value, float):
        if not math.isfinite(value) or value != math.floor(value):
            raise PredictionError(f"prediction must be a nonnegative integer, got {value!r}")
        n = int(value)
    else:
        raise PredictionError(f"prediction must be a nonnegative integer, got {type(value).__name__} {value!r}")
    if n < 0:
        raise PredictionError(f"prediction must be a nonnegative integer, got {n}")
    if n > MAX_PREDICTION:
        raise PredictionError(f"prediction must be at most {MAX_PREDICTION:,} (got a {n.bit_length()}-bit integer)")
    return n


def log_error(prediction: np.ndarray | float, target: np.ndarray | float) -> np.ndarray:
    """|ln((p + 1) / (t + 1))|, elementwise, float64."""
    p = np.asarray(prediction, dtype=np.float64)
    t = np.asarray(target, dtype=np.float64)
    return np.abs(np.log1p(p) - np.log1p(t))


def rewards(predictions: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """Vectorised reward for arrays (broadcasting) of nonnegative predictions and targets."""
    d = 2.0 * log_error(predictions, targets)
    # 1/cosh(d) = 2 e^-d / (1 + e^-2d): finite for any d >= 0 (no overflow of cosh).
    e = np.exp(-d)
    return 2.0 * e / (1.0 + e * e)


def reward(prediction: Any, target: int) -> float:
    """The reward of one validated integer prediction against the true count ``target``."""
    p = validate_prediction(prediction)
    if not is_count(int(target) if isinstance(target, np.integer) else target):  # numpy: a count read from a table
        raise ValueError(f"target must be a nonnegative int, got {target!r}")
    return float(rewards(np.float64(p), np.float64(target)))
