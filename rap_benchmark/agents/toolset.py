"""What the episode loop needs from a task: a tool set, and the rules that end an episode.

A :class:`ToolSet` runs the model's tool calls (``await call(name, raw JSON arguments)``: the
tool message and a log entry out; it never raises on model input) and says how its tools read as text tags
(:class:`~rap_benchmark.tools.text.TextProtocol`). ``answer_tool`` names the tool whose accepted
call is the final answer (CiteCast's ``submit_prediction``); None means the final answer is text
(RAP's JSON weights). :class:`Rules` holds the task's words (forced answer, nudge) and its text
answer parser. RAP's Search tool set is :class:`SearchToolSet`; CiteCast's is in
:mod:`rap_benchmark.agents.citecast`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from typing import Any, Protocol

from rap_benchmark.core.errors import json_reason
from rap_benchmark.tools import TextProtocol, TextTool, ToolArgumentError, check_arguments, tool_schema


@dataclass(frozen=True)
class ToolOutcome:
    """One executed (or refused) call: the tool message content, its log entry, and the final
    answer when the call delivered one."""

    content: str
    log: dict[str, Any]
    final: Any = None

    @property
    def error(self) -> str | None:
        return self.log.get("error")


class ToolSet(Protocol):
    schemas: tuple[dict[str, Any], ...]
    text_protocol: TextProtocol
    answer_tool: str | None

    async def call(self, name: str, arguments: str) -> ToolOutcome: ...


@dataclass(frozen=True)
class AnswerCheck:
    """The verdict on a text answer: valid with a value, or invalid with a reason."""

    valid: bool
    value: Any = None
    reason: str | None = None


@dataclass(frozen=True)
class Rules:
    """A task's words and answer parser, and the record keys its calls and answer are stored under."""

    parse_answer: Callable[[str], AnswerCheck]
    force_message: Callable[[int], str]
    nudge_message: Callable[[str, bool], str]
    no_calls_left: str
    calls_key: str = "search_calls"
    answer_key: str = "weights"
    extra: dict[str, Any] = field(default_factory=dict)


def decode_arguments(arguments: str) -> tuple[dict[str, Any] | None, str | None]:
    """A model's raw tool arguments as a dict, or (None, why not)."""
    try:
        args = json.loads(arguments) if arguments and arguments.strip() else {}
    except json.JSONDecodeError as exc:
        return None, f"malformed arguments: not JSON ({json_reason(exc)} at character {exc.pos})"
    if not isinstance(args, dict):
        return None, f"malformed arguments: expected a JSON object, got {type(args).__name__}"
    return args, None


# -- RAP: the Search tool ----------------------------------------------------------------------

SEARCH_TOOL = "search"


@cache
def search_text_protocol() -> TextProtocol:
    """``<search start_date="..." end_date="...">query</search>``, explained by the packaged template."""
    from rap_benchmark.agents.prompts import fill

    return TextProtocol((TextTool("search", SEARCH_TOOL, "query"),), fill("text_tool_protocol"))


def observation_text(observation: dict[str, Any]) -> str:
    """The exact tool-message content for a Search observation (the Search tool's stable JSON)."""
    from rap_benchmark.bm25.tool import observation_json

    return observation_json(observation)


class SearchToolSet:
    """RAP's one tool, a bound Search function (``rap_benchmark.bm25.tool.make_search_tool``)."""

    answer_tool: str | None = None

    def __init__(self, fn: Callable[..., dict[str, Any]], schema: dict[str, Any] | None = None) -> None:
        self.fn = fn
        self.schemas = (schema if schema is not None else tool_schema(fn),)
        self.text_protocol = search_text_protocol()

    async def call(self, name: str, arguments: str) -> ToolOutcome:
        log: dict[str, Any] = {
            "name": name,
            "arguments": arguments,
            "query": None,
            "start_date": None,
            "end_date": None,
        }

        def fail(err: str) -> ToolOutcome:
            return ToolOutcome(
                observation_text({"error": err}), {**log, "error": err, "result_ids": [], "total_hits": None}
            )

        if name != SEARCH_TOOL:
            return fail(f"unknown tool {name!r}: the only tool is {SEARCH_TOOL!r}")
        args, err = decode_arguments(arguments)
        if args is None:
            return fail(str(err))
        log.update(query=args.get("query"), start_date=args.get("start_date"), end_date=args.get("end_date"))
        try:
            checked = check_arguments(self.fn, args, name=SEARCH_TOOL)
        except ToolArgumentError as exc:
            return fail(f"malformed arguments: {exc}")
        try:
            obs = self.fn(**checked)
        except (ValueError, TypeError) as exc:
            return fail(f"invalid arguments: {exc}")
        ids = [str(r["arxiv_id"]) for r in obs.get("results", [])]
        return ToolOutcome(
            observation_text(obs), {**log, "error": None, "result_ids": ids, "total_hits": int(obs["total_hits"])}
        )
