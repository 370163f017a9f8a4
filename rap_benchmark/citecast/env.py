"""The environment core: server-side tasks, sessions, tool dispatch and the one-shot reward.

The HTTP server (:mod:`.server`) and the in-process client (:mod:`.client`) both call
:class:`CiteCastEnv`, so a run over HTTP and one in process take the same code path. Session
state lives in a :class:`~rap_benchmark.citecast.sessions.SessionStore`, never in the object, so
any worker serves any call. Web tools read the corpus view at the server-side cutoff. A refused
call (unknown tool, invalid or oversized arguments) changes nothing and uses no budget; the first
valid ``submit_prediction`` ends the session and later calls get :class:`SessionClosed`.

Modes (:class:`Mode`): ``training`` serves the train split and returns the reward at submit;
``evaluation`` serves the Test split, never returns the reward (a returned reward can be inverted
to the target: r = 1/cosh(2|ln((p+1)/(t+1))|) at p = 0 gives t), and allows one scored session per
task and API key, whose prediction ``rap citecast score`` reads from the store after the run.
``mode=None`` is the trusted in-process use (every split, reward returned): whoever runs it
holds the instance and its targets anyway.
"""

from __future__ import annotations

import datetime as dt
import enum
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rap_benchmark.citecast.errors import (
    AlreadyScored,
    CallLimit,
    EnvError,
    SessionClosed,
    UnknownSession,
    UnknownTask,
)
from rap_benchmark.citecast.prompt import SYSTEM_PROMPT, render_prompt
from rap_benchmark.citecast.records import DEFAULT_CUTOFF, CiteTask, TaskSplit
from rap_benchmark.citecast.reward import reward as reward_fn
from rap_benchmark.citecast.sessions import DEFAULT_TTL_S, Outcome, SessionStore, SqliteStore
from rap_benchmark.citecast.tools import (
    MAX_FETCH_CHARS,
    SEARCH_RESULTS,
    BackdatedWeb,
    SessionTools,
    call_tool,
    tool_schemas,
)
from rap_benchmark.citecast.webcorpus import WebCorpus
from rap_benchmark.core.dates import parse_date
from rap_benchmark.core.serial import Record

MAX_TOOL_CALLS = 100  # web calls per session; submit_prediction is always allowed once
EXPIRE_EVERY_S = 30.0  # how often a process sweeps expired sessions out of the store


class Mode(enum.Enum):
    TRAINING = "training"
    EVALUATION = "evaluation"

    @property
    def split(self) -> TaskSplit:
        return TaskSplit.TRAIN if self is Mode.TRAINING else TaskSplit.TEST


@dataclass(frozen=True)
class StartInfo(Record):
    session_id: str
    task_id: str
    system: str
    prompt: str
    tools: list[dict[str, Any]]


@dataclass(frozen=True)
class ToolResult(Record):
    observation: Any
    done: bool
    reward: float | None


class CiteCastEnv:
    """Tasks (with targets) and the corpus view, held server-side; sessions in ``store``.

    ``web`` is a :class:`~rap_benchmark.citecast.webcorpus.WebCorpus` (viewed at ``cutoff``) or a
    view already at the cutoff (the workers' :class:`~rap_benchmark.citecast.webindex.MappedView`).
    Session ids are random tokens; a session answers only to the API key name that started it.
    """

    def __init__(
        self,
        tasks: Mapping[str, CiteTask],
        web: Any,
        cutoff: dt.date | str = DEFAULT_CUTOFF,
        *,
        store: SessionStore | None = None,
        mode: Mode | None = None,
        k: int = SEARCH_RESULTS,
        max_chars: int = MAX_FETCH_CHARS,
        max_tool_calls: int = MAX_TOOL_CALLS,
        session_ttl_s: float = DEFAULT_TTL_S,
    ) -> None:
        self.tasks = dict(tasks)
        self.cutoff = parse_date(cutoff)
        view = web.view(self.cutoff) if isinstance(web, WebCorpus) else web
        if view.cutoff != self.cutoff:
            raise ValueError(f"the corpus view is at {view.cutoff}, the environment's cutoff is {self.cutoff}")
        self.web = BackdatedWeb(view, k=k, max_chars=max_chars)
        self.mode = mode
        self.max_tool_calls = max_tool_calls
        self.store: SessionStore = store if store is not None else SqliteStore(None, ttl_s=session_ttl_s)
        self._served = {t.task_id for t in self.tasks.values() if mode is None or t.split is mode.split}
        self._next_expiry = 0.0
        self._schemas = tool_schemas()

    @classmethod
    def from_instance(
        cls,
        instance_dir: str | Path,
        cutoff: dt.date | str | None = None,
        *,
        cache_dir: str | Path | None = None,
        **kw: Any,
    ) -> CiteCastEnv:
        """The environment of a built instance, searching its memory-mapped index (built into the
        instance's ``.cache/`` or ``cache_dir`` on first use)."""
        from rap_benchmark.citecast.instance import load_instance

        inst = load_instance(instance_dir)
        at = parse_date(cutoff) if cutoff is not None else inst.cutoff
        return cls(inst.tasks, inst.web_index(at, cache_dir), at, **kw)

    @property
    def returns_reward(self) -> bool:
        return self.mode is not Mode.EVALUATION

    def warm(self) -> None:
        """Build (or map) the search index and compile its kernels now, not on the first search."""
        self.web.view.build_index()
        self.web.search("warm up")

    def task_ids(self, split: TaskSplit | str | None = None) -> list[str]:
        s = TaskSplit(split) if split is not None else None
        return sorted(t for t in self._served if s is None or self.tasks[t].split is s)

    # -- sessions ------------------------------------------------------------------------------
    def _expire(self) -> None:
        now = self.store.clock()
        if now >= self._next_expiry:
            self._next_expiry = now + min(EXPIRE_EVERY_S, self.store.ttl_s / 4)
            self.store.expire()

    def start(self, task_id: str, key: str = "") -> StartInfo:
        """Start a session on ``task_id`` for the API key named ``key``."""
        task = self.tasks.get(task_id) if task_id in self._served else None
        if task is None:
            served = "" if self.mode is None else f" in {self.mode.value} mode ({self.mode.split.value} split)"
            raise UnknownTask(f"unknown task id {task_id[:64]!r}{served}")
        self._expire()
        session_id = secrets.token_hex(16)
        if not self.store.create(session_id, task_id, key, scored=self.mode is Mode.EVALUATION):
            raise AlreadyScored(f"task {task_id}: this API key already has its one scored session on this task")
        return StartInfo(session_id, task_id, SYSTEM_PROMPT, render_prompt(task.paper), self._schemas)

    def _refusal(self, outcome: Outcome, session_id: str) -> EnvError:
        sid = session_id[:64]
        if outcome is Outcome.DONE:
            return SessionClosed(f"session {sid} is finished: a prediction was already submitted")
        if outcome is Outcome.LIMIT:
            return CallLimit(f"session {sid}: at most {self.max_tool_calls} web calls; submit now")
        return UnknownSession(f"unknown session {sid!r} (never started, deleted, or expired)")

    def call(self, session_id: str, name: str, arguments: Any, key: str = "") -> ToolResult:
        """Run one tool call of a session; a refusal (:class:`EnvError` or
        :class:`~rap_benchmark.citecast.tools.ToolArgumentError`) changes nothing."""

        def reserve() -> None:
            outcome = self.store.reserve_call(session_id, key, self.max_tool_calls)
            if outcome is not Outcome.OK:
                raise self._refusal(outcome, session_id)

        tools = SessionTools(self.web, lambda p, j: self._submit(session_id, key, p, j), reserve)
        observation = call_tool(tools, name, arguments)
        if name == "submit_prediction":
            return ToolResult(observation, True, observation.get("reward"))
        return ToolResult(observation, False, None)

    def _submit(self, session_id: str, key: str, prediction: int, justification: str) -> dict[str, Any]:
        outcome, task_id = self.store.submit(session_id, key, prediction, justification)
        if outcome is not Outcome.OK:
            raise self._refusal(outcome, session_id)
        observation: dict[str, Any] = {"accepted": True, "prediction": prediction}
        if self.returns_reward:  # a pure function of the validated prediction: it cannot fail
            observation["reward"] = self._reward(task_id, prediction)
        return observation

    def _reward(self, task_id: str | None, prediction: int | None) -> float | None:
        if task_id is None or prediction is None or not self.returns_reward:
            return None
        return reward_fn(prediction, self.tasks[task_id].target)

    def state(self, session_id: str, key: str = "") -> dict[str, Any]:
        """Public state of a session (never the target or band; no reward in evaluation mode)."""
        s = self.store.get(session_id, key)
        if s is None:
            raise self._refusal(Outcome.UNKNOWN, session_id)
        return {
            "session_id": s.session_id,
            "task_id": s.task_id,
            "done": s.done,
            "n_calls": s.n_calls,
            "prediction": s.prediction,
            "reward": self._reward(s.task_id, s.prediction),
        }

    def close(self, session_id: str, key: str = "") -> None:
        """Delete a session's state; a scored session's claim and prediction stay (the evaluation's result)."""
        if not self.store.delete(session_id, key):
            raise self._refusal(Outcome.UNKNOWN, session_id)

    def __len__(self) -> int:
        return self.store.count()
