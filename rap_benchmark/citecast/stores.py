"""A session store by URL: SQLite (a file, or memory) from :mod:`.sessions`, Redis from
:mod:`.redis_sessions` (imported only when asked for: the ``redis`` client is optional)."""

from __future__ import annotations

from pathlib import Path

from rap_benchmark.citecast.sessions import DEFAULT_TTL_S, SessionStore, SqliteStore
from rap_benchmark.core.errors import InputError


def open_store(url: str | Path | None, *, ttl_s: float = DEFAULT_TTL_S) -> SessionStore:
    """``redis://host:port/db`` (optionally ``?prefix=name:``), ``sqlite:///path``, a file path, or
    None (in memory, one process)."""
    if url is None:
        return SqliteStore(None, ttl_s=ttl_s)
    text = str(url)
    if text.startswith(("redis://", "rediss://", "unix://")):
        from rap_benchmark.citecast.redis_sessions import RedisStore

        return RedisStore.from_url(text, ttl_s=ttl_s)
    if text.startswith("sqlite://"):
        text = text.removeprefix("sqlite://")
    if "://" in text:
        raise InputError(f"unknown session store {text[:200]!r} (expected a file path, sqlite:///path or redis://...)")
    return SqliteStore(text, ttl_s=ttl_s)
