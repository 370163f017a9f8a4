"""The contract between the episode loop and a model backend.

A backend answers one chat request at a time: it gets the messages so far (OpenAI chat format),
the tool schemas on offer (or None), the tool choice (``auto`` while Search is open, ``none`` once
the call budget is spent) and a completion cap, and returns one :class:`ModelTurn`: either tool
calls or text. Every HTTP (or in-process) attempt is recorded as an :class:`Attempt`; when all
attempts fail the backend raises :class:`BackendFailure` carrying them, so the unit is recorded as
invalid with its attempts instead of being lost.

The context (:class:`EpisodeContext` for a RAP unit, :class:`CiteCastContext` for a CiteCast task)
tells a backend which unit it serves. LLM backends ignore it; the reference agents
(rap_benchmark.agents.reference, rap_benchmark.agents.citecast) plan their calls from it.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from rap_benchmark.core.records import Codebook, Condition, Task
from rap_benchmark.core.spec import BenchmarkSpec
from rap_benchmark.llmclient.failures import Attempt
from rap_benchmark.tools.text import TextProtocol

Message = dict[str, Any]

#: Keys of a stored message that are sent back to a server (the rest, e.g. reasoning, stay local).
WIRE_KEYS = ("role", "content", "tool_calls", "tool_call_id", "name")


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One tool call as the model emitted it; ``arguments`` is the raw (possibly malformed) JSON text."""

    id: str
    name: str
    arguments: str

    def to_message(self) -> dict[str, Any]:
        return {"id": self.id, "type": "function", "function": {"name": self.name, "arguments": self.arguments}}


@dataclass(frozen=True, slots=True)
class ModelTurn:
    """One assistant turn: tool calls or text, with usage and every attempt it took."""

    content: str | None
    tool_calls: tuple[ToolCall, ...] = ()
    finish_reason: str | None = "stop"
    response_model: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    attempts: tuple[Attempt, ...] = (Attempt(1, True),)
    reasoning: str | None = None  # provider-visible reasoning text, kept locally, never sent back
    prefill: str | None = None  # text the backend wrote into the turn before the model continued


@dataclass(frozen=True, slots=True)
class Request:
    messages: tuple[Message, ...]
    tools: tuple[dict[str, Any], ...] | None  # OpenAI "tools" JSON, None when no tools are offered
    tool_choice: str | None  # "auto", "none" or None (no tools)
    max_tokens: int
    temperature: float = 0.0
    text_protocol: TextProtocol | None = None  # how the tools read as tags, for models without native tool calls

    def text_messages(self) -> list[dict[str, str]]:
        """The messages for a chat template without tools (``rap_benchmark.tools.text``)."""
        if self.text_protocol is None:
            return [{"role": str(m["role"]), "content": str(m.get("content") or "")} for m in self.messages]
        return self.text_protocol.render(self.messages, tools_offered=self.tools is not None)

    def text_call(self, text: str) -> ToolCall | None:
        """The first tool tag of a text reply to this request as a :class:`ToolCall` (None when no
        tool is offered or the reply holds no complete tag); ids count the calls so far."""
        if self.tools is None or self.text_protocol is None:
            return None
        parsed = self.text_protocol.parse(text)
        if parsed is None:
            return None
        return ToolCall(id=f"call_{self.n_prior_calls}", name=parsed.tool, arguments=parsed.arguments_json())

    @property
    def n_prior_calls(self) -> int:
        """Assistant turns with tool calls so far (what a backend numbers its next call id by)."""
        return sum(1 for m in self.messages if m.get("role") == "assistant" and m.get("tool_calls"))

    @property
    def is_answer_turn(self) -> bool:
        """Whether the request can only be answered with the final text answer (no tool call possible)."""
        return self.tools is None or self.tool_choice == "none"


@dataclass(frozen=True, slots=True)
class EpisodeContext:
    """Which unit a request belongs to (never holds the target)."""

    model: str
    field_id: str
    origin: dt.date
    condition: Condition
    task: Task
    codebook: Codebook
    spec: BenchmarkSpec
    variant: str = "native"
    extra: dict[str, Any] = field(default_factory=dict, compare=False)


@dataclass(frozen=True, slots=True)
class CiteCastContext:
    """Which CiteCast task a request belongs to (a task id: paper, band and target stay in the
    environment)."""

    model: str
    task_id: str
    split: str
    variant: str = "citecast"


UnitContext = EpisodeContext | CiteCastContext


def tool_call_turn(n: int, name: str, arguments: dict[str, Any], model: str) -> ModelTurn:
    """A turn that calls one tool (id ``call_<n>``), as a reference or scripted backend emits it."""
    call = ToolCall(f"call_{n}", name, json.dumps(arguments, ensure_ascii=False))
    return ModelTurn(content=None, tool_calls=(call,), finish_reason="tool_calls", response_model=model)


@runtime_checkable
class Backend(Protocol):
    """Anything that can answer one chat request."""

    async def complete(self, request: Request, context: UnitContext) -> ModelTurn: ...

    async def aclose(self) -> None: ...


def wire_messages(messages: list[Message] | tuple[Message, ...]) -> list[Message]:
    """Messages as sent to a server: only the standard chat keys."""
    return [{k: m[k] for k in WIRE_KEYS if k in m} for m in messages]
