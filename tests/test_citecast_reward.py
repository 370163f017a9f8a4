"""The CiteCast reward against the card's numbers and its invariants."""

from __future__ import annotations

import datetime as dt
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


@pytest.mark.parametrize("bad", [True, False, -1, 3.0, "3"])
def test_a_count_is_a_nonnegative_int_never_a_bool_at_every_site(bad: object) -> None:
    """The reward's target, a task's target, a Semantic Scholar count and a unit file's prediction
    and counters hold to one rule (``core.records.is_count``), each with its own message.
    Regression: a citation count of 3.0 was taken, and one of "3" raised a TypeError."""
    from rap_benchmark.agents.store import TaskKey, check_unit
    from rap_benchmark.citecast.records import CitationRecord, CiteTask, PaperMeta

    snap = dt.date(2026, 8, 23)
    paper = PaperMeta("2601.00001", "A paper", "An abstract.", ("A B",), "cs.LG", dt.date(2026, 1, 2))
    with pytest.raises(ValueError, match="target must be a nonnegative int"):
        reward(3, bad)
    with pytest.raises(ValueError, match="2601.00001: citation count must be a nonnegative int"):
        CitationRecord("2601.00001", "s2-1", "t", bad, snap)
    with pytest.raises(ValueError, match="cc_x: target must be a nonnegative int"):
        CiteTask("cc_x", paper, bad, "0", "test", "s2-1", snap)
    key = TaskKey("m", "cc_x")
    unit = {"key": key.to_dict(), "valid": True, "prediction": 3, "attempts": 1}
    assert check_unit(unit, key.relpath()) is None
    assert check_unit({**unit, "prediction": bad}, key.relpath()) == (
        "claims valid but 'prediction' is not a nonnegative integer"
    )
    assert check_unit({**unit, "attempts": bad}, key.relpath()) == "has a 'attempts' that is not a nonnegative integer"
    assert CiteTask("cc_x", paper, 0, "0", "test", "s2-1", snap).target == 0
    assert reward(3, np.int64(3)) == reward(3, 3) == 1.0  # a count read from a table
