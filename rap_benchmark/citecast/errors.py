"""The environment's refusals, one class per reason; ``status`` is the HTTP code the server sends.

The HTTP client maps a response's ``error`` name back to the same class, so an agent loop sees the
same exceptions in process and over HTTP.
"""

from __future__ import annotations


class EnvError(Exception):
    """Base of the environment's refusals; a subclass names its code: ``class X(EnvError, status=404)``."""

    status = 400

    def __init_subclass__(cls, status: int | None = None, **kw: object) -> None:
        super().__init_subclass__(**kw)
        if status is not None:
            cls.status = status


class UnknownTask(EnvError, status=404):
    """No such task (or not one of the split this server's mode serves)."""


class UnknownSession(EnvError, status=404):
    """No such session: never started, deleted, expired, or started with another API key."""


class SessionClosed(EnvError, status=409):
    """The session already has its prediction; nothing changes."""


class AlreadyScored(EnvError, status=409):
    """Evaluation mode: this API key already has its one scored session for this task."""


class CallLimit(EnvError, status=429):
    """The session used its web-call budget; only ``submit_prediction`` is still accepted."""


class Unauthorized(EnvError, status=401):
    """A missing or unknown API key where the server requires one."""


class PayloadTooLarge(EnvError, status=413):
    """A request body above the server's limit (it is not read, and nothing changes)."""
