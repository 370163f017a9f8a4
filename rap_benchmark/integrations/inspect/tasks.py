"""Inspect AI tasks: ``rap_forecast``, ``rap_state`` and ``citecast`` with native tool calling.

``inspect eval rap_benchmark/rap_forecast --model vllm/Qwen/Qwen3-4B -T condition=A3``

* One sample per canonical-policy episode of a split (RAP) or per CiteCast task. The target the
  episode is scored against stays in the sample's target, which only the scorer reads.
* The solver is the benchmark's own loop: :func:`~rap_benchmark.agents.episode.run_episode` over
  :class:`~rap_benchmark.integrations.inspect.bridge.InspectBackend`, with the RAP unit of
  ``rap run`` (Search bound to the episode's universe) or the runner's
  :class:`~rap_benchmark.agents.citecast.CiteCastUnit` (the environment's tools and rules). The
  model is Inspect's, so every request is a model event in the log, and the sample's messages
  are the episode's.
* The scorer is the package's: ``rap score``'s parser and Spearman against the target
  (``spearman``, field-macro; ``state_fidelity`` for State); CiteCast's reward is the
  environment's. ``valid`` is the share of valid answers.

Parameters (``-T key=value``): ``condition`` (A0..A4), ``instance_dir`` or ``hub`` (the published
datasets, see :mod:`rap_benchmark.integrations.source`), ``split`` (test, dev or all),
``max_search_calls``; for ``citecast``: ``citecast_dir``, ``split`` (test, train or all), ``max_tool_calls``.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
from inspect_ai import Task, task
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.model import ModelOutput, get_model
from inspect_ai.scorer import Score, Scorer, Target, metric, scorer
from inspect_ai.scorer._metric import Metric, SampleScore
from inspect_ai.solver import Generate, Solver, TaskState, solver

from rap_benchmark.core.records import Condition
from rap_benchmark.core.records import Task as RapTask
from rap_benchmark.core.spec import package_version
from rap_benchmark.integrations.inspect.bridge import InspectBackend, chat_messages
from rap_benchmark.integrations.scores import citecast_metrics, episode_metrics

RECORD_KEY = "rap_record"
"""The store key holding each sample's full episode record (messages, search calls, events)."""
MODEL_LABEL = "inspect"


# -- metrics --------------------------------------------------------------------------------------


def _values(scores: list[SampleScore]) -> tuple[np.ndarray, np.ndarray]:
    fids, vals = [], []
    for s in scores:
        v = s.score.value
        if v is None or (isinstance(v, float) and np.isnan(v)):
            continue
        fids.append(str((s.score.metadata or {}).get("field_id", "")))
        vals.append(float(v))  # type: ignore[arg-type]
    return np.asarray(fids, dtype=object), np.asarray(vals, dtype=np.float64)


@metric
def field_macro() -> Metric:
    """Mean within field over the defined episode values, then across fields (the scorer's
    aggregation); episodes without a defined value add nothing."""
    from rap_benchmark.evaluation.scoring import field_macro as aggregate

    def compute(scores: list[SampleScore]) -> float:
        fids, vals = _values(scores)
        return float(aggregate(vals, fids)) if len(vals) else float("nan")

    return compute


@metric
def mean_defined() -> Metric:
    """Mean over the samples with a value."""

    def compute(scores: list[SampleScore]) -> float:
        _, vals = _values(scores)
        return float(vals.mean()) if len(vals) else float("nan")

    return compute


async def _run_unit(state: TaskState, unit: Any, episode: Any) -> tuple[Any, dict[str, Any]]:
    """Run ``unit``'s episode with the task's model into ``state``; (model, the unit record)."""
    from rap_benchmark.agents.episode import run_episode

    model = get_model()
    backend = InspectBackend(model)
    result = await run_episode(backend, unit.context, episode)
    backend.raise_error()  # a model error is the sample's error, not an invalid answer
    record = {**result.to_dict(), **unit.record_meta(episode)}
    state.messages = chat_messages(result.messages)
    state.store.set(RECORD_KEY, record)
    return model, record


# -- RAP --------------------------------------------------------------------------------------------


def episode_samples(docs: list[dict[str, Any]]) -> list[Sample]:
    """One Inspect sample per episode document: the target in ``target`` (read by the scorer
    only), the episode's keys in ``metadata``."""
    samples = []
    for doc in docs:
        target = json.dumps({"y": doc.get("y"), "x": doc.get("x")})
        meta = {k: doc[k] for k in ("episode_id", "field_id", "origin", "split", "condition", "task", "manifest_hash")}
        samples.append(Sample(id=doc["episode_id"], input=doc["episode_id"], target=target, metadata=meta))
    return samples


@solver
def rap_episode(
    condition: str,
    instance_dir: str | None = None,
    hub: str | None = None,
    hub_revision: str | None = None,
    max_search_calls: int | None = None,
) -> Solver:
    """Run the agents' episode loop on the sample's episode with the task's model."""
    from rap_benchmark.agents.runner import SearchTools, native_units
    from rap_benchmark.integrations.source import open_source

    cond = Condition(condition)
    # the loop gets the target-blind view; the targets reach only the scorer, through each sample's target
    inst = open_source(instance_dir=instance_dir, hub=hub, hub_revision=hub_revision).public_view()
    spec = inst.spec if max_search_calls is None else inst.spec.replace(max_search_calls=int(max_search_calls))
    tools = SearchTools(inst)

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        meta = state.metadata
        (unit,) = native_units(MODEL_LABEL, inst.codebooks, [(meta["field_id"], meta["origin"])], [cond], spec)
        model, record = await _run_unit(state, unit, unit.open(tools))
        state.output = ModelOutput.from_content(str(model), record.get("answer_text") or "")
        return state

    return solve


def _rap_score_fn(state_task: bool) -> Scorer:
    async def score(state: TaskState, target: Target) -> Score:
        goal = json.loads(target.text)
        doc = {"field_id": state.metadata["field_id"], "task": state.metadata["task"], **goal}
        record = state.store.get(RECORD_KEY) or {}
        answer = record.get("answer_text")
        m = episode_metrics(doc, answer)
        nan = float("nan")  # Inspect's "unscored" value: left out of the metric, as rap score leaves it out
        value = {"spearman": m["spearman"][1] if "spearman" in m else nan}
        if state_task:
            value["state_fidelity"] = m["state_fidelity"][1] if "state_fidelity" in m else nan
        value["valid"] = m["valid"]
        value["n_search_calls"] = float(record.get("n_search_calls", 0))
        return Score(
            value=value,
            answer=answer,
            explanation=record.get("invalid_reason"),
            metadata={"field_id": state.metadata["field_id"], "invalid_reason": record.get("invalid_reason")},
        )

    return score


@scorer(metrics={"spearman": [field_macro()], "valid": [mean_defined()], "n_search_calls": [mean_defined()]})
def rap_scorer() -> Scorer:
    """The package's episode metrics of the final answer (Forecast conditions)."""
    return _rap_score_fn(False)


@scorer(
    metrics={
        "spearman": [field_macro()],
        "state_fidelity": [field_macro()],
        "valid": [mean_defined()],
        "n_search_calls": [mean_defined()],
    }
)
def rap_state_scorer() -> Scorer:
    """The package's episode metrics of the final answer (State conditions: also fidelity to x)."""
    return _rap_score_fn(True)


def rap_task(
    condition: str,
    *,
    instance_dir: str | None,
    hub: str | None,
    hub_revision: str | None,
    split: str,
    max_search_calls: int | None,
) -> Task:
    from rap_benchmark.integrations.source import episode_docs, open_source

    cond = Condition(condition)
    inst = open_source(instance_dir=instance_dir, hub=hub, hub_revision=hub_revision)
    docs = episode_docs(inst, cond, split=split)
    return Task(
        dataset=MemoryDataset(episode_samples(docs), name=f"rap-{cond.value}"),
        solver=rap_episode(
            cond.value, instance_dir=instance_dir, hub=hub, hub_revision=hub_revision, max_search_calls=max_search_calls
        ),
        scorer=rap_state_scorer() if cond.task is RapTask.STATE else rap_scorer(),
        metadata={
            "condition": cond.value,
            "manifest_hash": inst.manifest_hash,
            "benchmark_version": inst.spec.version,  # the instance's: what its scores mean
            "package_version": package_version(),  # the rap_benchmark package that ran it
        },
        version=1,
    )


@task
def rap_forecast(
    condition: str = "A1",
    instance_dir: str | None = None,
    hub: str | None = None,
    hub_revision: str | None = None,
    split: str = "test",
    max_search_calls: int | None = None,
) -> Task:
    """RAP under one condition (A0 closed, A1 fixed Search, A3 expanding Search; A2/A4 are the
    State conditions, also reachable as ``rap_state``)."""
    return rap_task(
        condition,
        instance_dir=instance_dir,
        hub=hub,
        hub_revision=hub_revision,
        split=split,
        max_search_calls=max_search_calls,
    )


@task
def rap_state(
    condition: str = "A2",
    instance_dir: str | None = None,
    hub: str | None = None,
    hub_revision: str | None = None,
    split: str = "test",
    max_search_calls: int | None = None,
) -> Task:
    """RAP's State task (A2 fixed Search, A4 expanding Search)."""
    if Condition(condition).task is not RapTask.STATE:
        raise ValueError(f"rap_state takes a State condition (A2 or A4), got {condition}; use rap_forecast")
    return rap_task(
        condition,
        instance_dir=instance_dir,
        hub=hub,
        hub_revision=hub_revision,
        split=split,
        max_search_calls=max_search_calls,
    )


# -- CiteCast ---------------------------------------------------------------------------------------


@solver
def citecast_episode(citecast_dir: str | None = None, max_tool_calls: int | None = None) -> Solver:
    """Run the runner's CiteCast unit (the one episode loop with the environment's tools) on the
    sample's task with the task's model."""
    from rap_benchmark.agents.citecast import DEFAULT_MAX_TOOL_CALLS, CiteCastUnit
    from rap_benchmark.agents.protocol import CiteCastContext
    from rap_benchmark.agents.store import TaskKey
    from rap_benchmark.citecast.client import InProcessClient
    from rap_benchmark.integrations.citecast_source import citecast_env

    client = InProcessClient(citecast_env({"citecast_dir": citecast_dir} if citecast_dir else {}))
    cap = DEFAULT_MAX_TOOL_CALLS if max_tool_calls is None else int(max_tool_calls)

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        task_id, split = state.metadata["task_id"], state.metadata["split"]
        unit = CiteCastUnit(
            TaskKey(MODEL_LABEL, task_id), CiteCastContext(MODEL_LABEL, task_id, split), client, max_tool_calls=cap
        )
        model, record = await _run_unit(state, unit, unit.open())
        prediction = record.get("prediction")
        state.output = ModelOutput.from_content(str(model), "" if prediction is None else str(prediction))
        return state

    return solve


@scorer(metrics={"reward": [mean_defined()], "valid": [mean_defined()], "n_tool_calls": [mean_defined()]})
def citecast_scorer() -> Scorer:
    """The environment's reward (0 without an accepted submission), validity and web calls."""

    async def score(state: TaskState, target: Target) -> Score:
        record = state.store.get(RECORD_KEY) or {}
        return Score(
            value=citecast_metrics(record),
            answer=state.output.completion,
            metadata={"task_id": state.metadata["task_id"], "session_id": record.get("session_id")},
        )

    return score


@task
def citecast(citecast_dir: str | None = None, split: str = "test", max_tool_calls: int | None = None) -> Task:
    """CiteCast: forecast a paper's citation count with web_search, web_fetch and submit_prediction."""
    from rap_benchmark.citecast.prompt import render_prompt
    from rap_benchmark.core.spec import CITECAST_VERSION
    from rap_benchmark.integrations.citecast_source import citecast_docs, citecast_env

    env = citecast_env({"citecast_dir": citecast_dir} if citecast_dir else {})
    samples = [
        Sample(
            id=d["task_id"],
            input=render_prompt(env.tasks[d["task_id"]].paper),
            target="",  # the target stays in the environment
            metadata={"task_id": d["task_id"], "split": d["split"]},
        )
        for d in citecast_docs(env, split)
    ]
    return Task(
        dataset=MemoryDataset(samples, name="citecast"),
        solver=citecast_episode(citecast_dir, max_tool_calls),
        scorer=citecast_scorer(),
        metadata={"citecast_version": CITECAST_VERSION},
        version=1,
    )
