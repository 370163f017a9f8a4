"""A deterministic agent backend driven by a function of (request, context), for the agent tests.

The script may raise :class:`BackendFailure` to simulate an exhausted request. ``delay_s`` sleeps
before each turn (e.g. to make a run slow enough to interrupt).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from rap_benchmark.agents.protocol import EpisodeContext, ModelTurn, Request

Script = Callable[[Request, EpisodeContext], ModelTurn]


class ScriptedBackend:
    """Each turn is ``script(request, context)``; ``calls`` counts them."""

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
