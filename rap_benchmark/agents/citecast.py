"""CiteCast tasks through the shared agent runner: the tool set, the units and a reference policy.

A CiteCast task is one more kind of unit for :func:`rap_benchmark.agents.runner.run_units`: it
opens a session of the environment (any :class:`~rap_benchmark.citecast.client.EnvClient`) and
runs the one episode loop with :class:`CiteCastToolSet` (``web_search``, ``web_fetch``,
``submit_prediction``, all executed by the environment, which keeps the cutoff, the call budget
and the one-shot rule); the first accepted submission is the answer. So a CiteCast run has what
a RAP run has: the store, retries, resume, ``--shard i/n``, cost accounting and every backend
(the text protocol :data:`CITECAST_TEXT_PROTOCOL` for models without native tool calls).
:class:`ConstantBackend` is CiteCast's reference policy (search the title, fetch the top hit,
submit a constant).

Output: ``<out>/predictions.jsonl``, one row per task sorted by task id (:data:`PREDICTION_COLUMNS`;
only deterministic columns, so a resumed run writes the same bytes as an uninterrupted one).
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rap_benchmark.agents.episode import Episode
from rap_benchmark.agents.protocol import Backend, CiteCastContext, ModelTurn, Request, UnitContext, tool_call_turn
from rap_benchmark.agents.runner import (
    RunStats,
    accounting_columns,
    refuse_unsubmittable,
    run_keeping,
    select_shard,
)
from rap_benchmark.agents.store import RunStore, TaskKey
from rap_benchmark.agents.toolset import AnswerCheck, Rules, ToolOutcome, decode_arguments
from rap_benchmark.citecast.records import TaskSplit
from rap_benchmark.citecast.reward import validate_prediction
from rap_benchmark.core.errors import InputError
from rap_benchmark.core.fsio import atomic_write_text
from rap_benchmark.core.records import parse_enum
from rap_benchmark.llmclient.pricing import PriceTable
from rap_benchmark.tools import TextProtocol, TextTool

ANSWER_TOOL = "submit_prediction"
DEFAULT_MAX_TOOL_CALLS = 8
"""Web calls (web_search + web_fetch) per task before the submission is forced."""
DEFAULT_MAX_TOKENS = 1024
MAX_OBSERVATION_CHARS = 30_000
PREDICTIONS_FILE = "predictions.jsonl"
PREDICTION_COLUMNS = ("model", "task_id", "split", "prediction", "reward", *accounting_columns({}, "tool_calls"))
MATCH_KEYS = ("model", "instance", "split", "max_tool_calls", "max_tokens", "shard")

CITECAST_TEXT_PROTOCOL = TextProtocol(
    (
        TextTool("web_search", "web_search", "query"),
        TextTool("web_fetch", "web_fetch", "url"),
        TextTool("submit", ANSWER_TOOL, "prediction", prefix="justification", integer_body=True),
    ),
    "Tool use: think briefly if you like, then end your reply with exactly one tag:\n"
    "<web_search>keywords</web_search> searches the archive (web_search);\n"
    "<web_fetch>url</web_fetch> fetches an archived page (web_fetch);\n"
    "<submit>integer</submit> submits your forecast (submit_prediction; the text before the tag is "
    "recorded as the justification). The first accepted submission ends the task.\n"
    "Results come back in the next message inside <observation> tags.",
)
"""CiteCast's tools as tags, for models without native tool calling (the lm-eval ``citecast`` task)."""


def _no_text_answer(text: str) -> AnswerCheck:
    return AnswerCheck(False, None, "had no tool call (a forecast is submitted with submit_prediction)")


def force_submit(n: int) -> str:
    return f"You have used all {n} web calls. Submit your forecast now with submit_prediction (a nonnegative integer)."


def nudge(problem: str, tools_open: bool) -> str:
    return f"Your last reply {problem}. Call one tool; to finish, call submit_prediction with a nonnegative integer."


CITECAST_RULES = Rules(
    parse_answer=_no_text_answer,
    force_message=force_submit,
    nudge_message=nudge,
    no_calls_left="no web calls are left; call submit_prediction with your forecast",
    calls_key="tool_calls",
    answer_key="prediction",
)
"""CiteCast: the answer is the first submission the environment accepts; text is never an answer."""


class CiteCastToolSet:
    """The three tools of one environment session; every call is the environment's to run or refuse."""

    answer_tool = ANSWER_TOOL
    text_protocol = CITECAST_TEXT_PROTOCOL

    def __init__(
        self,
        client: Any,
        session_id: str,
        schemas: Sequence[dict[str, Any]],
        *,
        max_observation_chars: int = MAX_OBSERVATION_CHARS,
    ) -> None:
        self.client = client
        self.session_id = session_id
        self.schemas = tuple(schemas)
        self.max_observation_chars = max_observation_chars
        self.reward: float | None = None

    async def call(self, name: str, arguments: str) -> ToolOutcome:
        """Run one call in the environment. The client's call runs in a worker thread, so that
        other units keep going while this one waits on an HTTP server (the environment and its
        session stores are thread-safe)."""
        from rap_benchmark.citecast.errors import EnvError
        from rap_benchmark.tools import ToolArgumentError

        log: dict[str, Any] = {"name": name, "arguments": arguments}
        args, err = decode_arguments(arguments)
        if args is not None:
            try:
                result = await asyncio.to_thread(self.client.call, self.session_id, name, args)
            except (ToolArgumentError, EnvError) as exc:
                err = str(exc)
        if err is not None:
            return ToolOutcome(json.dumps({"error": err}, ensure_ascii=False), {**log, "error": err})
        observation = result["observation"]
        content = json.dumps(observation, ensure_ascii=False)[: self.max_observation_chars]
        final = None
        if result["done"]:
            final = int(observation["prediction"])
            self.reward = result.get("reward")
        return ToolOutcome(content, {**log, "error": None}, final)


@dataclass(frozen=True)
class CiteCastUnit:
    """One CiteCast task for the runner: its session is opened when the unit starts."""

    key: TaskKey
    context: CiteCastContext
    client: Any
    max_tokens: int = DEFAULT_MAX_TOKENS
    max_tool_calls: int = DEFAULT_MAX_TOOL_CALLS
    max_observation_chars: int = MAX_OBSERVATION_CHARS

    def open(self, tools: Any = None) -> Episode:
        started = self.client.start(self.key.task_id)
        session, cap = started["session_id"], self.max_observation_chars
        toolset = CiteCastToolSet(self.client, session, started["tools"], max_observation_chars=cap)
        messages = [{"role": "system", "content": started["system"]}, {"role": "user", "content": started["prompt"]}]
        return Episode(messages, toolset, self.max_tokens, self.max_tool_calls, 0.0, CITECAST_RULES)

    def record_meta(self, episode: Episode) -> dict[str, Any]:
        tools = episode.tools
        assert isinstance(tools, CiteCastToolSet)
        return {
            "task_id": self.key.task_id,
            "split": self.context.split,
            "session_id": tools.session_id,
            "reward": tools.reward,
            "max_tokens": self.max_tokens,
            "max_tool_calls": self.max_tool_calls,
        }


def citecast_units(
    client: Any,
    model: str,
    split: TaskSplit,
    *,
    limit: int | None = None,
    max_tokens: int = DEFAULT_MAX_TOKENS,
    max_tool_calls: int = DEFAULT_MAX_TOOL_CALLS,
    max_observation_chars: int = MAX_OBSERVATION_CHARS,
) -> list[CiteCastUnit]:
    """The units of ``split``'s tasks, sorted by task id (the first ``limit`` when given)."""
    split = parse_enum(TaskSplit, split, what="CiteCast split")
    ids = client.task_ids(split)[:limit] if limit is not None else client.task_ids(split)
    caps = (max_tokens, max_tool_calls, max_observation_chars)
    return [CiteCastUnit(TaskKey(model, t), CiteCastContext(model, t, split), client, *caps) for t in ids]


class ConstantBackend:
    """CiteCast's reference policy as a backend: (optionally) search the paper's title and fetch
    the top hit, then submit ``value``. Stateless: the next action is a function of the
    conversation so far, so a restarted unit replays identically."""

    def __init__(self, value: int, *, research: bool = True, name: str | None = None) -> None:
        self.value = validate_prediction(value)  # the server's own rule, said before any task starts
        self.research = research
        self.name = name or f"constant/{self.value}"

    async def complete(self, request: Request, context: UnitContext) -> ModelTurn:
        tool_msgs = [m for m in request.messages if m.get("role") == "tool"]
        open_ = request.tool_choice == "auto" and any(s["function"]["name"] != ANSWER_TOOL for s in request.tools or ())
        if self.research and open_ and not tool_msgs:
            prompt = str(next(m["content"] for m in request.messages if m.get("role") == "user"))
            title = prompt.split("Title: ", 1)[1].split("\n", 1)[0] if "Title: " in prompt else prompt[:200]
            return tool_call_turn(0, "web_search", {"query": title}, self.name)
        if self.research and open_ and len(tool_msgs) == 1:
            hits = json.loads(str(tool_msgs[0]["content"]))
            if isinstance(hits, list) and hits:
                return tool_call_turn(1, "web_fetch", {"url": hits[0]["url"]}, self.name)
        answer = {"prediction": self.value, "justification": "constant policy"}
        return tool_call_turn(len(tool_msgs), ANSWER_TOOL, answer, self.name)

    async def aclose(self) -> None:
        return None


def predictions_rows(store: RunStore, model: str | None = None) -> list[dict[str, Any]]:
    """One row per stored CiteCast unit (:data:`PREDICTION_COLUMNS`), sorted by (model, task id)."""
    rows = []
    for rec in store.iter_units():
        if rec["key"].get("variant") != "citecast" or (model is not None and rec["key"]["model"] != model):
            continue
        acc = accounting_columns(rec, "tool_calls")
        row = {
            "model": rec["key"]["model"],
            "task_id": rec["key"]["task_id"],
            "split": rec.get("split"),
            "prediction": rec.get("prediction") if acc["valid"] else None,
            "reward": rec.get("reward") if acc["valid"] else None,
            **acc,
        }
        rows.append({c: row.get(c) for c in PREDICTION_COLUMNS})
    return sorted(rows, key=lambda r: (r["model"], r["task_id"]))


def write_predictions(store: RunStore, model: str | None = None) -> Path:
    """Write ``predictions.jsonl`` of the store's CiteCast units (sorted keys, one row a line)."""
    rows = predictions_rows(store, model)
    path = store.root / PREDICTIONS_FILE
    atomic_write_text(path, "".join(json.dumps(r, sort_keys=True, ensure_ascii=False) + "\n" for r in rows))
    return path


def summary(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Tasks, valid submissions and the mean reward (over tasks whose reward came back; invalid ones score 0)."""
    rewards = [float(r["reward"]) if r["valid"] and r["reward"] is not None else 0.0 for r in rows]
    returned = any(r["reward"] is not None for r in rows)
    mean = sum(rewards) / len(rewards) if rewards and returned else math.nan
    return {"tasks": len(rows), "submitted": sum(bool(r["valid"]) for r in rows), "mean_reward": mean}


def run_citecast(
    client: Any,
    backend: Backend,
    out: str | Path,
    *,
    model: str,
    split: TaskSplit,
    instance: str,
    limit: int | None = None,
    shard: tuple[int, int] = (0, 1),
    concurrency: int = 4,
    max_tokens: int = DEFAULT_MAX_TOKENS,
    max_tool_calls: int = DEFAULT_MAX_TOOL_CALLS,
    backend_name: str = "",
    prices: PriceTable | None = None,
    progress: bool = True,
) -> tuple[RunStats, Path]:
    """Run (or resume) CiteCast tasks into the run folder ``out``; write ``out/predictions.jsonl``.

    ``instance`` names what the run is graded against (the instance's manifest hash, or the
    server's URL); ``run.json`` pins it with the model, split, caps and shard, and a restart that
    disagrees is refused. A restart skips tasks already submitted and reruns the others. A run
    that stops early (the endpoints stopped answering, Ctrl-C) writes the predictions of the
    tasks it finished before it raises (:func:`~rap_benchmark.agents.runner.run_keeping`).
    """
    store = RunStore(out)
    units = citecast_units(client, model, split, limit=limit, max_tokens=max_tokens, max_tool_calls=max_tool_calls)
    units = select_shard(units, shard)
    with store.writer():
        store.init_run(
            {
                "kind": "citecast",
                "model": model,
                "backend": backend_name,
                "instance": instance,
                "split": split,
                "max_tool_calls": max_tool_calls,
                "max_tokens": max_tokens,
                "shard": f"{shard[0]}/{shard[1]}",
            },
            must_match=MATCH_KEYS,
        )
        options = {"concurrency": concurrency, "prices": prices, "progress": progress}
        return run_keeping(units, backend, store, lambda: write_predictions(store, model), what="tasks", **options)


def prepare_citecast_submission(
    run_dir: str | Path,
    out: str | Path,
    *,
    model: str | None = None,
    knowledge_cutoff: str | None = None,
    submitter: str | None = None,
    notes: str | None = None,
    prices: PriceTable | None = None,
) -> tuple[Path, Path]:
    """A CiteCast submission from a ``rap citecast run`` folder on the Test split: ``out`` (one row
    per finished task, no reward: the board computes it) and ``out.meta.json`` (model, the
    instance's manifest hash, usage). Every input is checked before anything is written."""
    from rap_benchmark.evaluation.citecast_submissions import citecast_usage, write_citecast_submission

    store = RunStore(run_dir)
    run = store.read_run() or {}
    name = model or str(run.get("model"))
    instance = str(run.get("instance", ""))
    if run.get("split") != TaskSplit.TEST.value:
        raise InputError(
            f"{run_dir} ran the {run.get('split')} split; the board scores Test: rap citecast run --split test"
        )
    if len(instance) != 64 or "://" in instance:
        raise InputError(
            f"{run_dir} ran against the server at {instance}: its scored sessions are the submission "
            "(its operator runs rap citecast score); prepare one from a run on an instance folder"
        )
    rows = predictions_rows(store, name)
    refuse_unsubmittable(run_dir, run, store, name, empty=not rows, what="CiteCast task")
    source = f"rap citecast run store {Path(run_dir).name} (backend {run.get('backend') or 'unknown'})"
    return write_citecast_submission(
        rows,
        out,
        manifest_hash=instance,
        usage=citecast_usage(rows, source=source, prices=prices),
        knowledge_cutoff=knowledge_cutoff,
        submitter=submitter,
        notes=notes,
    )
