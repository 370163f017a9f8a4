"""Inspect's model API as the episode loops' backends (native tool calling).

The benchmark's loops keep their own protocol (caps, forced answers, nudges, the environment's
rules); this module only translates: OpenAI-format messages and tool schemas (what the loop
builds) to Inspect's ``ChatMessage`` and ``ToolInfo``, and Inspect's ``ModelOutput`` back to a
:class:`~rap_benchmark.agents.protocol.ModelTurn`. Every request goes through ``get_model().generate``, so it is logged as a model event
with its tool calls.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from inspect_ai.model import (
    ChatMessage,
    ChatMessageAssistant,
    ChatMessageSystem,
    ChatMessageTool,
    ChatMessageUser,
    GenerateConfig,
    Model,
)
from inspect_ai.tool import ToolCall as InspectToolCall
from inspect_ai.tool import ToolInfo, ToolParams

from rap_benchmark.agents.protocol import ModelTurn, Request, ToolCall, UnitContext
from rap_benchmark.llmclient.failures import Attempt, BackendFailure

FINISH_REASONS = {"stop": "stop", "tool_calls": "tool_calls", "max_tokens": "length", "model_length": "length"}
"""Inspect stop reasons as the finish reasons the episode loop knows (others pass through)."""


def tool_infos(schemas: Sequence[dict[str, Any]] | None) -> list[ToolInfo]:
    """OpenAI ``tools`` entries (what :func:`rap_benchmark.bm25.tool.tool_schema` derives from
    the Search tool's signature and docstring) as Inspect ``ToolInfo``."""
    out = []
    for schema in schemas or ():
        fn = schema["function"]
        out.append(
            ToolInfo(
                name=fn["name"],
                description=fn.get("description", ""),
                parameters=ToolParams.model_validate(fn.get("parameters") or {"type": "object", "properties": {}}),
            )
        )
    return out


def _arguments(raw: str) -> tuple[dict[str, Any], str | None]:
    try:
        value = json.loads(raw or "{}")
    except json.JSONDecodeError as exc:
        return {}, f"arguments are not JSON: {exc.msg}"
    return (value, None) if isinstance(value, dict) else ({}, "arguments are not a JSON object")


def chat_messages(messages: Sequence[dict[str, Any]]) -> list[ChatMessage]:
    """OpenAI-format chat messages as Inspect messages (tool calls and results kept)."""
    out: list[ChatMessage] = []
    names: dict[str, str] = {}
    for m in messages:
        role, content = m.get("role"), m.get("content") or ""
        if role == "system":
            out.append(ChatMessageSystem(content=content))
        elif role == "user":
            out.append(ChatMessageUser(content=content))
        elif role == "assistant":
            calls = []
            for c in m.get("tool_calls") or []:
                fn = c["function"]
                args, error = _arguments(fn.get("arguments") or "")
                names[c["id"]] = fn["name"]
                calls.append(InspectToolCall(id=c["id"], function=fn["name"], arguments=args, parse_error=error))
            out.append(ChatMessageAssistant(content=content, tool_calls=calls or None))
        elif role == "tool":
            call_id = m.get("tool_call_id") or ""
            out.append(ChatMessageTool(content=content, tool_call_id=call_id, function=names.get(call_id)))
        else:
            raise ValueError(f"unknown chat role {role!r}")
    return out


def raw_arguments(call: InspectToolCall) -> str:
    """The call's arguments as JSON text (empty when the model's text did not parse, so the
    episode loop records a malformed call)."""
    return "" if call.parse_error else json.dumps(call.arguments, ensure_ascii=False)


class InspectBackend:
    """A :class:`~rap_benchmark.agents.protocol.Backend` over an Inspect model: the agents'
    episode loop (:func:`rap_benchmark.agents.episode.run_episode`) runs unchanged on it.

    A model error (Inspect has already retried it) ends the episode as the loop ends any backend
    failure, and is kept in :attr:`error`: the solver re-raises it (:meth:`raise_error`) so that
    Inspect records the sample as errored, as it does for any other task, instead of the scorer
    counting an invalid answer.
    """

    def __init__(self, model: Model) -> None:
        self.model = model
        self.error: BaseException | None = None

    def raise_error(self) -> None:
        """Re-raise the model error that ended the episode, if one did."""
        if self.error is not None:
            raise self.error

    async def complete(self, request: Request, context: UnitContext | None) -> ModelTurn:
        tools = tool_infos(request.tools)
        choice = "none" if request.tool_choice == "none" else "auto"
        try:
            output = await self.model.generate(
                chat_messages(request.messages),
                tools=tools,
                tool_choice=choice if tools else None,
                config=GenerateConfig(
                    max_tokens=request.max_tokens, temperature=request.temperature, parallel_tool_calls=False
                ),
            )
        except Exception as exc:  # noqa: BLE001 - Inspect has retried; the solver re-raises it
            self.error = exc
            detail = f"{type(exc).__name__}: {exc}"
            raise BackendFailure(detail, (Attempt(1, False, detail, endpoint="inspect"),)) from exc
        if output.error:
            self.error = RuntimeError(f"model error: {output.error}")
            raise BackendFailure(output.error, (Attempt(1, False, output.error, endpoint="inspect"),))
        calls = tuple(ToolCall(c.id, c.function, raw_arguments(c)) for c in output.message.tool_calls or [])
        usage = output.usage
        return ModelTurn(
            content=output.message.text or None,
            tool_calls=calls,
            finish_reason=FINISH_REASONS.get(str(output.stop_reason), str(output.stop_reason)),
            response_model=output.model,
            prompt_tokens=int(usage.input_tokens) if usage else 0,
            completion_tokens=int(usage.output_tokens) if usage else 0,
            attempts=(Attempt(1, True, endpoint="inspect"),),
        )

    async def aclose(self) -> None:
        return None
