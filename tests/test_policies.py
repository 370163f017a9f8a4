"""Counting policies (the paper's counting policies): vectorised weights against a row-by-row reading of the table."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rap_benchmark.core.records import DIRECTION_KEYS, AssignmentType, Policy
from rap_benchmark.pipeline.policies import composition, direction_weights

KEYS = list(DIRECTION_KEYS)


def _reference(primary: str, secondary: str | None, kind: str, policy: Policy) -> list[float]:
    """One row, written out case by case from the policy table in policies.py."""
    out = [0.0] * 8
    if kind in ("other", "low_evidence") or primary not in KEYS:
        return out
    p = KEYS.index(primary)
    s = KEYS.index(secondary) if secondary in KEYS else None
    if policy is Policy.SINGLE_ONLY:
        if kind == "single":
            out[p] = 1.0
        return out
    if kind == "boundary" and s is not None:
        if policy is Policy.SPLIT_BOUNDARY:
            out[p] += 0.5
            out[s] += 0.5
            return out
        if policy is Policy.SECONDARY:
            out[s] = 1.0
            return out
    out[p] = 1.0
    return out


def _frame(rows: list[tuple[str, str | None, str]]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["primary", "secondary", "type"])


EXAMPLE = _frame(
    [
        ("D0", None, "single"),
        ("D1", "D2", "boundary"),
        ("D3", "D4", "bridge"),
        ("other", None, "other"),
        ("other", None, "low_evidence"),
    ]
)


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        (Policy.CANONICAL, [1, 1, 0, 1, 0, 0, 0, 0]),
        (Policy.SPLIT_BOUNDARY, [1, 0.5, 0.5, 1, 0, 0, 0, 0]),
        (Policy.SINGLE_ONLY, [1, 0, 0, 0, 0, 0, 0, 0]),
        (Policy.SECONDARY, [1, 0, 1, 1, 0, 0, 0, 0]),
    ],
)
def test_policy_table(policy: Policy, expected: list[float]):
    weights = direction_weights(EXAMPLE, policy)
    assert weights.dtype == np.float64 and weights.shape == (5, 8)
    np.testing.assert_array_equal(weights.sum(axis=0), np.array(expected, dtype=np.float64))
    assert weights[3:].sum() == 0  # other and low_evidence never count


_ROW = st.tuples(
    st.sampled_from(KEYS + ["other"]),
    st.one_of(st.none(), st.sampled_from(KEYS)),
    st.sampled_from([t.value for t in AssignmentType]),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(_ROW, max_size=60), st.sampled_from(list(Policy)))
def test_vectorised_matches_row_reference(rows, policy):
    frame = _frame(rows)
    weights = direction_weights(frame, policy)
    expected = np.array([_reference(p, s, t, policy) for p, s, t in rows], dtype=np.float64).reshape(-1, 8)
    np.testing.assert_array_equal(weights, expected)
    mass = weights.sum(axis=1)
    assert np.isin(mass, [0.0, 1.0]).all()  # each membership is one unit or nothing


@settings(max_examples=80, deadline=None)
@given(st.lists(_ROW, max_size=60))
def test_boundary_policies_move_mass_but_keep_it(rows):
    frame = _frame(rows)
    totals = {p: direction_weights(frame, p).sum() for p in Policy}
    assert totals[Policy.CANONICAL] == totals[Policy.SPLIT_BOUNDARY] == totals[Policy.SECONDARY]
    assert totals[Policy.SINGLE_ONLY] <= totals[Policy.CANONICAL]


def test_unknown_type_rejected():
    with pytest.raises(ValueError, match="unknown assignment types"):
        direction_weights(_frame([("D0", None, "tie")]), Policy.CANONICAL)


def test_policy_counts_groups():
    frame = EXAMPLE.assign(field_id=["b", "a", "a", "b", "a"])
    out = policy_counts(frame, "split_boundary", ["field_id"])
    assert out["field_id"].tolist() == ["a", "b"]
    assert out.loc[0, KEYS].tolist() == [0, 0.5, 0.5, 1, 0, 0, 0, 0]
    assert out["n"].tolist() == [2.0, 1.0]


def test_composition_normalises_and_marks_empty():
    comp = composition(np.array([[1.0, 3.0] + [0.0] * 6, [0.0] * 8]))
    np.testing.assert_allclose(comp[0, :2], [0.25, 0.75])
    assert np.isnan(comp[1]).all()


def policy_counts(assignments: pd.DataFrame, policy: Policy, by: list[str]) -> pd.DataFrame:
    """Summed direction mass per group: columns ``by`` + ``D0..D7`` + ``n`` (counted mass).

    Groups with no rows do not appear; groups whose rows all count zero appear with zeros.
    """
    weights = direction_weights(assignments, policy)
    frame = assignments[by].copy()
    for i, key in enumerate(DIRECTION_KEYS):
        frame[key] = weights[:, i]
    out = frame.groupby(by, sort=True, dropna=False)[list(DIRECTION_KEYS)].sum().reset_index()
    out["n"] = out[list(DIRECTION_KEYS)].sum(axis=1)
    return out
