"""Prompts (content, versioning, never y) and the reference agents on mini."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rap_benchmark.agents import prompts
from rap_benchmark.agents.protocol import EpisodeContext
from rap_benchmark.agents.reference import ReferenceBackend, direction_terms, hits_answer, plan_calls
from rap_benchmark.agents.runner import episode_cells, run_benchmark
from rap_benchmark.core.dates import parse_date
from rap_benchmark.core.records import DIRECTION_KEYS, Condition, Regime, Task
from rap_benchmark.evaluation.scoring.parse import parse_answer


def test_prompt_holds_field_directions_origin_task_and_format(mini):
    field_id, origin = episode_cells(mini)[0]
    cb = mini.codebooks[field_id]
    for cond in Condition:
        text = prompts.condition_prompt(cb, origin, cond, mini.spec)
        assert cb.definition in text and origin in text
        for d in cb.directions:
            assert d.name in text and d.definition in text and d.inclusion in text and d.exclusion in text
        assert '"D0"' in text and "sum to 100" in text and "$" not in text
        assert ("Forecast" in text) == (cond.task is Task.FORECAST)
        assert ("search tool" in text) == (cond.regime is not None)
    assert prompts.PROMPT_VERSION


@given(st.lists(st.floats(0, 1e6, allow_nan=False), min_size=8, max_size=8).filter(lambda w: sum(w) > 1e-9))
@settings(max_examples=200, deadline=None)
def test_format_answer_round_trips_through_the_parser(w):
    text = prompts.format_answer(w)
    parsed = parse_answer(text)
    assert parsed.valid
    assert abs(sum(json.loads(text).values()) - 100) < 1e-6
    # each rounding moves at most 0.005 points; the residue (<= 7 x 0.005) goes to the largest weight
    np.testing.assert_allclose(parsed.weights, np.asarray(w) / sum(w), atol=4e-4)


def test_direction_terms_are_distinctive(mini):
    for cb in mini.codebooks.values():
        terms = direction_terms(cb)
        assert len(terms) == 8 and all(terms)
        flat = [t for ts in terms for t in set(ts)]
        assert len(flat) == len(set(flat)), "a term shared by two directions cannot separate them"


@pytest.mark.parametrize("regime", list(Regime))
def test_plan_stays_inside_the_universe(mini, regime):
    field_id, origin = episode_cells(mini)[-1]
    t = parse_date(origin)
    ctx = EpisodeContext("r", field_id, t, Condition.A1, Task.FORECAST, mini.codebooks[field_id], mini.spec)
    plan = plan_calls(ctx, regime)
    assert len(plan) == 16 <= mini.spec.max_search_calls
    lo = "0000" if regime is Regime.EXPANDING else prompts.task_window(Task.STATE, t, mini.spec)[0].isoformat()
    for call in plan:
        assert lo <= call.start <= call.end < origin


def test_hits_answer_extrapolates_trend_and_state_uses_recent():
    hits = np.array([[10, 20]] + [[10, 10]] * 6 + [[20, 10]], dtype=float)
    p = hits_answer(hits, Task.FORECAST, Regime.EXPANDING, trend=0.5)
    s = hits_answer(hits, Task.STATE, Regime.EXPANDING, trend=0.5)
    assert p[0] > s[0] > p[1] and p[7] < s[7]
    np.testing.assert_allclose(s, hits[:, 1] / hits[:, 1].sum())
    assert hits_answer(np.full((8, 2), np.nan), Task.FORECAST, Regime.FIXED, trend=0.5) == pytest.approx([1 / 8] * 8)


def test_reference_agents_on_mini(mini, tmp_path):
    """search-hits: valid, uses Search through the loop, beats uniform; its calls are exact."""
    from rap_benchmark.agents.store import RunStore
    from rap_benchmark.evaluation.scoring.score import score_predictions

    fields = mini.field_ids[:6]
    stats, path = run_benchmark(
        mini.public_view(),
        ReferenceBackend(),
        tmp_path / "ref",
        model="reference/search-hits",
        conditions=[Condition.A0, Condition.A1, Condition.A3],
        fields=fields,
        progress=False,
    )
    assert stats.invalid == 0 and stats.executed == 3 * len(fields) * len(mini.spec.origins)
    from rap_benchmark.evaluation.predictions import read_predictions

    preds = read_predictions(path)
    scores = score_predictions(mini, preds)
    by = scores.groupby("condition")["spearman"].mean()
    assert by["A0"] == 0.0  # uniform: no ordering
    assert by["A1"] > 0.2 and by["A3"] > 0.2, (by, preds.groupby("condition")["n_search_calls"].mean(), preds.iloc[20])
    rec = next(r for r in RunStore(tmp_path / "ref").iter_units() if r["key"]["condition"] == "A3")
    assert rec["n_search_calls"] == 16 and all(c["error"] is None for c in rec["search_calls"])
    assert preds.loc[preds.condition == "A1", "n_search_calls"].eq(16).all()
    assert list(DIRECTION_KEYS) == [c for c in preds.columns if c.startswith("D")]
