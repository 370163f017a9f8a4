"""The one OpenAI-compatible client: several endpoints, failover, backoff (the ``openai`` SDK).

Agents (:class:`~rap_benchmark.agents.backends.OpenAIBackend`) and the LLM instrument
(:class:`~rap_benchmark.pipeline.instrument.llm.client.LLMClient`) send their chat requests
through an :class:`EndpointPool`:

* an endpoint is a base URL (``URL``, any model) or ``MODEL=URL`` (a vLLM server serves only
  MODEL); each has its own ``openai.AsyncOpenAI`` client (the SDK's own retries off, so that
  none is hidden; aiohttp transport when the SDK offers it: 1.3 ms of CPU a request, httpx 3.3);
* at most ``max_in_flight`` requests are open per endpoint; a request goes to the least loaded
  open endpoint that serves its model (ties in turn, so a sequential caller goes round-robin);
* :func:`call_with_failover`: HTTP 5xx, 408/409/425/429, timeouts, refused connections and
  malformed bodies are retried on the next endpoint after a backoff; an endpoint that fails three
  times in a row rests (1 s, doubling, at most 30 s); any other HTTP 4xx is the request's own
  fault and is not retried. Every attempt is recorded;
* the pool's :class:`~rap_benchmark.llmclient.health.Health` hears every attempt: the note a
  progress line shows while requests are retried, and the give-up (``EndpointDown``) once
  the endpoints stopped answering.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any
from urllib.parse import urlsplit

from rap_benchmark.core.errors import InputError
from rap_benchmark.llmclient.failures import Attempt, BackendFailure
from rap_benchmark.llmclient.health import GiveUp, Health

# the body keys a caller sets itself: --extra-body may add keys, never replace one of these
RESERVED_BODY_KEYS = frozenset(
    {"model", "messages", "temperature", "max_tokens", "max_completion_tokens", "stream", "n"}
    | {"tools", "tool_choice", "parallel_tool_calls"}
)


def check_extra_body(extra: dict[str, Any], setter: str) -> None:
    """Refuse extra body keys that would replace one ``setter`` sets itself (InputError)."""
    clash = sorted(RESERVED_BODY_KEYS & set(extra))
    if clash:
        raise InputError(f"--extra-body may not set {', '.join(clash)} ({setter} sets them)")


RETRY_STATUSES = frozenset({408, 409, 425, 429, 500, 502, 503, 504})
FAILURES_BEFORE_REST = 3
REST_S = (1.0, 30.0)  # first and longest rest of a failing endpoint


def retryable_status(status: int) -> bool:
    """Whether a reply with HTTP ``status`` is worth asking again (a 5xx, a timeout, a conflict or a
    rate limit); any other 4xx refuses the request itself. Batch output lines follow the same rule."""
    return status in RETRY_STATUSES or status >= 500


class Refused(BackendFailure):
    """An endpoint refused the request (HTTP 4xx other than the retryable ones)."""

    def __init__(self, message: str, attempts: tuple[Attempt, ...], status: int, url: str) -> None:
        super().__init__(message, attempts)
        self.status = status
        self.url = url


def parse_endpoint(text: str) -> tuple[str | None, str]:
    """``URL`` (serves any model) or ``MODEL=URL`` (serves only MODEL) -> (model or None, URL)."""
    text = text.strip()
    if "=" in text:
        model, url = text.split("=", 1)
        if url.startswith(("http://", "https://")) and model:
            return model, url
    return None, text


def check_url(url: str) -> str:
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InputError(f"--base-url: not an http(s) URL: {url!r}")
    return url.strip().rstrip("/")


def classify(exc: BaseException) -> tuple[bool, int | None, str]:
    """(retryable, HTTP status, short description) of a client exception."""
    import openai

    refused = _connection_error(exc)
    if refused is not None and isinstance(exc, openai.APIConnectionError):  # the SDK calls some of them timeouts
        return True, None, refused
    if isinstance(exc, openai.APITimeoutError | asyncio.TimeoutError | TimeoutError):
        return True, None, f"timeout: {exc}"
    if isinstance(exc, openai.APIStatusError):
        status = int(exc.status_code)
        return retryable_status(status), status, f"HTTP {status}: {_status_message(exc)}"
    if isinstance(exc, openai.APIConnectionError):
        return True, None, f"connection error: {exc}"
    if isinstance(exc, openai.APIResponseValidationError | ValueError):  # a torn or malformed body
        return True, None, f"malformed response: {type(exc).__name__}: {str(exc)[:200]}"
    return False, None, f"{type(exc).__name__}: {exc}"


def _connection_error(exc: BaseException) -> str | None:
    """``connection refused: ...`` when the cause of ``exc`` is an OS connection error (the SDK's
    aiohttp transport reports a refused connection as ``Request timed out.``)."""
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        if isinstance(cause, ConnectionError):
            kind = {ConnectionRefusedError: "connection refused", ConnectionResetError: "connection reset"}
            return f"{kind.get(type(cause), 'connection error')}: {cause.strerror or cause}"
        cause = cause.__cause__ or cause.__context__
    return None


def _status_message(exc: Any) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        text = inner.get("message") if isinstance(inner, dict) else None
        if isinstance(text, str):
            return " ".join(text.split())[:300]
    return " ".join(str(getattr(exc, "message", exc)).split())[:300]


def default_client(url: str, api_key: str | None, timeout_s: float, max_in_flight: int) -> Any:
    """An ``AsyncOpenAI`` for one endpoint: no hidden retries, aiohttp transport when available."""
    import openai

    transport = None
    aio = getattr(openai, "DefaultAioHttpClient", None)
    if aio is not None:
        try:
            import httpx

            limits = httpx.Limits(max_connections=max_in_flight, max_keepalive_connections=max_in_flight)
            transport = aio(timeout=timeout_s, limits=limits)
        except (RuntimeError, ImportError, TypeError):  # the SDK without its aiohttp extra
            transport = None
    return openai.AsyncOpenAI(
        base_url=url,
        api_key=api_key or os.environ.get("OPENAI_API_KEY") or "EMPTY",
        max_retries=0,
        timeout=timeout_s,
        http_client=transport,  # the SDK's keyword; no second HTTP client in the package
    )


class EndpointPool:
    """Endpoints, their clients and their load (see the module docstring).

    ``client_factory(url)`` builds the AsyncOpenAI-shaped client of one endpoint (tests inject
    fakes); it must offer ``chat.completions.create(**kwargs)``.
    """

    def __init__(
        self,
        base_urls: str | Sequence[str],
        *,
        api_key: str | None = None,
        timeout_s: float = 600.0,
        max_in_flight: int = 64,
        client_factory: Callable[[str], Any] | None = None,
        give_up: GiveUp | None = None,
    ) -> None:
        if isinstance(base_urls, str):
            base_urls = base_urls.split(",")
        bound = [parse_endpoint(u) for u in base_urls if u.strip()]
        if not bound:
            raise ValueError("at least one base URL is needed")
        self.urls = [check_url(u) if client_factory is None else u.strip() for _, u in bound]
        self.serves = [m for m, _ in bound]  # the model an endpoint is bound to (None: any)
        self.timeout_s = timeout_s
        self._factory = client_factory or (lambda url: default_client(url, api_key, timeout_s, max_in_flight))
        self._clients: list[Any] = [None] * len(self.urls)  # made on first use, inside the event loop
        self._free = [max_in_flight] * len(self.urls)
        self._failures = [0] * len(self.urls)
        self._rest_until = [0.0] * len(self.urls)
        self._turn = itertools.count()
        self._slot: asyncio.Condition | None = None
        self.health = Health(give_up)

    def retrying(self) -> str | None:
        """What a progress line says while requests are retried (None while all is well)."""
        return self.health.note(not_before=min(self._rest_until))

    def next_try(self, model: str, wait_s: float) -> float:
        """When a request for ``model`` that waits ``wait_s`` seconds is sent again (monotonic
        seconds): then, or when the first of its endpoints ends its rest, whichever is later."""
        rests = [self._rest_until[i] for i in self.endpoints_for(model)]
        return max(time.monotonic() + wait_s, min(rests, default=0.0))

    def client(self, i: int) -> Any:
        if self._clients[i] is None:
            self._clients[i] = self._factory(self.urls[i])
        return self._clients[i]

    def endpoints_for(self, model: str) -> list[int]:
        """The endpoints that may serve ``model``: those bound to it, else the unbound ones."""
        bound = [i for i, m in enumerate(self.serves) if m == model]
        return bound or [i for i, m in enumerate(self.serves) if m is None]

    async def acquire(self, model: str) -> int:
        mine = self.endpoints_for(model)
        if not mine:
            raise InputError(f"no --base-url serves model {model!r} (bind one with {model}=URL)")
        if self._slot is None:
            self._slot = asyncio.Condition()
        async with self._slot:
            while True:
                now = time.monotonic()
                open_ = [i for i in mine if self._rest_until[i] <= now and self._free[i] > 0]
                if open_:
                    most = max(self._free[i] for i in open_)
                    tied = [i for i in open_ if self._free[i] == most]
                    i = tied[next(self._turn) % len(tied)]
                    self._free[i] -= 1
                    return i
                resting = [self._rest_until[i] for i in mine if self._rest_until[i] > now]
                wait = (min(resting) - now) if resting and all(self._free[i] > 0 for i in mine) else None
                try:
                    await asyncio.wait_for(self._slot.wait(), timeout=wait)
                except TimeoutError:
                    pass

    async def release(self, i: int, ok: bool) -> None:
        assert self._slot is not None
        async with self._slot:
            self._free[i] += 1
            if ok:
                self._failures[i] = 0
            else:
                self._failures[i] += 1
                if self._failures[i] >= FAILURES_BEFORE_REST:
                    k = self._failures[i] - FAILURES_BEFORE_REST
                    self._rest_until[i] = time.monotonic() + min(REST_S[0] * 2**k, REST_S[1])
            self._slot.notify_all()

    async def aclose(self) -> None:
        for client in self._clients:
            close = getattr(client, "close", None)
            if close is not None:
                result = close()
                if asyncio.iscoroutine(result):
                    await result
        self._clients = [None] * len(self.urls)
        self._slot = None  # a later event loop makes its own clients and condition


async def call_with_failover(
    pool: EndpointPool,
    kwargs: dict[str, Any],
    *,
    max_attempts: int,
    backoff: Callable[[int], float],
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> tuple[Any, tuple[Attempt, ...]]:
    """(response, attempts) of ``chat.completions.create(**kwargs)`` through ``pool``.

    Raises :class:`Refused` for a refused request (not retried), :class:`BackendFailure` when
    every one of ``max_attempts`` attempts failed, and ``health.EndpointDown`` once the pool gave up
    on its endpoints (this request's failure may be the one that made it give up)."""
    attempts: list[Attempt] = []
    health = pool.health
    for n in range(1, max_attempts + 1):
        health.check(tuple(attempts))
        i = await pool.acquire(kwargs["model"])
        url = pool.urls[i]
        t0 = time.perf_counter()
        ok = False
        try:
            response = await asyncio.wait_for(pool.client(i).chat.completions.create(**kwargs), pool.timeout_s)
            if not getattr(response, "choices", None):
                raise ValueError("a chat.completion without choices")
            ok = True
        except Exception as exc:  # noqa: BLE001 - every failure is classified and recorded
            retryable, status, desc = classify(exc)
            attempts.append(Attempt(n, False, desc, status, time.perf_counter() - t0, url))
            if not retryable:
                ok = True  # the endpoint answered: it is not failing
                if status is not None:
                    health.answered()
                    raise Refused(desc, tuple(attempts), status, url) from exc
                raise BackendFailure(desc, tuple(attempts)) from exc
            failure = exc
        finally:
            await pool.release(i, ok)  # before next_try: a failing endpoint may rest now
        if ok:
            health.answered()
            attempts.append(Attempt(n, True, None, 200, time.perf_counter() - t0, url))
            return response, tuple(attempts)
        last, wait = n == max_attempts, backoff(n)
        health.attempt_failed(url, desc, None if last else pool.next_try(kwargs["model"], wait))
        if last:
            health.request_failed()
        health.check(tuple(attempts))
        if last:
            raise BackendFailure(desc, tuple(attempts)) from failure
        await sleep(wait)
    raise AssertionError("unreachable")
