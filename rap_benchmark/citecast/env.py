"""The environment core: server-side tasks, sessions, tool dispatch and the one-shot reward.

The HTTP server (:mod:`.server`) and the in-process client (:mod:`.client`) both call
:class:`CiteCastEnv`, so an agent run over HTTP and one in process take the same code path.

A session starts from a task id and gets the prompt; every tool call goes through the session's
:class:`~rap_benchmark.citecast.tools.SessionTools`, whose web tools read the corpus view at the
environment's cutoff (fixed server-side, applied on every request). The first valid
``submit_prediction`` ends the session and fixes its reward; any later call is refused with
:class:`SessionClosed` and changes nothing. An invalid submission (e.g. a negative prediction) is
refused with :class:`~rap_benchmark.citecast.tools.ToolArgumentError` and does not end the session.
"""

from __future__ import annotations

import datetime as dt
import secrets
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rap_benchmark.citecast.prompt import SYSTEM_PROMPT, render_prompt
from rap_benchmark.citecast.records import DEFAULT_CUTOFF, CiteTask, TaskSplit, ToolCall
from rap_benchmark.citecast.reward import reward as reward_fn
from rap_benchmark.citecast.tools import (
    MAX_FETCH_CHARS,
    SEARCH_RESULTS,
    BackdatedWeb,
    SessionTools,
    ToolArgumentError,
    call_tool,
    tool_schemas,
)
from rap_benchmark.citecast.webcorpus import WebCorpus
from rap_benchmark.core.dates import parse_date

MAX_TOOL_CALLS = 100  # web calls per session; submit_prediction is always allowed once


class EnvError(Exception):
    """Base of the environment's refusals; ``status`` is the HTTP code the server answers with."""

    status = 400


class UnknownTask(EnvError):
    status = 404


class UnknownSession(EnvError):
    status = 404


class SessionClosed(EnvError):
    status = 409


class CallLimit(EnvError):
    status = 429


@dataclass
class Session:
    session_id: str
    task: CiteTask
    tools: SessionTools | None = None
    calls: list[ToolCall] = field(default_factory=list)
    prediction: int | None = None
    justification: str | None = None
    reward: float | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def done(self) -> bool:
        return self.reward is not None


@dataclass(frozen=True)
class StartInfo:
    session_id: str
    task_id: str
    system: str
    prompt: str
    tools: list[dict[str, Any]]

    def to_dict(self) -> dict[str, Any]:
        return {
            "session_id": self.session_id,
            "task_id": self.task_id,
            "system": self.system,
            "prompt": self.prompt,
            "tools": self.tools,
        }


@dataclass(frozen=True)
class ToolResult:
    observation: Any
    done: bool
    reward: float | None

    def to_dict(self) -> dict[str, Any]:
        return {"observation": self.observation, "done": self.done, "reward": self.reward}


class CiteCastEnv:
    """Tasks (with targets) and the corpus, held server-side; sessions keyed by random ids.

    Session ids are unguessable random tokens (``secrets``), so one agent cannot act on another's
    session; they identify sessions and never influence any result.
    """

    def __init__(
        self,
        tasks: Mapping[str, CiteTask],
        corpus: WebCorpus,
        cutoff: dt.date | str = DEFAULT_CUTOFF,
        *,
        k: int = SEARCH_RESULTS,
        max_chars: int = MAX_FETCH_CHARS,
        max_tool_calls: int = MAX_TOOL_CALLS,
    ) -> None:
        self.tasks = dict(tasks)
        self.cutoff = parse_date(cutoff)
        self.web = BackdatedWeb(corpus.view(self.cutoff), k=k, max_chars=max_chars)
        self.max_tool_calls = max_tool_calls
        self._sessions: dict[str, Session] = {}
        self._lock = threading.Lock()

    @classmethod
    def from_instance(cls, instance_dir: str | Path, cutoff: dt.date | str | None = None, **kw: Any) -> CiteCastEnv:
        from rap_benchmark.citecast.instance import load_instance

        inst = load_instance(instance_dir)
        return cls(inst.tasks, inst.corpus, cutoff or inst.cutoff, **kw)

    def warm(self) -> None:
        """Build the search index now rather than on the first search."""
        self.web.view.build_index()

    def task_ids(self, split: TaskSplit | str | None = None) -> list[str]:
        s = TaskSplit(split) if split is not None else None
        return sorted(t.task_id for t in self.tasks.values() if s is None or t.split is s)

    # -- sessions ------------------------------------------------------------------------------
    def start(self, task_id: str) -> StartInfo:
        task = self.tasks.get(task_id)
        if task is None:
            raise UnknownTask(f"unknown task id {task_id!r}")
        session = Session(secrets.token_hex(16), task)
        session.tools = SessionTools(self.web, lambda p, j, s=session: self._submit(s, p, j))
        with self._lock:
            self._sessions[session.session_id] = session
        return StartInfo(session.session_id, task_id, SYSTEM_PROMPT, render_prompt(task.paper), tool_schemas())

    def _session(self, session_id: str) -> Session:
        with self._lock:
            session = self._sessions.get(session_id)
        if session is None:
            raise UnknownSession(f"unknown session {session_id!r}")
        return session

    def _submit(self, session: Session, prediction: int, justification: str) -> dict[str, Any]:
        # called with session.lock held (from call()), so exactly one submission can win
        session.prediction = prediction
        session.justification = justification
        session.reward = reward_fn(prediction, session.task.target)
        return {"accepted": True, "prediction": prediction, "reward": session.reward}

    def call(self, session_id: str, name: str, arguments: Any) -> ToolResult:
        """Run one tool call of a session. Refusals raise an :class:`EnvError` subclass or
        :class:`ToolArgumentError`; refused calls change no state and are logged as not ok."""
        session = self._session(session_id)
        with session.lock:
            if session.done:
                raise SessionClosed(f"session {session_id} is finished: a prediction was already submitted")
            n_web = sum(1 for c in session.calls if c.name != "submit_prediction")
            if name != "submit_prediction" and n_web >= self.max_tool_calls:
                raise CallLimit(f"session {session_id}: at most {self.max_tool_calls} web calls; submit now")
            assert session.tools is not None
            try:
                observation = call_tool(session.tools, name, arguments)
            except ToolArgumentError as exc:
                session.calls.append(
                    ToolCall(name, dict(arguments) if isinstance(arguments, dict) else {}, str(exc), False)
                )
                raise
            session.calls.append(ToolCall(name, dict(arguments), observation, True))
            return ToolResult(observation, session.done, session.reward)

    def state(self, session_id: str) -> dict[str, Any]:
        """Public state of a session (never the target or band)."""
        session = self._session(session_id)
        with session.lock:
            return {
                "session_id": session.session_id,
                "task_id": session.task.task_id,
                "done": session.done,
                "n_calls": len(session.calls),
                "prediction": session.prediction,
                "reward": session.reward,
            }

    def trajectory(self, session_id: str) -> list[ToolCall]:
        session = self._session(session_id)
        with session.lock:
            return list(session.calls)

    def close(self, session_id: str) -> None:
        """Forget a session (finished or abandoned)."""
        with self._lock:
            if self._sessions.pop(session_id, None) is None:
                raise UnknownSession(f"unknown session {session_id!r}")

    def __len__(self) -> int:
        with self._lock:
            return len(self._sessions)
