"""The episode loop: one unit (model, field, origin, condition) from first prompt to parsed answer.

Protocol (SPEC 3.7, the paper's section on conditions):

* temperature 0; Search conditions offer the ``search`` tool with ``tool_choice="auto"`` and
  parallel tool calls off; A0 offers no tools;
* a turn is either a tool call or the final answer. Plain text in place of either is recorded;
  if it parses as a valid answer it is accepted, otherwise the model is nudged once and a second
  failure makes the unit invalid;
* malformed tool arguments (bad JSON, unknown keys, bad dates, unknown tool) get an error
  observation and count toward the budget; extra parallel calls in one turn get an error
  observation and are not executed;
* at most ``max_search_calls`` calls; the next request carries ``tool_choice="none"`` and a
  message that forces the answer;
* an over-length reply (``finish_reason == "length"``) that does not parse is invalid at once
  (at temperature 0 a retry would truncate again; recovery may rerun it with a lower cap);
* a request whose every attempt failed makes the unit invalid with its attempts recorded.

Every path ends in a :class:`UnitResult`, valid or invalid; nothing is lost.
"""

from __future__ import annotations

import inspect
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from rap_benchmark.agents import prompts
from rap_benchmark.agents.protocol import (
    Attempt,
    Backend,
    BackendFailure,
    EpisodeContext,
    Message,
    ModelTurn,
    Request,
)
from rap_benchmark.evaluation.scoring.parse import parse_answer

SearchFn = Callable[..., dict[str, Any]]
"""A bound search tool: ``search(query, start_date=None, end_date=None) -> observation dict``."""

TOOL_NAME = "search"


def observation_text(observation: dict[str, Any]) -> str:
    """The exact tool-message content for an observation (the Search tool's stable JSON)."""
    from rap_benchmark.search.tool import observation_json

    return observation_json(observation)


@dataclass
class UnitResult:
    """Everything recorded about one unit (stored as JSON by the run store)."""

    messages: list[Message]
    search_calls: list[dict[str, Any]]
    turns: list[dict[str, Any]]
    events: list[str]
    answer_text: str | None
    valid: bool
    weights: list[float] | None
    invalid_reason: str | None
    response_model: str | None
    attempts: int
    retries: int
    prompt_tokens: int
    completion_tokens: int
    wall_s: float
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def n_search_calls(self) -> int:
        return len(self.search_calls)

    def to_dict(self) -> dict[str, Any]:
        return {
            "messages": self.messages,
            "search_calls": self.search_calls,
            "turns": self.turns,
            "events": self.events,
            "answer_text": self.answer_text,
            "valid": self.valid,
            "weights": self.weights,
            "invalid_reason": self.invalid_reason,
            "response_model": self.response_model,
            "attempts": self.attempts,
            "retries": self.retries,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "n_search_calls": self.n_search_calls,
            "wall_s": round(self.wall_s, 6),
            **self.extra,
        }


def _tool_parameters(fn: SearchFn) -> set[str]:
    return set(inspect.signature(fn).parameters)


def execute_tool_call(fn: SearchFn | None, name: str, arguments: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """Run one tool call; return (observation dict, call log entry). Never raises on model input."""
    log: dict[str, Any] = {"name": name, "arguments": arguments, "query": None, "start_date": None, "end_date": None}
    if fn is None or name != TOOL_NAME:
        err = f"unknown tool {name!r}: the only tool is {TOOL_NAME!r}" if fn is not None else "no tools are available"
        return {"error": err}, {**log, "error": err, "result_ids": [], "total_hits": None}
    try:
        args = json.loads(arguments) if arguments and arguments.strip() else {}
    except json.JSONDecodeError as exc:
        err = f"malformed arguments: not JSON ({exc.msg} at character {exc.pos})"
        return {"error": err}, {**log, "error": err, "result_ids": [], "total_hits": None}
    if not isinstance(args, dict):
        err = f"malformed arguments: expected a JSON object, got {type(args).__name__}"
        return {"error": err}, {**log, "error": err, "result_ids": [], "total_hits": None}
    allowed = _tool_parameters(fn)
    unknown = sorted(set(args) - allowed)
    query = args.get("query")
    err = None
    if unknown:
        err = f"malformed arguments: unknown argument(s) {', '.join(unknown)} (allowed: {', '.join(sorted(allowed))})"
    elif not isinstance(query, str) or not query.strip():
        err = "malformed arguments: 'query' must be a non-empty string"
    elif any(args.get(k) is not None and not isinstance(args.get(k), str) for k in ("start_date", "end_date")):
        err = "malformed arguments: start_date and end_date must be YYYY-MM-DD strings"
    log.update(query=query, start_date=args.get("start_date"), end_date=args.get("end_date"))
    if err is not None:
        return {"error": err}, {**log, "error": err, "result_ids": [], "total_hits": None}
    try:
        obs = fn(**args)
    except (ValueError, TypeError) as exc:
        err = f"invalid arguments: {exc}"
        return {"error": err}, {**log, "error": err, "result_ids": [], "total_hits": None}
    ids = [str(r["arxiv_id"]) for r in obs.get("results", [])]
    return obs, {**log, "error": None, "result_ids": ids, "total_hits": int(obs["total_hits"])}


class _Tally:
    def __init__(self) -> None:
        self.turns: list[dict[str, Any]] = []
        self.attempts = 0
        self.retries = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.response_model: str | None = None

    def add_attempts(self, attempts: tuple[Attempt, ...]) -> None:
        self.attempts += len(attempts)
        self.retries += sum(1 for a in attempts if not a.ok)

    def add_turn(self, turn: ModelTurn, kind: str) -> None:
        self.add_attempts(turn.attempts)
        self.prompt_tokens += turn.prompt_tokens
        self.completion_tokens += turn.completion_tokens
        if turn.response_model:
            self.response_model = turn.response_model
        self.turns.append(
            {
                "kind": kind,
                "finish_reason": turn.finish_reason,
                "response_model": turn.response_model,
                "prompt_tokens": turn.prompt_tokens,
                "completion_tokens": turn.completion_tokens,
                "attempts": [a.to_dict() for a in turn.attempts],
                "prefill": turn.prefill,
            }
        )

    def add_failure(self, exc: BackendFailure) -> None:
        self.add_attempts(exc.attempts)
        self.turns.append(
            {
                "kind": "failed",
                "finish_reason": None,
                "response_model": None,
                "prompt_tokens": 0,
                "completion_tokens": 0,
                "attempts": [a.to_dict() for a in exc.attempts],
            }
        )


def _assistant_message(turn: ModelTurn) -> Message:
    msg: Message = {"role": "assistant", "content": turn.content}
    if turn.tool_calls:
        msg["tool_calls"] = [tc.to_message() for tc in turn.tool_calls]
    if turn.reasoning:
        msg["reasoning_content"] = turn.reasoning
    return msg


async def run_episode(
    backend: Backend,
    context: EpisodeContext,
    user_prompt: str,
    *,
    search_fn: SearchFn | None,
    tool_schema: dict[str, Any] | None,
    max_tokens: int,
    max_search_calls: int,
) -> UnitResult:
    """Run one unit to a recorded valid or invalid result (see the module docstring)."""
    t0 = time.perf_counter()
    messages: list[Message] = prompts.initial_messages(user_prompt)
    calls: list[dict[str, Any]] = []
    events: list[str] = []
    tally = _Tally()
    has_tools = search_fn is not None and tool_schema is not None
    nudged = forced = False
    answer_text: str | None = None
    weights: list[float] | None = None
    invalid_reason: str | None = None

    while True:
        tools_open = has_tools and len(calls) < max_search_calls
        if has_tools and not tools_open and not forced:
            forced = True
            events.append(f"forced_answer after {len(calls)} calls")
            force = prompts.force_answer_message(max_search_calls)
            messages.append({"role": "user", "content": force, "rap_note": "force_answer"})
        request = Request(
            messages=tuple(messages),
            tools=(tool_schema,) if has_tools else None,
            tool_choice=("auto" if tools_open else "none") if has_tools else None,
            max_tokens=max_tokens,
            temperature=context.spec.temperature,
        )
        try:
            turn = await backend.complete(request, context)
        except BackendFailure as exc:
            tally.add_failure(exc)
            invalid_reason = f"backend_error: {exc}"
            break
        except Exception as exc:  # noqa: BLE001 - an in-process backend crash is recorded, not lost
            desc = f"{type(exc).__name__}: {exc}"
            tally.add_failure(BackendFailure(desc, (Attempt(1, False, desc),)))
            invalid_reason = f"backend_error: {desc}"
            break

        if turn.tool_calls:
            tally.add_turn(turn, "tool_call")
            messages.append(_assistant_message(turn))
            if not tools_open:
                err = "no search calls are available now; reply with the final JSON answer"
                for tc in turn.tool_calls:
                    messages.append(
                        {"role": "tool", "tool_call_id": tc.id, "content": observation_text({"error": err})}
                    )
                if nudged:
                    invalid_reason = "tool_call_when_no_tools_available"
                    break
                nudged = True
                events.append("nudged: tool call when no tools were available")
                continue
            first, *rest = turn.tool_calls
            obs, log = execute_tool_call(search_fn, first.name, first.arguments)
            log["tool_call_id"] = first.id
            calls.append(log)
            messages.append({"role": "tool", "tool_call_id": first.id, "content": observation_text(obs)})
            if log["error"]:
                events.append(f"tool_error: {log['error']}")
            for tc in rest:
                err = "parallel tool calls are disabled: only the first call of a turn is executed"
                messages.append({"role": "tool", "tool_call_id": tc.id, "content": observation_text({"error": err})})
            if rest:
                events.append(f"parallel_tool_calls_dropped: {len(rest)}")
            continue

        text = turn.content or ""
        tally.add_turn(turn, "text")
        messages.append(_assistant_message(turn))
        answer_text = text
        parsed = parse_answer(text)
        if parsed.valid:
            weights = list(parsed.weights or ())
            break
        if turn.finish_reason == "length":
            invalid_reason = (
                f"over_length: the completion stopped at the token cap after {turn.completion_tokens} tokens "
                f"(requested cap {max_tokens}; {parsed.reason})"
            )
            break
        if nudged:
            invalid_reason = f"invalid_answer: {parsed.reason}"
            break
        nudged = True
        events.append(f"nudged: {parsed.reason}")
        nudge = prompts.nudge_message(parsed.reason or "", tools_available=tools_open)
        messages.append({"role": "user", "content": nudge, "rap_note": "nudge"})

    return UnitResult(
        messages=messages,
        search_calls=calls,
        turns=tally.turns,
        events=events,
        answer_text=answer_text,
        valid=weights is not None,
        weights=weights,
        invalid_reason=invalid_reason,
        response_model=tally.response_model,
        attempts=tally.attempts,
        retries=tally.retries,
        prompt_tokens=tally.prompt_tokens,
        completion_tokens=tally.completion_tokens,
        wall_s=time.perf_counter() - t0,
    )
