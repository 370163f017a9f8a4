"""The episode loop: one unit from first prompt to a recorded answer, generic over a tool set.

RAP units (model, field, origin, condition) run with the Search tool set and a JSON answer;
CiteCast tasks run with web_search/web_fetch/submit_prediction and end at the first accepted
submission (:mod:`rap_benchmark.agents.toolset`). Protocol (the paper's conditions and agent
protocol):

* temperature 0; Search conditions offer the ``search`` tool with ``tool_choice="auto"`` and
  parallel tool calls off; A0 offers no tools;
* a turn is either a tool call or the final answer. Plain text in place of either is recorded;
  if it parses as a valid answer it is accepted, otherwise the model is nudged once and a second
  failure makes the unit invalid;
* malformed tool arguments (bad JSON, unknown keys, bad dates, unknown tool) get an error
  observation and count toward the budget; extra parallel calls in one turn get an error
  observation and are not executed;
* at most ``max_tool_calls`` calls (an answer tool's calls do not count); the next request
  carries ``tool_choice="none"`` (or offers only the answer tool) and a message that forces the
  answer; a refused call of the answer tool is a failed answer (nudged once);
* an over-length reply (``finish_reason == "length"``) that does not parse is invalid at once
  (at temperature 0 a retry would truncate again; recovery may rerun it with a lower cap);
* a request whose every attempt failed makes the unit invalid with its attempts recorded; once
  the endpoints stopped answering (:class:`~rap_benchmark.llmclient.health.EndpointDown`) the
  unit is not recorded at all: the run stops, and resumes it later.

Every path ends in a :class:`UnitResult`, valid or invalid (an
:class:`~rap_benchmark.core.records.InvalidReason` plus a detail); nothing is lost.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from rap_benchmark.agents import prompts
from rap_benchmark.agents.protocol import Backend, Message, ModelTurn, Request, UnitContext
from rap_benchmark.agents.toolset import AnswerCheck, Rules, ToolSet, observation_text
from rap_benchmark.core.errors import StoppedEarly
from rap_benchmark.core.records import InvalidReason
from rap_benchmark.llmclient.failures import Attempt, BackendFailure


def _rap_answer(text: str) -> AnswerCheck:
    from rap_benchmark.evaluation.scoring import parse_answer

    parsed = parse_answer(text)
    return AnswerCheck(True, list(parsed.weights or ())) if parsed.valid else AnswerCheck(False, None, parsed.reason)


RAP_RULES = Rules(
    parse_answer=_rap_answer,
    force_message=lambda max_calls: prompts.fill("force_answer", max_calls=max_calls),
    nudge_message=lambda reason, tools_open: prompts.nudge_message(reason, tools_available=tools_open),
    no_calls_left="no search calls are available now; reply with the final JSON answer",
)
"""RAP: the final answer is the JSON weights of D0..D7 (``evaluation.scoring.parse``)."""


@dataclass(frozen=True)
class Episode:
    """One unit's loop input: first messages, tool set (None: closed book), rules and caps."""

    messages: list[Message]
    tools: ToolSet | None
    max_tokens: int
    max_tool_calls: int
    temperature: float = 0.0
    rules: Rules = RAP_RULES


@dataclass
class UnitResult:
    """Everything recorded about one unit (stored as JSON by the run store)."""

    messages: list[Message]
    calls: list[dict[str, Any]]
    turns: list[dict[str, Any]]
    events: list[str]
    answer_text: str | None
    answer: Any
    invalid_reason: InvalidReason | None
    invalid_detail: str | None
    response_model: str | None
    attempts: int
    retries: int
    prompt_tokens: int
    completion_tokens: int
    wall_s: float
    n_tool_calls: int = 0
    rules: Rules = RAP_RULES
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def valid(self) -> bool:
        return self.answer is not None

    @property
    def weights(self) -> list[float] | None:
        """RAP's answer (D0..D7 weights), None when invalid."""
        return self.answer

    def to_dict(self) -> dict[str, Any]:
        key = self.rules.calls_key
        return {
            "messages": self.messages,
            key: self.calls,
            "turns": self.turns,
            "events": self.events,
            "answer_text": self.answer_text,
            "valid": self.valid,
            self.rules.answer_key: self.answer,
            "invalid_reason": self.invalid_reason.value if self.invalid_reason is not None else None,
            "invalid_detail": self.invalid_detail,
            "response_model": self.response_model,
            "attempts": self.attempts,
            "retries": self.retries,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            f"n_{key}": self.n_tool_calls,
            "wall_s": round(self.wall_s, 6),
            **self.extra,
        }


class _Tally:
    """The turn log and usage of one unit: its attributes are :class:`UnitResult`'s fields of the same names."""

    def __init__(self) -> None:
        self.turns: list[dict[str, Any]] = []
        self.attempts = 0
        self.retries = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.response_model: str | None = None

    def add_turn(self, turn: ModelTurn, kind: str) -> None:
        self.attempts += len(turn.attempts)
        self.retries += sum(1 for a in turn.attempts if not a.ok)
        self.prompt_tokens += turn.prompt_tokens
        self.completion_tokens += turn.completion_tokens
        self.response_model = turn.response_model or self.response_model
        log = {
            "kind": kind,
            "finish_reason": turn.finish_reason,
            "response_model": turn.response_model,
            "prompt_tokens": turn.prompt_tokens,
            "completion_tokens": turn.completion_tokens,
            "attempts": [a.to_dict() for a in turn.attempts],
            "prefill": turn.prefill,
        }
        if kind == "failed":  # a failed request has no turn, so no prefill either
            del log["prefill"]
        self.turns.append(log)

    def add_failure(self, exc: BackendFailure) -> None:
        self.add_turn(ModelTurn(None, finish_reason=None, attempts=exc.attempts), "failed")


def _assistant_message(turn: ModelTurn) -> Message:
    msg: Message = {"role": "assistant", "content": turn.content}
    if turn.tool_calls:
        msg["tool_calls"] = [tc.to_message() for tc in turn.tool_calls]
    if turn.reasoning:
        msg["reasoning_content"] = turn.reasoning
    return msg


async def run_episode(backend: Backend, context: UnitContext, episode: Episode) -> UnitResult:
    """Run one unit to a recorded valid or invalid result (see the module docstring)."""
    t0 = time.perf_counter()
    messages: list[Message] = list(episode.messages)
    tools, rules = episode.tools, episode.rules
    calls: list[dict[str, Any]] = []
    events: list[str] = []
    tally = _Tally()
    answer_tool = tools.answer_tool if tools is not None else None
    nudged = forced = False
    answer_text: str | None = None
    answer: Any = None
    reason: InvalidReason | None = None
    detail: str | None = None

    def budget_used() -> int:
        return sum(1 for c in calls if c["name"] != answer_tool)

    def fail_or_nudge(problem: str, tools_open: bool) -> bool:
        """A failed answer: nudge once (False), or end the unit invalid at the second (True)."""
        nonlocal nudged, reason, detail
        if nudged:
            reason, detail = InvalidReason.INVALID_ANSWER, problem
            return True
        nudged = True
        events.append(f"nudged: {problem}")
        messages.append({"role": "user", "content": rules.nudge_message(problem, tools_open), "rap_note": "nudge"})
        return False

    while True:
        tools_open = tools is not None and budget_used() < episode.max_tool_calls
        if tools is not None and not tools_open and not forced:
            forced = True
            events.append(f"forced_answer after {budget_used()} calls")
            force = rules.force_message(episode.max_tool_calls)
            messages.append({"role": "user", "content": force, "rap_note": "force_answer"})
        offered: tuple[dict[str, Any], ...] | None = None
        choice: str | None = None
        if tools is not None:
            offered, choice = tools.schemas, ("auto" if tools_open else "none")
            if not tools_open and answer_tool is not None:
                offered = tuple(s for s in tools.schemas if s["function"]["name"] == answer_tool)
                choice = "auto"
        request = Request(
            messages=tuple(messages),
            tools=offered,
            tool_choice=choice,
            max_tokens=episode.max_tokens,
            temperature=episode.temperature,
            text_protocol=tools.text_protocol if tools is not None else None,
        )
        try:
            turn = await backend.complete(request, context)
        except StoppedEarly:  # the endpoints stopped answering: the run stops, this unit is not recorded
            raise
        except BackendFailure as exc:
            tally.add_failure(exc)
            reason, detail = InvalidReason.BACKEND_ERROR, str(exc)
            break
        except Exception as exc:  # noqa: BLE001 - an in-process backend crash is recorded, not lost
            desc = f"{type(exc).__name__}: {exc}"
            tally.add_failure(BackendFailure(desc, (Attempt(1, False, desc),)))
            reason, detail = InvalidReason.BACKEND_ERROR, desc
            break

        if turn.tool_calls:
            tally.add_turn(turn, "tool_call")
            messages.append(_assistant_message(turn))
            first, *rest = turn.tool_calls
            answer_call = answer_tool is not None and first.name == answer_tool
            if tools is None or not (tools_open or answer_call):
                err = observation_text({"error": rules.no_calls_left})
                for tc in turn.tool_calls:
                    messages.append({"role": "tool", "tool_call_id": tc.id, "content": err})
                if nudged:
                    reason = InvalidReason.TOOL_CALL_WHEN_NO_TOOLS
                    break
                nudged = True
                events.append("nudged: tool call when no tools were available")
                continue
            outcome = await tools.call(first.name, first.arguments)
            log = {**outcome.log, "tool_call_id": first.id}
            calls.append(log)
            messages.append({"role": "tool", "tool_call_id": first.id, "content": outcome.content})
            if outcome.error:
                events.append(f"tool_error: {outcome.error}")
            for tc in rest:
                err = "parallel tool calls are disabled: only the first call of a turn is executed"
                messages.append({"role": "tool", "tool_call_id": tc.id, "content": observation_text({"error": err})})
            if rest:
                events.append(f"parallel_tool_calls_dropped: {len(rest)}")
            if outcome.final is not None:
                answer_text, answer = turn.content, outcome.final
                break
            if answer_call and fail_or_nudge(f"the answer was refused ({outcome.error})", tools_open):
                answer_text = turn.content
                break
            continue

        text = turn.content or ""
        tally.add_turn(turn, "text")
        messages.append(_assistant_message(turn))
        answer_text = text
        parsed = rules.parse_answer(text)
        if parsed.valid:
            answer = parsed.value
            break
        if turn.finish_reason == "length":
            reason = InvalidReason.OVER_LENGTH
            detail = (
                f"the completion stopped at the token cap after {turn.completion_tokens} tokens "
                f"(requested cap {episode.max_tokens}; {parsed.reason})"
            )
            break
        if fail_or_nudge(parsed.reason or "", tools_open):
            break

    return UnitResult(
        messages=messages,
        calls=calls,
        events=events,
        answer_text=answer_text,
        answer=answer,
        invalid_reason=reason,
        invalid_detail=detail,
        wall_s=time.perf_counter() - t0,
        n_tool_calls=budget_used(),
        rules=rules,
        **vars(tally),
    )
