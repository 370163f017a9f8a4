"""Session stores: where every server worker (and every server, with Redis) keeps session state.

A session is one row: task, API key name, scored or not, web calls used and, once submitted, the
prediction. Every change is one atomic statement, so any worker serves any session and two racing
workers cannot both win a submission: :meth:`SessionStore.reserve_call` takes a call only from a
live, unfinished session with budget left; :meth:`SessionStore.submit` records only the first
prediction; a scored session claims ``(key, task)`` when created, and the claim (with its
prediction) outlives the session for ``rap citecast score``. The reward is not stored (a function
of prediction and target). Sessions expire ``ttl_s`` seconds after their last call.
:class:`SqliteStore` serves one machine's workers;
:class:`~rap_benchmark.citecast.redis_sessions.RedisStore` several machines.
"""

from __future__ import annotations

import enum
import os
import sqlite3
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

DEFAULT_TTL_S = 3600.0


class Outcome(enum.Enum):
    """What a reservation or a submission found."""

    OK = "ok"
    UNKNOWN = "unknown"  # no such session for this key (never started, deleted or expired)
    DONE = "done"  # already submitted
    LIMIT = "limit"  # web-call budget used up


@dataclass(frozen=True, slots=True)
class SessionState:
    session_id: str
    task_id: str
    key: str
    scored: bool
    n_calls: int
    done: bool
    prediction: int | None


@dataclass(frozen=True, slots=True)
class ScoredResult:
    """The one scored session of an API key on a task (evaluation mode)."""

    key: str
    task_id: str
    session_id: str
    started: float
    prediction: int | None  # None: never submitted
    justification: str | None
    submitted: float | None


class SessionStore(Protocol):
    ttl_s: float
    clock: Callable[[], float]  # seconds (time.time); injectable for tests

    def create(self, session_id: str, task_id: str, key: str, *, scored: bool) -> bool:
        """Add a session; with ``scored``, also claim ``(key, task_id)``: False when it is taken."""
        ...

    def reserve_call(self, session_id: str, key: str, max_calls: int) -> Outcome: ...

    def submit(self, session_id: str, key: str, prediction: int, justification: str) -> tuple[Outcome, str | None]:
        """Record the one prediction; the outcome and (when OK) the session's task id."""
        ...

    def get(self, session_id: str, key: str) -> SessionState | None: ...
    def delete(self, session_id: str, key: str) -> bool: ...
    def expire(self) -> int: ...
    def count(self) -> int: ...
    def results(self) -> list[ScoredResult]: ...
    def close(self) -> None: ...


_SCHEMA = """
CREATE TABLE IF NOT EXISTS sessions (
    sid TEXT PRIMARY KEY, task_id TEXT NOT NULL, key TEXT NOT NULL, scored INTEGER NOT NULL,
    touched REAL NOT NULL, n_calls INTEGER NOT NULL DEFAULT 0, done INTEGER NOT NULL DEFAULT 0,
    prediction INTEGER, justification TEXT
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS sessions_touched ON sessions (touched);
CREATE TABLE IF NOT EXISTS scored (
    key TEXT NOT NULL, task_id TEXT NOT NULL, sid TEXT NOT NULL, started REAL NOT NULL,
    prediction INTEGER, justification TEXT, submitted REAL, PRIMARY KEY (key, task_id)
) WITHOUT ROWID;
-- a scored session claims (key, task) in the statement that creates it (a taken claim fails the
-- insert), and its submission reaches the claim in the statement that records it
CREATE TRIGGER IF NOT EXISTS claim_on_start AFTER INSERT ON sessions WHEN NEW.scored = 1 BEGIN
    INSERT INTO scored (key, task_id, sid, started) VALUES (NEW.key, NEW.task_id, NEW.sid, NEW.touched);
END;
CREATE TRIGGER IF NOT EXISTS record_on_submit AFTER UPDATE OF done ON sessions
WHEN NEW.scored = 1 AND NEW.done = 1 AND OLD.done = 0 BEGIN
    UPDATE scored SET prediction = NEW.prediction, justification = NEW.justification, submitted = NEW.touched
    WHERE key = NEW.key AND task_id = NEW.task_id AND sid = NEW.sid;
END;
"""
_LIVE = "sid = ? AND key = ? AND touched >= ?"


class SqliteStore:
    """Sessions in one SQLite file in WAL mode (every change one autocommitted statement), shared
    by the machine's worker processes (a connection per process: it survives ``fork``);
    ``path=None`` keeps them in memory (one process)."""

    def __init__(
        self, path: str | Path | None = None, *, ttl_s: float = DEFAULT_TTL_S, clock: Callable[[], float] = time.time
    ) -> None:
        self.path = None if path is None else Path(path)
        self.ttl_s = float(ttl_s)
        self.clock = clock
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._pid = -1
        self._db()  # create the schema now (in the parent, before workers fork)

    def _db(self) -> sqlite3.Connection:
        if self._conn is None or self._pid != os.getpid():
            if self.path is not None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(
                ":memory:" if self.path is None else str(self.path), isolation_level=None, check_same_thread=False
            )
            conn.execute("PRAGMA busy_timeout = 30000")
            if self.path is not None:
                conn.execute("PRAGMA journal_mode = WAL")
                conn.execute("PRAGMA synchronous = NORMAL")
            conn.executescript(_SCHEMA)
            conn.execute("PRAGMA busy_timeout = 0")  # lock waits are retried by _run, in microseconds
            self._conn, self._pid = conn, os.getpid()
        return self._conn

    def _run(self, sql: str, params: tuple = (), fetch: str = "") -> Any:
        """Run one autocommitted statement; ``fetch`` "one"/"all" returns rows, else the row count.

        A statement that failed on another process's write lock changed nothing and is retried
        after 0, 50, 100, ... microseconds (at most 2 ms apart, 30 s in all): SQLite's own busy
        handler sleeps a whole millisecond per collision, which left the CPUs idle under load."""
        delay, deadline = 0.0, None
        while True:
            try:
                with self._lock:  # one statement at a time on this process's connection
                    cur = self._db().execute(sql, params)
                    return cur.fetchone() if fetch == "one" else cur.fetchall() if fetch == "all" else cur.rowcount
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) and "busy" not in str(exc):
                    raise
                now = time.monotonic()
                deadline = deadline or now + 30.0
                if now > deadline:
                    raise
                time.sleep(delay)
                delay = min(0.002, max(5e-5, delay * 2))

    def _stale(self) -> float:
        return self.clock() - self.ttl_s

    def create(self, session_id: str, task_id: str, key: str, *, scored: bool) -> bool:
        try:
            self._run(
                "INSERT INTO sessions (sid, task_id, key, scored, touched) VALUES (?, ?, ?, ?, ?)",
                (session_id, task_id, key, int(scored), self.clock()),
            )
        except sqlite3.IntegrityError:  # the claim (key, task_id) is taken
            return False
        return True

    def _why(self, session_id: str, key: str) -> Outcome:
        row = self._run(f"SELECT done FROM sessions WHERE {_LIVE}", (session_id, key, self._stale()), "one")
        return Outcome.UNKNOWN if row is None else Outcome.DONE if row[0] else Outcome.LIMIT

    def reserve_call(self, session_id: str, key: str, max_calls: int) -> Outcome:
        now = self.clock()
        n = self._run(
            f"UPDATE sessions SET n_calls = n_calls + 1, touched = ? WHERE {_LIVE} AND done = 0 AND n_calls < ?",
            (now, session_id, key, now - self.ttl_s, max_calls),
        )
        return Outcome.OK if n == 1 else self._why(session_id, key)

    def submit(self, session_id: str, key: str, prediction: int, justification: str) -> tuple[Outcome, str | None]:
        now = self.clock()
        row = self._run(
            "UPDATE sessions SET done = 1, prediction = ?, justification = ?, touched = ?"
            f" WHERE {_LIVE} AND done = 0 RETURNING task_id",
            (prediction, justification, now, session_id, key, now - self.ttl_s),
            "one",
        )
        return (Outcome.OK, row[0]) if row is not None else (self._why(session_id, key), None)

    def get(self, session_id: str, key: str) -> SessionState | None:
        row = self._run(
            f"SELECT task_id, scored, n_calls, done, prediction FROM sessions WHERE {_LIVE}",
            (session_id, key, self._stale()),
            "one",
        )
        if row is None:
            return None
        task_id, scored, n_calls, done, prediction = row
        return SessionState(session_id, task_id, key, bool(scored), n_calls, bool(done), prediction)

    def delete(self, session_id: str, key: str) -> bool:
        return self._run(f"DELETE FROM sessions WHERE {_LIVE}", (session_id, key, self._stale())) == 1

    def expire(self) -> int:
        return self._run("DELETE FROM sessions WHERE touched < ?", (self._stale(),))

    def count(self) -> int:
        return self._run("SELECT count(*) FROM sessions WHERE touched >= ?", (self._stale(),), "one")[0]

    def results(self) -> list[ScoredResult]:
        sql = (
            "SELECT key, task_id, sid, started, prediction, justification, submitted FROM scored ORDER BY key, task_id"
        )
        return [ScoredResult(*r) for r in self._run(sql, (), "all")]

    def close(self) -> None:
        with self._lock:
            if self._conn is not None and self._pid == os.getpid():
                self._conn.close()
            self._conn = None
