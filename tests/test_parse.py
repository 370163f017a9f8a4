"""The answer parser (the paper's answer format): exactly D0..D7, finite, nonnegative, positive total."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rap_benchmark.core.records import DIRECTION_KEYS
from rap_benchmark.evaluation.scoring.parse import parse_answer, parse_weights


def _obj(values: list[float]) -> dict[str, float]:
    return dict(zip(DIRECTION_KEYS, values, strict=True))


GOOD = _obj([30, 20, 10, 10, 10, 10, 5, 5])


def test_plain_object_is_renormalised() -> None:
    got = parse_answer(json.dumps(GOOD))
    assert got.valid and got.reason is None
    assert got.weights == pytest.approx([0.30, 0.20, 0.10, 0.10, 0.10, 0.10, 0.05, 0.05], abs=1e-15)
    assert got.raw == GOOD


def test_sum_off_100_is_still_valid() -> None:
    got = parse_answer(json.dumps(_obj([1, 1, 1, 1, 0, 0, 0, 0])))
    assert got.valid
    assert got.weights == (0.25, 0.25, 0.25, 0.25, 0.0, 0.0, 0.0, 0.0)


def test_last_object_in_prose_wins() -> None:
    draft = _obj([100, 0, 0, 0, 0, 0, 0, 0])
    text = f"My draft was {json.dumps(draft)}. On reflection, final: {json.dumps(GOOD)} -- done."
    assert parse_answer(text).raw == GOOD


def test_nested_object_is_not_a_candidate() -> None:
    text = 'Answer: {"D0": 1, "D1": 1, "D2": 1, "D3": 1, "D4": 1, "D5": 1, "D6": 1, "D7": 1, "meta": {"x": 1}}'
    got = parse_answer(text)
    assert not got.valid
    assert got.reason == "extra keys meta"


def test_fenced_json_block_preferred() -> None:
    text = f'notes {{not json}} ```json\n{json.dumps(GOOD)}\n``` trailing {{"a": 1}}'
    got = parse_answer(text)
    assert got.valid and got.raw == GOOD


def test_prose_inside_the_fence_is_tolerated() -> None:
    text = f"```json\n// my weights\n{json.dumps(GOOD)}\nThat is all.\n```"
    assert parse_answer(text).raw == GOOD


def test_fence_without_an_object() -> None:
    got = parse_answer("```json\n[1, 2, 3]\n```")
    assert not got.valid and got.reason == "no JSON object found in the answer"


def test_last_fenced_block_wins() -> None:
    other = _obj([0, 0, 0, 0, 0, 0, 0, 100])
    text = f"```json\n{json.dumps(GOOD)}\n```\nrevised:\n```json\n{json.dumps(other)}\n```"
    assert parse_answer(text).weights == (0.0,) * 7 + (1.0,)


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "empty answer"),
        ("I cannot answer that.", "no JSON object found in the answer"),
        ('{"D0": 50, "D1": 50', "truncated"),
        ('Final: {"D0": 50, "D1": 5', "truncated"),
        ('```json\n{"D0": 50, "D1": 50, "D2', "truncated"),
        (json.dumps(_obj([1] * 8)) + ' then {"D0": 3', "truncated"),
    ],
)
def test_unparseable(text: str, reason: str) -> None:
    got = parse_answer(text)
    assert not got.valid and got.weights is None
    assert got.reason is not None and got.reason.startswith(reason)


def test_missing_and_extra_keys_named() -> None:
    obj = {k: 10 for k in DIRECTION_KEYS[:7]}
    obj["D8"] = 30
    got = parse_answer(json.dumps(obj))
    assert not got.valid
    assert got.reason == "missing keys D7; extra keys D8"


def test_lowercase_keys_are_not_direction_keys() -> None:
    got = parse_weights({k.lower(): 1 for k in DIRECTION_KEYS})
    assert not got.valid and got.reason.startswith("missing keys D0, D1")


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("12", "D3 is not a number: '12'"),
        (None, "D3 is not a number: None"),
        (True, "D3 is not a number: True"),
        ([1], "D3 is not a number: [1]"),
        (-1, "D3 is negative: -1.0"),
        (float("nan"), "D3 is NaN"),
        (float("inf"), "D3 is infinite"),
    ],
)
def test_bad_values(value: object, reason: str) -> None:
    obj = _obj([10] * 8)
    obj["D3"] = value  # type: ignore[assignment]
    got = parse_weights(obj)
    assert not got.valid and got.reason == reason and got.raw == obj


def test_json_nan_literal_rejected() -> None:
    text = '{"D0": NaN, "D1": 1, "D2": 1, "D3": 1, "D4": 1, "D5": 1, "D6": 1, "D7": 1}'
    assert parse_answer(text).reason == "D0 is NaN"


def test_zero_total() -> None:
    assert parse_weights(_obj([0] * 8)).reason == "the weights sum to zero"


def test_duplicate_key_rejected() -> None:
    text = '{"D0": 1, "D0": 2, "D1": 1, "D2": 1, "D3": 1, "D4": 1, "D5": 1, "D6": 1, "D7": 1}'
    got = parse_answer(text)
    assert not got.valid and got.reason == "duplicate key 'D0' in the answer object"


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(min_value=0, max_value=1e6, allow_nan=False), min_size=8, max_size=8))
def test_valid_weights_lie_on_the_simplex(values: list[float]) -> None:
    got = parse_answer("Here you go:\n" + json.dumps(_obj(values)))
    if sum(values) > 0:
        assert got.valid
        assert got.weights is not None and len(got.weights) == 8
        assert math.isclose(math.fsum(got.weights), 1.0, abs_tol=1e-12)
        assert all(w >= 0 for w in got.weights)
        # order preserved: proportional to the input
        total = math.fsum(values)
        assert all(
            math.isclose(w, v / total, rel_tol=1e-12, abs_tol=1e-300) for w, v in zip(got.weights, values, strict=True)
        )
    else:
        assert not got.valid and got.reason == "the weights sum to zero"
