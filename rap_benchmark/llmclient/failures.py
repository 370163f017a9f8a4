"""What a request's attempts left behind: one :class:`Attempt` per try, and
:class:`BackendFailure` when every try failed (shared by the agents' backends and the LLM instrument)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rap_benchmark.core.serial import to_dict


@dataclass(frozen=True, slots=True)
class Attempt:
    """One request attempt: its outcome, HTTP status if any, and latency."""

    n: int
    ok: bool
    error: str | None = None
    status: int | None = None
    latency_s: float = 0.0
    endpoint: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {**to_dict(self), "latency_s": round(self.latency_s, 6)}


class BackendFailure(RuntimeError):
    """Every attempt of a request failed (or a non-retryable error happened)."""

    def __init__(self, message: str, attempts: tuple[Attempt, ...]):
        super().__init__(message)
        self.attempts = attempts


def reasoning_of(message: Any) -> str | None:
    """A chat message's reasoning: vLLM's reasoning parsers send ``reasoning_content`` (newer
    servers ``reasoning``); the SDK keeps unknown fields in ``model_extra``."""
    extra = getattr(message, "model_extra", None) or {}
    value = getattr(message, "reasoning_content", None) or extra.get("reasoning_content") or extra.get("reasoning")
    return str(value) if value else None
