"""Non-LLM reference agents that go through the same tool protocol and episode loop.

They are backends (``complete(request, context)``) that emit Search tool calls and a final JSON
answer, so their units are recorded, audited and scored exactly like a model's. They show what
the tools alone give.

* ``reference/uniform``: answers 12.5% everywhere at once (no ordering: scores 0 by convention).
* ``reference/search-hits``: for every direction, queries the direction's own distinctive terms
  (from its name and definition) under two narrowed date windows and reads ``total_hits``.
  Windows: the two halves of [T-6mo, T) under the fixed universe; [T-12mo, T-6mo) and
  [T-6mo, T) under the expanding one. Hit shares per window give a State answer (the recent
  window's share; both halves together under the fixed universe) and a Forecast answer by damped
  linear trend extrapolation: ``late + trend * (late - early)``, clipped at 0. Without tools (A0)
  it has no evidence and answers uniform.

The agents are stateless: the next action is a function of the context and the observations
already in the conversation, so a restarted unit replays identically.
"""

from __future__ import annotations

import datetime as dt
import json
from collections import Counter
from dataclasses import dataclass

import numpy as np

from rap_benchmark.agents.prompts import format_answer
from rap_benchmark.agents.protocol import EpisodeContext, ModelTurn, Request, tool_call_turn
from rap_benchmark.core.dates import add_months
from rap_benchmark.core.errors import InputError
from rap_benchmark.core.records import DIRECTION_KEYS, Codebook, Regime, Task
from rap_benchmark.core.text import query_terms

MAX_TERMS = 6


def direction_terms(codebook: Codebook, *, max_terms: int = MAX_TERMS) -> list[list[str]]:
    """Each direction's distinctive query terms: tokens of its name and definition that appear in
    no other direction's name or definition and not in the field's own name/definition."""
    field_terms = set(query_terms(f"{codebook.name} {codebook.definition}"))
    texts = [query_terms(f"{d.name} {d.definition}") for d in codebook.directions]
    df = Counter(t for terms in texts for t in set(terms))
    out = []
    for d, terms in zip(codebook.directions, texts, strict=True):
        own = [t for t in terms if df[t] == 1 and t not in field_terms]
        if not own:  # nothing distinctive: fall back to the name's tokens
            own = query_terms(d.name) or terms
        out.append(own[:max_terms])
    return out


@dataclass(frozen=True, slots=True)
class PlannedCall:
    direction: int
    window: int  # 0 = early, 1 = late
    query: str
    start: str  # start_date argument (inclusive)
    end: str  # end_date argument (inclusive)


def plan_calls(context: EpisodeContext, regime: Regime) -> list[PlannedCall]:
    """The deterministic Search plan: every direction under the early then the late window."""
    t = context.origin
    months = context.spec.window_months
    if Regime(regime) is Regime.FIXED:
        half = months // 2
        windows = [(add_months(t, -months), add_months(t, -half)), (add_months(t, -half), t)]
    else:
        windows = [(add_months(t, -2 * months), add_months(t, -months)), (add_months(t, -months), t)]
    plan = []
    for d, terms in enumerate(direction_terms(context.codebook)):
        for w, (start, end) in enumerate(windows):
            last = end - dt.timedelta(days=1)  # the tool's end_date is inclusive
            plan.append(PlannedCall(d, w, " ".join(terms), start.isoformat(), last.isoformat()))
    return plan


def _observed_hits(request: Request) -> list[int | None]:
    """total_hits of every tool observation in the conversation, in order (None for errors)."""
    out: list[int | None] = []
    for m in request.messages:
        if m.get("role") != "tool":
            continue
        try:
            obs = json.loads(str(m.get("content")))
        except json.JSONDecodeError:
            out.append(None)
            continue
        out.append(int(obs["total_hits"]) if isinstance(obs, dict) and "total_hits" in obs else None)
    return out


def _shares(hits: np.ndarray) -> np.ndarray:
    total = hits.sum()
    return hits / total if total > 0 else np.full(hits.shape, 1.0 / hits.size)


def hits_answer(hits: np.ndarray, task: Task, regime: Regime, *, trend: float) -> np.ndarray:
    """Weights from an (8, 2) array of hits (early, late windows); NaN = not observed."""
    h = np.nan_to_num(np.asarray(hits, dtype=np.float64), nan=0.0)
    early, late = _shares(h[:, 0]), _shares(h[:, 1])
    if Task(task) is Task.STATE:
        return _shares(h[:, 0] + h[:, 1]) if Regime(regime) is Regime.FIXED else late
    p = np.clip(late + trend * (late - early), 0.0, None)
    return _shares(p)


class ReferenceBackend:
    """A reference agent as a backend. ``name`` is ``reference/uniform`` or ``reference/search-hits``."""

    NAMES = ("reference/uniform", "reference/search-hits")

    def __init__(self, name: str = "reference/search-hits", *, trend: float = 0.5) -> None:
        if name not in self.NAMES:
            raise InputError(f"unknown reference agent {name!r} (expected one of {', '.join(self.NAMES)})")
        self.name = name
        self.trend = trend

    def _answer(self, weights: np.ndarray | list[float]) -> ModelTurn:
        return ModelTurn(content=format_answer(list(weights)), response_model=self.name)

    async def complete(self, request: Request, context: EpisodeContext) -> ModelTurn:
        uniform = [1.0] * len(DIRECTION_KEYS)
        regime = context.condition.regime
        if self.name == "reference/uniform" or request.tools is None or regime is None:
            return self._answer(uniform)
        plan = plan_calls(context, regime)
        observed = _observed_hits(request)
        if request.tool_choice != "none" and len(observed) < len(plan):
            call = plan[len(observed)]
            args = {"query": call.query, "start_date": call.start, "end_date": call.end}
            return tool_call_turn(len(observed), "search", args, self.name)
        hits = np.full((len(DIRECTION_KEYS), 2), np.nan)
        for call, h in zip(plan, observed, strict=False):
            if h is not None:
                hits[call.direction, call.window] = h
        return self._answer(hits_answer(hits, context.task, regime, trend=self.trend))

    async def aclose(self) -> None:
        return None
