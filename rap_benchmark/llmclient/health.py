"""Are the endpoints answering? What a progress line says while requests are retried, and when a
caller gives up on endpoints that stopped answering.

A pool's :class:`Health` hears every attempt (:func:`~rap_benchmark.llmclient.endpoints.call_with_failover`):
a failed one sets the note a progress line shows (:meth:`Health.note`: the endpoint, the last
error, the next try in N s); any answer clears it and starts the count again. The pool gives up
(:class:`EndpointDown`, raised to every request then in flight or sent later) when, with no
answer in between, ``GiveUp.requests`` requests in a row failed every attempt, or the endpoints
have failed for ``GiveUp.seconds`` since the first failure (or will have by the next try: no
answer can come sooner). A run that gives up keeps what it finished, and the same command
resumes it.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

from rap_benchmark.core.errors import StoppedEarly
from rap_benchmark.llmclient.failures import Attempt, BackendFailure

NOTE_ERROR_CHARS = 120
"""The last error is cut to this many characters in a progress line."""


@dataclass(frozen=True, slots=True)
class GiveUp:
    """When to stop trying endpoints that stopped answering (whichever comes first)."""

    requests: int = 3
    """Requests in a row (no answer in between) whose every attempt failed: for a run, units."""
    seconds: float = 120.0
    """Seconds since the first failed attempt with no answer from any endpoint."""

    def __post_init__(self) -> None:
        if self.requests < 1 or not self.seconds > 0:
            raise ValueError(f"GiveUp needs requests >= 1 and seconds > 0, got {self.requests}, {self.seconds}")


class EndpointDown(BackendFailure, StoppedEarly):
    """The endpoints stopped answering (:class:`GiveUp`); the message names them and the last error."""


class Health:
    """Failed attempts and answers of one pool (see the module docstring)."""

    def __init__(self, give_up: GiveUp | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self.give_up = give_up or GiveUp()
        self._clock = clock
        self.failing_since: float | None = None  # the first failed attempt since the last answer
        self.failed_requests = 0  # requests that failed every attempt since the last answer
        self.failing: dict[str, None] = {}  # the endpoints that failed since the last answer, in order
        self.last_error: str | None = None
        self.next_try: float | None = None
        self.down: str | None = None  # the give-up message, once given up

    def answered(self) -> None:
        """An endpoint answered (even with a refusal): it is up, and the count starts again."""
        if self.down is None:
            self.failing_since, self.failed_requests, self.last_error, self.next_try = None, 0, None, None
            self.failing.clear()

    def attempt_failed(self, url: str, error: str, next_try: float | None) -> None:
        """An attempt failed with ``error``; the request tries again at ``next_try`` (monotonic
        seconds; None when it has no attempt left)."""
        now = self._clock()
        if self.failing_since is None:
            self.failing_since = now
        self.failing[url] = None
        self.last_error = error
        if next_try is not None:
            self.next_try = next_try
        since, limit = now - self.failing_since, self.give_up.seconds
        if since >= limit:
            self._give_up(f"no answer for {since:.0f} s")
        elif next_try is not None and next_try - self.failing_since >= limit:  # no answer can come sooner
            self._give_up(f"no answer for {since:.0f} s, and the next try comes after the {limit:.0f} s limit")

    def request_failed(self) -> None:
        """A request failed every attempt."""
        self.failed_requests += 1
        n = self.failed_requests
        if n >= self.give_up.requests:
            self._give_up(f"{n} request{'s' if n != 1 else ''} in a row failed every attempt")

    def _give_up(self, why: str) -> None:
        if self.down is None:
            self.down = f"{', '.join(self.failing)} stopped answering ({why}; last error: {self.last_error})"

    def check(self, attempts: tuple[Attempt, ...] = ()) -> None:
        """Raise :class:`EndpointDown` once the pool has given up."""
        if self.down is not None:
            raise EndpointDown(self.down, attempts)

    def note(self, not_before: float = 0.0) -> str | None:
        """The progress line's note while requests are retried (None while all is well);
        ``not_before``: no try comes before then (monotonic seconds: the endpoints rest)."""
        if self.last_error is None:
            return None
        error = (
            self.last_error if len(self.last_error) <= NOTE_ERROR_CHARS else self.last_error[:NOTE_ERROR_CHARS] + "..."
        )
        when = ""
        if self.next_try is not None:
            wait = max(self.next_try, not_before) - self._clock()
            when = f"; next try in {math.ceil(wait)} s" if wait > 0 else "; trying again"
        return f"retrying {', '.join(self.failing)} ({error}){when}"


@contextlib.asynccontextmanager
async def retry_notes(
    note: Callable[[], str | None] | None, show: Callable[[str], None], every_s: float = 0.5
) -> AsyncIterator[None]:
    """While the body runs, ``show(note() or "")`` whenever the note changes (a progress bar's
    ``set_postfix_str``); ``note`` None: nothing to show."""
    if note is None:
        yield
        return

    async def watch() -> None:
        shown = ""
        while True:
            await asyncio.sleep(every_s)
            text = note() or ""
            if text != shown:
                shown = text
                show(text)

    task = asyncio.get_running_loop().create_task(watch())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def failure_line(exc: BackendFailure) -> str:
    """A request's failure in words, naming the endpoint of its last attempt."""
    if isinstance(exc, EndpointDown):
        return str(exc)
    url = next((a.endpoint for a in reversed(exc.attempts) if a.endpoint), None)
    n = len(exc.attempts)
    where = f" from {url}" if url else ""
    return f"no answer{where} after {n} tr{'ies' if n != 1 else 'y'} (last error: {exc})"
