"""Model backends: any OpenAI-compatible endpoint, and a scripted backend for tests.

:class:`OpenAIBackend` talks to vLLM's server, OpenAI, a llama.cpp server or anything else that
speaks ``/v1/chat/completions`` through the ``openai`` AsyncOpenAI client. Several base URLs are
accepted and used round-robin (one attempt per endpoint in turn, so a retry goes to the next
server). HTTP 5xx, 429, timeouts and connection errors are retried with exponential backoff; every
attempt is recorded. The client's own retries are switched off so that none is hidden.

The in-process transformers backend lives in :mod:`rap_benchmark.agents.transformers_backend`.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from rap_benchmark.agents.protocol import (
    Attempt,
    BackendFailure,
    EpisodeContext,
    ModelTurn,
    Request,
    ToolCall,
    wire_messages,
)

RETRY_STATUSES = frozenset({408, 409, 425, 429, 500, 502, 503, 504})


def _as_urls(base_urls: str | Sequence[str]) -> list[str]:
    if isinstance(base_urls, str):
        base_urls = base_urls.split(",")
    urls = [u.strip() for u in base_urls if u.strip()]
    if not urls:
        raise ValueError("at least one base URL is needed")
    return urls


def _classify(exc: BaseException) -> tuple[bool, int | None, str]:
    """(retryable, HTTP status, short description) of a client exception."""
    import openai

    if isinstance(exc, openai.APITimeoutError | asyncio.TimeoutError | TimeoutError):
        return True, None, f"timeout: {exc}"
    if isinstance(exc, openai.APIStatusError):
        status = int(exc.status_code)
        return status in RETRY_STATUSES or status >= 500, status, f"HTTP {status}: {exc.message}"
    if isinstance(exc, openai.APIConnectionError):
        return True, None, f"connection error: {exc}"
    if isinstance(exc, openai.APIResponseValidationError):
        return True, None, f"malformed response: {exc}"
    return False, None, f"{type(exc).__name__}: {exc}"


def turn_from_response(response: Any) -> ModelTurn:
    """Convert an OpenAI ``ChatCompletion`` (or anything shaped like one) into a ModelTurn."""
    choice = response.choices[0]
    msg = choice.message
    calls = tuple(
        ToolCall(id=str(tc.id), name=str(tc.function.name), arguments=str(tc.function.arguments or ""))
        for tc in (getattr(msg, "tool_calls", None) or ())
    )
    extra = getattr(msg, "model_extra", None) or {}
    reasoning = getattr(msg, "reasoning_content", None) or extra.get("reasoning_content") or extra.get("reasoning")
    usage = getattr(response, "usage", None)
    return ModelTurn(
        content=msg.content,
        tool_calls=calls,
        finish_reason=getattr(choice, "finish_reason", None),
        response_model=getattr(response, "model", None),
        prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
        completion_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
        reasoning=str(reasoning) if reasoning else None,
    )


class OpenAIBackend:
    """An OpenAI-compatible chat endpoint (or several, round-robin) with recorded retries.

    ``client_factory(base_url)`` builds the AsyncOpenAI-shaped client for one endpoint (tests
    inject fakes); ``sleep`` is the backoff sleeper (tests inject a no-op).
    """

    def __init__(
        self,
        base_urls: str | Sequence[str],
        model: str,
        api_key: str | None = None,
        *,
        timeout_s: float = 600.0,
        max_attempts: int = 6,
        backoff_s: float = 1.0,
        backoff_max_s: float = 60.0,
        max_tokens_param: str = "max_tokens",
        extra_body: dict[str, Any] | None = None,
        client_factory: Callable[[str], Any] | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        if max_tokens_param not in ("max_tokens", "max_completion_tokens"):
            raise ValueError("max_tokens_param must be max_tokens or max_completion_tokens")
        if max_attempts < 1:
            raise ValueError("max_attempts must be >= 1")
        self.urls = _as_urls(base_urls)
        self.model = model
        self.timeout_s = timeout_s
        self.max_attempts = max_attempts
        self.backoff_s = backoff_s
        self.backoff_max_s = backoff_max_s
        self.max_tokens_param = max_tokens_param
        self.extra_body = dict(extra_body or {})
        key = api_key or os.environ.get("OPENAI_API_KEY") or "EMPTY"
        if client_factory is None:

            def client_factory(url: str) -> Any:
                from openai import AsyncOpenAI

                return AsyncOpenAI(base_url=url, api_key=key, max_retries=0, timeout=timeout_s)

        self._clients = [(url, client_factory(url)) for url in self.urls]
        self._cycle = itertools.cycle(range(len(self._clients)))
        self._sleep = sleep

    def backoff(self, attempt: int) -> float:
        """Seconds to wait after failed attempt ``attempt`` (1-based): backoff_s * 2^(attempt-1), capped."""
        return min(self.backoff_max_s, self.backoff_s * 2.0 ** (attempt - 1))

    def _kwargs(self, request: Request) -> dict[str, Any]:
        kwargs: dict[str, Any] = {
            "model": self.model,
            "messages": wire_messages(request.messages),
            "temperature": request.temperature,
            self.max_tokens_param: request.max_tokens,
        }
        if request.tools is not None:
            kwargs["tools"] = [dict(t) for t in request.tools]
            kwargs["tool_choice"] = request.tool_choice or "auto"
            kwargs["parallel_tool_calls"] = False
        if self.extra_body:
            kwargs["extra_body"] = dict(self.extra_body)
        return kwargs

    async def complete(self, request: Request, context: EpisodeContext) -> ModelTurn:
        attempts: list[Attempt] = []
        kwargs = self._kwargs(request)
        for n in range(1, self.max_attempts + 1):
            url, client = self._clients[next(self._cycle)]
            t0 = time.perf_counter()
            try:
                response = await asyncio.wait_for(client.chat.completions.create(**kwargs), timeout=self.timeout_s)
                turn = turn_from_response(response)
            except Exception as exc:  # noqa: BLE001 - every failure is classified and recorded
                retryable, status, desc = _classify(exc)
                attempts.append(Attempt(n, False, desc, status, time.perf_counter() - t0, url))
                if not retryable or n == self.max_attempts:
                    raise BackendFailure(desc, tuple(attempts)) from exc
                await self._sleep(self.backoff(n))
                continue
            attempts.append(Attempt(n, True, None, 200, time.perf_counter() - t0, url))
            return ModelTurn(
                content=turn.content,
                tool_calls=turn.tool_calls,
                finish_reason=turn.finish_reason,
                response_model=turn.response_model,
                prompt_tokens=turn.prompt_tokens,
                completion_tokens=turn.completion_tokens,
                attempts=tuple(attempts),
                reasoning=turn.reasoning,
            )
        raise AssertionError("unreachable")

    async def aclose(self) -> None:
        for _, client in self._clients:
            close = getattr(client, "close", None)
            if close is not None:
                result = close()
                if asyncio.iscoroutine(result):
                    await result


Script = Callable[[Request, EpisodeContext], ModelTurn]


class ScriptedBackend:
    """A deterministic backend driven by a function of (request, context): for tests and demos.

    The script may raise :class:`BackendFailure` to simulate an exhausted request. ``delay_s``
    sleeps before each turn (e.g. to make a run slow enough to interrupt).
    """

    def __init__(self, script: Script, *, model: str = "scripted", delay_s: float = 0.0) -> None:
        self.script = script
        self.model = model
        self.delay_s = delay_s
        self.calls = 0

    async def complete(self, request: Request, context: EpisodeContext) -> ModelTurn:
        self.calls += 1
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        return self.script(request, context)

    async def aclose(self) -> None:
        return None


class Throttled:
    """Wraps a backend and sleeps ``delay_s`` before every request (polite rate limiting)."""

    def __init__(self, inner: Any, delay_s: float) -> None:
        self.inner = inner
        self.delay_s = delay_s

    async def complete(self, request: Request, context: EpisodeContext) -> ModelTurn:
        await asyncio.sleep(self.delay_s)
        return await self.inner.complete(request, context)

    async def aclose(self) -> None:
        await self.inner.aclose()
