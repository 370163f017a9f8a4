"""A Redis session store, so N servers behind any HTTP load balancer share their sessions.

Same contract as :class:`~rap_benchmark.citecast.sessions.SqliteStore`, every change one atomic
Lua script. A session is a hash ``<prefix>s:<sid>`` whose TTL each call resets; a scored claim is
a hash ``<prefix>scored:<key>:<task_id>`` without expiry, listed in the set ``<prefix>scored``.
One Redis primary (the scripts build key names, which Redis Cluster does not allow).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qs, urlsplit, urlunsplit

from rap_benchmark.citecast.sessions import DEFAULT_TTL_S, Outcome, ScoredResult, SessionState
from rap_benchmark.core.errors import InputError

DEFAULT_PREFIX = "citecast:"
_SEP = "\x1f"

# KEYS: session, claim, claim index. ARGV: task, key, scored, ttl, now, sid
_CREATE = """
if ARGV[3] == '1' then
  if redis.call('HSETNX', KEYS[2], 'sid', ARGV[6]) == 0 then return 0 end
  redis.call('HSET', KEYS[2], 'started', ARGV[5])
  redis.call('SADD', KEYS[3], ARGV[2] .. '\\31' .. ARGV[1])
end
redis.call('HSET', KEYS[1], 'task', ARGV[1], 'key', ARGV[2], 'scored', ARGV[3], 'n', 0, 'done', 0)
redis.call('EXPIRE', KEYS[1], ARGV[4])
return 1
"""
# KEYS: session. ARGV: key, max_calls, ttl
_RESERVE = """
local v = redis.call('HMGET', KEYS[1], 'key', 'done', 'n')
if v[1] ~= ARGV[1] then return 0 end
if v[2] == '1' then return 2 end
if tonumber(v[3]) >= tonumber(ARGV[2]) then return 3 end
redis.call('HINCRBY', KEYS[1], 'n', 1)
redis.call('EXPIRE', KEYS[1], ARGV[3])
return 1
"""
# KEYS: session. ARGV: key, prediction, justification, ttl, now, claim prefix, sid
_SUBMIT = """
local v = redis.call('HMGET', KEYS[1], 'key', 'done', 'scored', 'task')
if v[1] ~= ARGV[1] then return {0, ''} end
if v[2] == '1' then return {2, ''} end
redis.call('HSET', KEYS[1], 'done', 1, 'p', ARGV[2], 'j', ARGV[3])
redis.call('EXPIRE', KEYS[1], ARGV[4])
if v[3] == '1' then
  local claim = ARGV[6] .. ARGV[1] .. ':' .. v[4]
  if redis.call('HGET', claim, 'sid') == ARGV[7] then
    redis.call('HSET', claim, 'p', ARGV[2], 'j', ARGV[3], 'submitted', ARGV[5])
  end
end
return {1, v[4]}
"""
_DELETE = """
local v = redis.call('HGET', KEYS[1], 'key')
if v ~= ARGV[1] then return 0 end
return redis.call('DEL', KEYS[1])
"""
_OUTCOMES = {0: Outcome.UNKNOWN, 1: Outcome.OK, 2: Outcome.DONE, 3: Outcome.LIMIT}


class RedisStore:
    """Sessions in Redis (see the module docstring); safe to share between processes and machines."""

    def __init__(
        self,
        client,  # noqa: ANN001 - a redis.Redis
        *,
        ttl_s: float = DEFAULT_TTL_S,
        prefix: str = DEFAULT_PREFIX,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.redis = client
        self.ttl_s = float(ttl_s)
        self.prefix = prefix
        self.clock = clock
        self._ttl = max(1, math.ceil(self.ttl_s))
        self._create = client.register_script(_CREATE)
        self._reserve = client.register_script(_RESERVE)
        self._submit = client.register_script(_SUBMIT)
        self._delete = client.register_script(_DELETE)

    @classmethod
    def from_url(cls, url: str, *, ttl_s: float = DEFAULT_TTL_S) -> RedisStore:
        """``redis://host:port/db``; a ``prefix`` query parameter namespaces the keys."""
        try:
            import redis
        except ImportError as exc:
            raise InputError(
                f"a {url.split(':')[0]}:// session store needs the redis client: pip install 'rap_benchmark[redis]'"
            ) from exc

        parts = urlsplit(url)
        query = parse_qs(parts.query)
        prefix = query.pop("prefix", [DEFAULT_PREFIX])[0]
        rest = "&".join(f"{k}={v}" for k, vs in query.items() for v in vs)
        client = redis.Redis.from_url(urlunsplit(parts._replace(query=rest)), decode_responses=True)
        return cls(client, ttl_s=ttl_s, prefix=prefix)

    def _s(self, session_id: str) -> str:
        return f"{self.prefix}s:{session_id}"

    def create(self, session_id: str, task_id: str, key: str, *, scored: bool) -> bool:
        claim = f"{self.prefix}scored:{key}:{task_id}"
        args = [task_id, key, int(scored), self._ttl, repr(self.clock()), session_id]
        return bool(self._create(keys=[self._s(session_id), claim, f"{self.prefix}scored"], args=args))

    def reserve_call(self, session_id: str, key: str, max_calls: int) -> Outcome:
        return _OUTCOMES[int(self._reserve(keys=[self._s(session_id)], args=[key, max_calls, self._ttl]))]

    def submit(self, session_id: str, key: str, prediction: int, justification: str) -> tuple[Outcome, str | None]:
        args = [key, prediction, justification, self._ttl, repr(self.clock()), f"{self.prefix}scored:", session_id]
        code, task_id = self._submit(keys=[self._s(session_id)], args=args)
        return _OUTCOMES[int(code)], task_id or None

    def get(self, session_id: str, key: str) -> SessionState | None:
        h = self.redis.hgetall(self._s(session_id))
        if not h or h.get("key") != key:
            return None
        scored, done = h["scored"] == "1", h["done"] == "1"
        return SessionState(session_id, h["task"], key, scored, int(h["n"]), done, _opt(h, "p", int))

    def delete(self, session_id: str, key: str) -> bool:
        return bool(self._delete(keys=[self._s(session_id)], args=[key]))

    def expire(self) -> int:
        return 0  # Redis drops idle sessions itself (their keys carry the TTL)

    def count(self) -> int:
        return sum(1 for _ in self.redis.scan_iter(match=f"{self.prefix}s:*", count=1000))

    def results(self) -> list[ScoredResult]:
        members = sorted(self.redis.smembers(f"{self.prefix}scored"))
        pipe = self.redis.pipeline(transaction=False)
        pairs = [m.split(_SEP, 1) for m in members]
        for key, task_id in pairs:
            pipe.hgetall(f"{self.prefix}scored:{key}:{task_id}")
        return [
            ScoredResult(
                key, task, h["sid"], float(h["started"]), _opt(h, "p", int), h.get("j"), _opt(h, "submitted", float)
            )
            for (key, task), h in zip(pairs, pipe.execute(), strict=True)
        ]

    def close(self) -> None:
        self.redis.close()


def _opt(h: dict[str, str], name: str, cast: type) -> Any:
    """A hash field that may be absent (None), as ``cast``."""
    return cast(h[name]) if name in h else None
