"""Model backends: any OpenAI-compatible endpoint, and a throttle around any backend.

:class:`OpenAIBackend` talks to vLLM's server, OpenAI, a llama.cpp server or anything else that
speaks ``/v1/chat/completions``, through the package's one OpenAI-compatible client
(:mod:`rap_benchmark.llmclient.endpoints`: the ``openai`` SDK, several endpoints, failover). HTTP
5xx, 429, timeouts and connection errors are retried with exponential backoff on the next
endpoint; every attempt is recorded. While requests are retried, :meth:`OpenAIBackend.retrying`
says so (the run's progress line shows it); once the endpoints stopped answering (``give_up``,
:class:`~rap_benchmark.llmclient.health.GiveUp`), every request raises
:class:`~rap_benchmark.llmclient.health.EndpointDown` and the run stops.

The in-process transformers backend lives in :mod:`rap_benchmark.agents.transformers_backend`.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from rap_benchmark.agents.protocol import EpisodeContext, ModelTurn, Request, ToolCall, wire_messages
from rap_benchmark.llmclient.endpoints import EndpointPool, call_with_failover, check_extra_body
from rap_benchmark.llmclient.failures import reasoning_of
from rap_benchmark.llmclient.health import GiveUp


def turn_from_response(response: Any) -> ModelTurn:
    """Convert an OpenAI ``ChatCompletion`` (or anything shaped like one) into a ModelTurn."""
    choice = response.choices[0]
    msg = choice.message
    calls = tuple(
        ToolCall(id=str(tc.id), name=str(tc.function.name), arguments=str(tc.function.arguments or ""))
        for tc in (getattr(msg, "tool_calls", None) or ())
    )
    usage = getattr(response, "usage", None)
    return ModelTurn(
        content=msg.content,
        tool_calls=calls,
        finish_reason=getattr(choice, "finish_reason", None),
        response_model=getattr(response, "model", None),
        prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
        completion_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
        reasoning=reasoning_of(msg),
    )


class OpenAIBackend:
    """An OpenAI-compatible chat endpoint (or several) with recorded retries.

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
        max_in_flight: int = 64,
        client_factory: Callable[[str], Any] | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        give_up: GiveUp | None = None,
    ) -> None:
        if max_tokens_param not in ("max_tokens", "max_completion_tokens"):
            raise ValueError("max_tokens_param must be max_tokens or max_completion_tokens")
        if max_attempts < 1:
            raise ValueError("max_attempts must be >= 1")
        self.pool = EndpointPool(
            base_urls,
            api_key=api_key,
            timeout_s=timeout_s,
            max_in_flight=max_in_flight,
            client_factory=client_factory,
            give_up=give_up,
        )
        self.urls = self.pool.urls
        self.model = model
        self.timeout_s = timeout_s
        self.max_attempts = max_attempts
        self.backoff_s = backoff_s
        self.backoff_max_s = backoff_max_s
        self.max_tokens_param = max_tokens_param
        self.extra_body = dict(extra_body or {})
        check_extra_body(self.extra_body, "the agent")
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
        response, attempts = await call_with_failover(
            self.pool, self._kwargs(request), max_attempts=self.max_attempts, backoff=self.backoff, sleep=self._sleep
        )
        return dataclasses.replace(turn_from_response(response), attempts=attempts)

    def retrying(self) -> str | None:
        """The endpoint, the last error and the next try while requests are retried, else None."""
        return self.pool.retrying()

    async def aclose(self) -> None:
        await self.pool.aclose()


class Throttled:
    """Wraps a backend and sleeps ``delay_s`` before every request (polite rate limiting)."""

    def __init__(self, inner: Any, delay_s: float) -> None:
        self.inner = inner
        self.delay_s = delay_s

    async def complete(self, request: Request, context: EpisodeContext) -> ModelTurn:
        await asyncio.sleep(self.delay_s)
        return await self.inner.complete(request, context)

    def retrying(self) -> str | None:
        return retry_note(self.inner)

    async def aclose(self) -> None:
        await self.inner.aclose()


def retry_note(backend: Any) -> str | None:
    """What ``backend`` says while its requests are retried (None: all is well, or it never retries)."""
    retrying = getattr(backend, "retrying", None)
    return retrying() if retrying is not None else None
