"""Asking one unit of a stage (a field to name, a batch, a draft, papers to label).

The reply is read leniently (:func:`~.validate.parse_json_reply`) and judged strictly by the
stage's validator; an invalid one is asked again, quoted with its fault (``max_attempts`` in all).
A reply cut at max_tokens is asked again once with twice the budget (not an attempt; cut again,
the unit fails). A refused request (the offline fallback) fails the unit at once.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rap_benchmark.pipeline.instrument.llm.client import Client
from rap_benchmark.pipeline.instrument.llm.records import MAX_TOKENS, Outcome, PipelineConfig
from rap_benchmark.pipeline.instrument.llm.validate import InvalidOutput, parse_json_reply, truncation_reason


async def ask(
    client: Client,
    stage: str,
    model: str,
    prompt: str,
    validate: Callable[[dict[str, Any]], Any],
    cfg: PipelineConfig,
    *,
    budget: int | None = None,
    wide: int = 0,
    settle: Callable[[InvalidOutput, int], str] | None = None,
) -> Outcome:
    """Ask until ``validate(parsed reply)`` passes (see the module docstring).

    ``budget`` is the first request's max_tokens (default: the stage's), ``wide`` the least
    budget of the re-ask after a cut reply. ``settle(fault, attempt)``, called after each invalid
    reply that was not cut, keeps what that reply got right and returns the tail of the re-ask's
    instruction (the labels stage narrows it to the papers still without a label).
    """
    messages = [{"role": "user", "content": prompt}]
    budget = cfg.budget(MAX_TOKENS[stage]) if budget is None else budget
    widened = False
    fault: InvalidOutput | None = None
    raw: str | None = None
    attempt = 0
    while attempt < cfg.max_attempts:
        reply = await client.complete(stage, model, messages, budget, retry=attempt > 0 or widened)
        raw = reply.content
        if reply.error is not None:
            return Outcome(None, f"request refused: {reply.error}", None, attempt + 1)
        try:
            return Outcome(validate(parse_json_reply(reply.content)), None, raw, attempt + 1)
        except InvalidOutput as exc:
            fault = exc
        if reply.truncated:
            if widened or budget >= cfg.max_tokens_cap:
                return Outcome(None, truncation_reason(reply, budget), raw, attempt + 1)
            widened, budget = True, cfg.widened(max(budget, wide))
            continue
        attempt += 1
        tail = "" if settle is None else settle(fault, attempt)
        again = f"Your reply was invalid: {fault}. Reply again with the JSON object only{tail}."
        messages = [
            *messages,
            {"role": "assistant", "content": reply.content or ""},
            {"role": "user", "content": again},
        ]
    return Outcome(None, f"invalid after {cfg.max_attempts} attempts: {fault}", raw, cfg.max_attempts)
