"""The environment's refusals, one class per reason; ``status`` is the HTTP code the server sends.

The HTTP client maps a response's ``error`` name back to the same class, so an agent loop sees the
same exceptions in process and over HTTP.
"""

from __future__ import annotations


class EnvError(Exception):
    """Base of the environment's refusals."""

    status = 400


class UnknownTask(EnvError):
    """No such task (or not one of the split this server's mode serves)."""

    status = 404


class UnknownSession(EnvError):
    """No such session: never started, deleted, expired, or started with another API key."""

    status = 404


class SessionClosed(EnvError):
    """The session already has its prediction; nothing changes."""

    status = 409


class AlreadyScored(EnvError):
    """Evaluation mode: this API key already has its one scored session for this task."""

    status = 409


class CallLimit(EnvError):
    """The session used its web-call budget; only ``submit_prediction`` is still accepted."""

    status = 429


class Unauthorized(EnvError):
    """A missing or unknown API key where the server requires one."""

    status = 401


class PayloadTooLarge(EnvError):
    """A request body above the server's limit (it is not read, and nothing changes)."""

    status = 413
