"""The CiteCast reward against the card's numbers and its invariants."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rap_benchmark.citecast.reward import PredictionError, reward, rewards, validate_prediction


@pytest.mark.parametrize(
    ("factor", "card"),
    [(1.0, 1.0), (1.5, 0.75), (2.0, 0.47), (3.0, 0.22), (10.0, 0.02)],
)
def test_card_values_at_multiplicative_errors(factor: float, card: float) -> None:
    # (p + 1) = factor * (t + 1): with t + 1 = 10, p = 10 * factor - 1 is an integer for every factor
    t = 9
    p = round(10 * factor) - 1
    assert abs(reward(p, t) - card) < 0.01
    assert reward(p, t) == pytest.approx(1.0 / math.cosh(2.0 * math.log(factor)), abs=1e-12)


def test_symmetric_in_log_space() -> None:
    # 2x over and 2x under (on the +1-shifted scale) cost the same
    assert reward(19, 9) == pytest.approx(reward(4, 9), abs=1e-15)


def test_exact_hit_is_one_and_zero_zero() -> None:
    assert reward(0, 0) == 1.0
    assert reward(123, 123) == 1.0


@pytest.mark.parametrize("bad", [-1, 2.5, float("nan"), float("inf"), "3", None, True])
def test_invalid_predictions_are_refused(bad: object) -> None:
    with pytest.raises(PredictionError):
        validate_prediction(bad)


def test_integral_float_is_accepted() -> None:
    assert validate_prediction(12.0) == 12


@given(st.integers(0, 10**6), st.integers(0, 10**6))
def test_vectorised_matches_scalar_and_closed_form(p: int, t: int) -> None:
    r = reward(p, t)
    ratio = (p + 1) / (t + 1)
    assert 0.0 < r <= 1.0
    assert r == pytest.approx(2 * ratio**2 / (ratio**4 + 1), rel=1e-9)
    assert float(rewards(np.array([p]), np.array([t]))[0]) == r


@given(st.integers(0, 5000), st.integers(0, 5000), st.integers(0, 5000))
def test_monotone_in_log_distance(t: int, a: int, b: int) -> None:
    da, db = abs(math.log1p(a) - math.log1p(t)), abs(math.log1p(b) - math.log1p(t))
    if da < db - 1e-12:
        assert reward(a, t) >= reward(b, t)
