"""A scripted stand-in for ``openai.AsyncOpenAI`` in tests (the package has one real client, llmclient/endpoints.py).

:class:`FakeOpenAIClient` is shaped like ``openai.AsyncOpenAI`` where the backend touches it
(``client.chat.completions.create(**kwargs)``, ``close()``); each response comes from
``script(request_kwargs)``, which returns a chat.completion body (see :func:`completion`) or an
exception to raise (e.g. ``openai.InternalServerError``). Responses are validated into the real
``openai`` response types, so the backend's parsing is exercised exactly as with a server.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def completion(
    *,
    content: str | None = None,
    tool_calls: list[tuple[str, str]] | None = None,
    finish: str | None = None,
    model: str = "served-model",
) -> dict[str, Any]:
    """A chat.completion response body."""
    msg: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        msg["tool_calls"] = [
            {"id": f"call_{i}", "type": "function", "function": {"name": name, "arguments": args}}
            for i, (name, args) in enumerate(tool_calls)
        ]
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "message": msg, "finish_reason": finish or ("tool_calls" if tool_calls else "stop")}],
        "usage": {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110},
    }


class FakeCompletions:
    def __init__(self, script: Callable[[dict[str, Any]], Any]) -> None:
        self.script = script
        self.requests: list[dict[str, Any]] = []

    async def create(self, **kwargs: Any) -> Any:
        from openai.types.chat import ChatCompletion

        self.requests.append(kwargs)
        out = self.script(kwargs)
        if isinstance(out, BaseException):
            raise out
        return ChatCompletion.model_validate(out)


class FakeOpenAIClient:
    """AsyncOpenAI-shaped client whose responses come from ``script(request_kwargs)``."""

    def __init__(self, script: Callable[[dict[str, Any]], Any]) -> None:
        self.completions = FakeCompletions(script)
        self.chat = type("Chat", (), {"completions": self.completions})()

    async def close(self) -> None:
        return None
