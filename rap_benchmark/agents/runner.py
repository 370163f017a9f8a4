"""Run units through a backend into a resumable store: RAP units and CiteCast tasks alike.

:func:`run_units` is generic: a unit has a store key, a context for the backend, and opens its
:class:`~rap_benchmark.agents.episode.Episode` (first messages, tool set, rules) when it starts;
the runner does the rest (skip done units, concurrency, the store, token and cost accounting).
RAP units (model x field x origin x condition) are :class:`UnitSpec`; CiteCast tasks are
``rap_benchmark.agents.citecast.CiteCastUnit``.

The runner never sees targets: it takes a :class:`~rap_benchmark.core.artifacts.PublicInstance`
(``Instance.public_view()``), which has no target column, no direction label and no ledger;
RAP units are built from its episode keys (``field_id``, ``origin``) and
codebooks. Search is bound per unit to the episode's universe
(fixed for A1/A2, expanding for A3/A4) through :class:`SearchTools`.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import pandas as pd

from rap_benchmark.agents import prompts
from rap_benchmark.agents.backends import retry_note
from rap_benchmark.agents.episode import Episode, UnitResult, run_episode
from rap_benchmark.agents.protocol import Backend, EpisodeContext, UnitContext
from rap_benchmark.agents.store import RunStore, StoreKey, UnitKey
from rap_benchmark.agents.toolset import SearchToolSet
from rap_benchmark.core.dates import parse_date
from rap_benchmark.core.errors import InputError, Interrupted, StoppedEarly
from rap_benchmark.core.records import DIRECTION_KEYS, Codebook, Condition, InvalidReason, Regime, Task
from rap_benchmark.core.serial import Record
from rap_benchmark.core.spec import BENCHMARK_VERSION, BenchmarkSpec, package_version
from rap_benchmark.llmclient.health import retry_notes
from rap_benchmark.llmclient.pricing import PriceTable, default_prices

if TYPE_CHECKING:
    from rap_benchmark.core.artifacts import Instance, PublicInstance


SearchFn = Callable[..., dict[str, Any]]
"""A bound search tool: ``search(query, start_date=None, end_date=None) -> observation dict``."""


class ToolProvider(Protocol):
    def bind(self, field_id: str, origin: str, regime: Regime) -> tuple[SearchFn, dict[str, Any]]: ...


class Unit(Protocol):
    """What :func:`run_units` runs: a store key, a backend context, and an episode opened at start."""

    key: StoreKey
    context: UnitContext

    def open(self, tools: Any) -> Episode: ...

    def record_meta(self, episode: Episode) -> dict[str, Any]: ...


class SearchTools:
    """Binds the project's Search tool (rap_benchmark.bm25) to one episode universe."""

    def __init__(self, inst: PublicInstance) -> None:
        self.inst = inst
        self._engine: Any = None

    @property
    def engine(self) -> Any:
        if self._engine is None:
            from rap_benchmark.bm25 import SearchEngine

            self._engine = SearchEngine.from_instance(self.inst)
        return self._engine

    def bind(self, field_id: str, origin: str, regime: Regime) -> tuple[SearchFn, dict[str, Any]]:
        from rap_benchmark.bm25.tool import make_search_tool
        from rap_benchmark.tools import tool_schema

        fn = make_search_tool(self.engine, field_id, origin, Regime(regime))
        return fn, tool_schema(fn)


@dataclass(frozen=True)
class UnitSpec:
    """Everything needed to run one unit (no target)."""

    key: UnitKey
    context: EpisodeContext
    user_prompt: str
    regime: Regime | None  # the Search universe, None for closed-book units
    max_tokens: int
    max_search_calls: int

    @classmethod
    def of(
        cls,
        key: UnitKey,
        task: Task,
        codebook: Codebook,
        spec: BenchmarkSpec,
        user_prompt: str,
        *,
        closed_book: bool = False,
        max_tokens: int | None = None,
    ) -> UnitSpec:
        """The unit ``key`` with Search over its condition's universe (none, and no calls, when
        ``closed_book``) and the spec's completion cap for that (unless ``max_tokens``)."""
        regime = None if closed_book else key.condition.regime
        origin = parse_date(key.origin)
        ctx = EpisodeContext(key.model, key.field_id, origin, key.condition, task, codebook, spec, key.variant)
        cap = max_tokens or default_max_tokens(Condition.A0 if closed_book else key.condition, spec)
        return cls(key, ctx, user_prompt, regime, cap, 0 if closed_book else spec.max_search_calls)

    def open(self, tools: ToolProvider | None) -> Episode:
        """The unit's episode: the RAP prompt, and Search bound to its universe (None for A0)."""
        toolset = None
        if self.regime is not None:
            if tools is None:
                raise ValueError(f"{self.key.id} needs Search but no tool provider was given")
            toolset = SearchToolSet(*tools.bind(self.key.field_id, self.key.origin, self.regime))
        return Episode(
            messages=prompts.initial_messages(self.user_prompt),
            tools=toolset,
            max_tokens=self.max_tokens,
            max_tool_calls=self.max_search_calls,
            temperature=self.context.spec.temperature,
        )

    def record_meta(self, episode: Episode) -> dict[str, Any]:
        return {
            "regime": self.regime.value if self.regime else None,
            "task": self.context.task.value,
            "max_tokens": self.max_tokens,
            "max_search_calls": self.max_search_calls,
            "prompt_version": prompts.PROMPT_VERSION,
        }


def episode_cells(
    inst: PublicInstance | Instance, *, fields: Iterable[str] | None = None, origins: Iterable[str] | None = None
) -> list[tuple[str, str]]:
    """Sorted unique (field_id, origin) cells of the instance, read from key columns only."""
    keys = inst.episodes[["field_id", "origin"]].drop_duplicates()
    cells = sorted((str(f), parse_date(o).isoformat()) for f, o in keys.itertuples(index=False))
    filters = (("fields", fields, lambda f: f), ("origins", origins, lambda o: parse_date(o).isoformat()))
    for i, (what, given, normalise) in enumerate(filters):
        if given is not None:
            wanted = {normalise(v) for v in given}
            unknown = wanted - {c[i] for c in cells}
            if unknown:
                raise InputError(f"unknown {what}: {', '.join(sorted(unknown))}")
            cells = [c for c in cells if c[i] in wanted]
    return cells


def default_max_tokens(condition: Condition, spec: BenchmarkSpec) -> int:
    """The spec's completion cap: closed-book (A0) or search conditions."""
    return spec.max_tokens_closed if Condition(condition).regime is None else spec.max_tokens_search


def native_units(
    model: str,
    codebooks: dict[str, Codebook],
    cells: Sequence[tuple[str, str]],
    conditions: Sequence[Condition],
    spec: BenchmarkSpec,
    *,
    max_tokens: int | None = None,
) -> list[UnitSpec]:
    """The native A0-A4 units of ``cells`` x ``conditions``, ordered by (condition, field, origin)."""
    units = []
    for condition in sorted({Condition(c) for c in conditions}, key=lambda c: c.value):
        for field_id, origin in cells:
            cb = codebooks[field_id]
            prompt = prompts.condition_prompt(cb, origin, condition, spec)
            key = UnitKey(model, field_id, origin, condition)
            units.append(UnitSpec.of(key, condition.task, cb, spec, prompt, max_tokens=max_tokens))
    return units


@dataclass
class RunStats(Record):
    selected: int = 0
    skipped: int = 0
    executed: int = 0
    valid: int = 0
    invalid: int = 0
    retries: int = 0
    tokens: int = 0
    cost_usd: float = 0.0
    unusable_files: int = 0
    invalid_reasons: dict[str, int] = field(default_factory=dict)
    first_failure: str | None = None  # "reason: detail" of the first unit that failed in this call


def select_shard(units: Sequence[Any], shard: tuple[int, int]) -> list[Any]:
    i, n = shard
    return [u for u in units if u.key.shard(n) == i]


async def run_units(
    units: Sequence[Unit],
    backend: Backend,
    store: RunStore,
    tools: Any = None,
    *,
    concurrency: int = 4,
    prices: PriceTable | None = None,
    progress: bool = True,
    limit: int | None = None,
    on_result: Callable[[StoreKey, dict[str, Any]], None] | None = None,
) -> RunStats:
    """Run every unit that is not already done (valid) in ``store``; return tallies.

    Units are started in order; at most ``concurrency`` run at once. ``limit`` caps how many units
    are executed in this call (already-done units do not count). ``tools`` is handed to each
    unit's ``open`` (RAP: the :class:`ToolProvider` that binds Search). Unusable unit files are
    logged, then rerun. While the backend retries requests, the progress line says so (the
    endpoint, the last error, the next try). When a unit raises (the endpoints stopped answering:
    :class:`~rap_benchmark.llmclient.health.EndpointDown`) or the run is cancelled, the units in
    flight are cancelled unrecorded and the exception goes on; the units stored stay stored.
    """
    from tqdm import tqdm

    prices = prices or default_prices()
    with store.writer():
        stats = RunStats(selected=len(units))
        _, unusable = store.scan_units()
        for why in unusable:
            store.log_event(None, "unusable_unit_file", detail=why)
        stats.unusable_files = len(unusable)
        todo = []
        for u in units:
            if store.is_done(u.key):
                stats.skipped += 1
            else:
                todo.append(u)
        if limit is not None:
            todo = todo[: max(0, limit)]
        sem = asyncio.Semaphore(max(1, concurrency))
        bar = tqdm(
            total=len(todo), desc="units", unit="unit", file=sys.stderr, disable=not progress, dynamic_ncols=True
        )
        retrying = [""]

        def show(refresh: bool = False) -> None:
            tally = f"done={stats.executed}, invalid={stats.invalid}, retries={stats.retries}, tokens={stats.tokens}"
            bar.set_postfix_str(tally + (f", {retrying[0]}" if retrying[0] else ""), refresh=refresh)

        def show_retrying(note: str) -> None:
            retrying[0] = note
            show(refresh=True)

        async def one(u: Unit) -> None:
            async with sem:
                store.log_event(u.key, "start")
                episode = u.open(tools)
                result: UnitResult = await run_episode(backend, u.context, episode)
                cost = prices.cost_usd(u.key.model, result.prompt_tokens, result.completion_tokens)
                record = {**result.to_dict(), "cost_usd": cost, **u.record_meta(episode)}
                store.save(u.key, record)
                store.log_event(u.key, "done", valid=result.valid)
                stats.executed += 1
                stats.valid += int(result.valid)
                stats.invalid += int(not result.valid)
                stats.retries += result.retries
                stats.tokens += result.prompt_tokens + result.completion_tokens
                stats.cost_usd += cost or 0.0
                if not result.valid:
                    why = (result.invalid_reason or InvalidReason.MISSING).value
                    stats.invalid_reasons[why] = stats.invalid_reasons.get(why, 0) + 1
                    if stats.first_failure is None:
                        stats.first_failure = f"{why}: {result.invalid_detail}" if result.invalid_detail else why
                bar.update(1)
                show()
                if on_result is not None:
                    on_result(u.key, record)

        tasks = [asyncio.ensure_future(one(u)) for u in todo]
        try:
            async with retry_notes(lambda: retry_note(backend), show_retrying):
                await asyncio.gather(*tasks)
        finally:
            for task in tasks:  # a unit that raised stops the others (gather leaves them running)
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            bar.close()
        return stats


def run_to_end(units: Sequence[Unit], backend: Backend, store: RunStore, tools: Any = None, **options: Any) -> RunStats:
    """:func:`run_units` in its own event loop; the backend is closed afterwards, whatever happened."""

    async def go() -> RunStats:
        try:
            return await run_units(units, backend, store, tools, **options)
        finally:
            await backend.aclose()

    return asyncio.run(go())


def run_keeping(
    units: Sequence[Unit],
    backend: Backend,
    store: RunStore,
    write: Callable[[], Path],
    tools: Any = None,
    *,
    what: str = "units",
    **options: Any,
) -> tuple[RunStats, Path]:
    """:func:`run_to_end`, then ``write()`` (the run's predictions file, whose path it returns).

    A run that stops early writes the file of its finished units all the same, then says what it
    kept: when the endpoints stopped answering, :class:`~rap_benchmark.core.errors.StoppedEarly`
    (their message, and how many of the ``units`` are done); on Ctrl-C,
    :class:`~rap_benchmark.core.errors.Interrupted`. The same call again resumes."""
    try:
        stats = run_to_end(units, backend, store, tools, **options)
    except (StoppedEarly, KeyboardInterrupt) as exc:
        path = write()
        done = sum(store.is_done(u.key) for u in units)
        kept = f"{done} of {len(units)} {what} done, kept in {path}" if path.is_file() else f"no {what} done yet"
        if isinstance(exc, KeyboardInterrupt):
            raise Interrupted(kept) from None
        raise StoppedEarly(f"{exc}; {kept}") from exc
    return stats, write()


def accounting_columns(rec: dict[str, Any], calls_key: str) -> dict[str, Any]:
    """The run metadata columns of a prediction row (validity reason and detail, attempts,
    tokens, cost, tool calls, response model) from a stored unit record. The wall time stays in
    the unit record only: a unit rerun after a crash takes another time, and the prediction file
    must be byte-identical whether or not the run was interrupted."""
    valid = bool(rec.get("valid"))
    return {
        "valid": valid,
        "invalid_reason": None if valid else (rec.get("invalid_reason") or InvalidReason.MISSING.value),
        "invalid_detail": None if valid else rec.get("invalid_detail"),
        "attempts": int(rec.get("attempts", 0)),
        "prompt_tokens": int(rec.get("prompt_tokens", 0)),
        "completion_tokens": int(rec.get("completion_tokens", 0)),
        "cost_usd": rec.get("cost_usd"),
        f"n_{calls_key}": int(rec.get(f"n_{calls_key}", 0)),
        "response_model": rec.get("response_model"),
    }


def predictions_frame(
    store: RunStore,
    manifest_hash: str,
    *,
    variant: str = "native",
    model: str | None = None,
    keys: Iterable[UnitKey] | None = None,
) -> pd.DataFrame:
    """Prediction rows (rap_benchmark.evaluation.predictions columns) from the store's units of ``variant``."""
    wanted = {k.id for k in keys} if keys is not None else None
    rows = []
    for rec in store.iter_units():
        if not UnitKey.is_key(rec["key"]):
            continue
        key = UnitKey.from_dict(rec["key"])
        if key.variant != variant or (model is not None and key.model != model):
            continue
        if wanted is not None and key.id not in wanted:
            continue
        w = rec.get("weights") if rec.get("valid") else None
        weights = [float(v) for v in w] if w is not None else [None] * len(DIRECTION_KEYS)
        acc = accounting_columns({**rec, "valid": w is not None}, "search_calls")
        cell = {"model": key.model, "condition": key.condition.value, "field_id": key.field_id, "origin": key.origin}
        status = {
            "valid": acc.pop("valid"),
            "invalid_reason": acc.pop("invalid_reason"),
            "manifest_hash": manifest_hash,
        }
        rows.append({**cell, **dict(zip(DIRECTION_KEYS, weights, strict=True)), **status, **acc})
    frame = pd.DataFrame(rows)
    if frame.empty:
        return frame
    for d in DIRECTION_KEYS:
        frame[d] = frame[d].astype("float64")
    frame["cost_usd"] = frame["cost_usd"].astype("float64")
    return frame.sort_values(["model", "condition", "field_id", "origin"], kind="stable").reset_index(drop=True)


def refuse_unsubmittable(
    run_dir: str | Path, run: dict[str, Any], store: RunStore, model: str | None, *, empty: bool, what: str
) -> None:
    """What ``rap submit prepare`` refuses in a run folder (an :class:`InputError`): no finished
    ``what`` of ``model`` (``empty``; the models it does hold are named), or one shard of a run."""
    if empty:
        found = sorted({str(r["key"].get("model")) for r in store.iter_units()})
        raise InputError(
            f"{run_dir} holds no finished {what} of model {model!r}"
            + (f" (models found: {', '.join(found)})" if found else "")
        )
    if run.get("shard") not in (None, "0/1"):
        raise InputError(f"{run_dir} is shard {run['shard']} of a run: rap runs merge the shards first")


def prepare_submission(
    run_dir: str | Path,
    out: str | Path,
    *,
    model: str | None = None,
    knowledge_cutoff: str | dt.date | None = None,
    submitter: str | None = None,
    notes: str | None = None,
    prices: Any = None,
) -> tuple[Path, Path]:
    """A submission from a ``rap run`` folder: ``out`` (the predictions of its units) and
    ``out.meta.json`` (model, conditions, tools, manifest hash from ``run.json``, and the usage
    the unit records hold: tokens, Search calls and cost per condition; a unit's cost is unknown
    when the price table did not know its model, and so is then the condition's total).

    Every input is checked before anything is written; both files are replaced atomically.
    """
    from rap_benchmark.evaluation.submissions import meta_from_rows, write_submission
    from rap_benchmark.evaluation.usage import usage_from_rows

    store = RunStore(run_dir)
    run = store.read_run()
    if run is None:
        raise InputError(f"{run_dir} is not a rap run folder (no run.json)")
    name = model or run.get("model")
    frame = predictions_frame(store, str(run["manifest_hash"]), model=name)
    refuse_unsubmittable(run_dir, run, store, name, empty=frame.empty, what="RAP unit")
    backend = run.get("backend") or "unknown backend"
    source = f"rap run store {Path(run_dir).name} (backend {backend}, prompt {run.get('prompt_version')})"
    meta = meta_from_rows(
        frame,
        usage=usage_from_rows(frame, source=source, prices=prices),
        knowledge_cutoff=knowledge_cutoff,
        submitter=submitter,
        notes=notes,
        benchmark_version=run.get("benchmark_version") or BENCHMARK_VERSION,
    )
    return write_submission(frame, out, meta)


PREDICTIONS_FILE = "predictions.jsonl"
MATCH_KEYS = ("model", "manifest_hash", "prompt_version", "max_search_calls", "max_tokens", "shard")


def run_benchmark(
    inst: PublicInstance,
    backend: Backend,
    out: str | Path,
    *,
    model: str,
    conditions: Sequence[Condition],
    fields: Iterable[str] | None = None,
    origins: Iterable[str] | None = None,
    concurrency: int = 4,
    limit: int | None = None,
    shard: tuple[int, int] = (0, 1),
    max_tokens: int | None = None,
    max_search_calls: int | None = None,
    backend_name: str = "",
    tools: ToolProvider | None = None,
    prices: PriceTable | None = None,
    progress: bool = True,
) -> tuple[RunStats, Path]:
    """Run (or resume) a benchmark run into ``out`` and write ``out/predictions.jsonl``.

    A restart with the same arguments skips units already valid in the store and reruns missing
    or invalid ones. A run that stops early (:func:`run_keeping`) writes the predictions of the
    units it finished before it raises. ``run.json`` pins the model, instance manifest hash, prompt version, caps and
    shard; a restart that disagrees on any of them is refused. The folder is locked for the whole
    run (:class:`rap_benchmark.core.fsio.FolderBusy` when another process holds it).
    """
    from rap_benchmark.core.artifacts import PublicInstance
    from rap_benchmark.evaluation.predictions import write_predictions

    if not isinstance(inst, PublicInstance):  # the full instance carries the targets
        raise TypeError(f"run_benchmark takes instance.public_view() (a PublicInstance), not {type(inst).__name__}")
    spec = inst.spec if max_search_calls is None else inst.spec.replace(max_search_calls=int(max_search_calls))
    # every argument is checked before run.json is written: a refused run must not pin the folder
    cells = episode_cells(inst, fields=fields, origins=origins)
    units = select_shard(native_units(model, inst.codebooks, cells, conditions, spec, max_tokens=max_tokens), shard)
    store = RunStore(out)
    with store.writer():  # one writer per run folder: a second rap run on it is refused
        store.init_run(
            {
                "model": model,
                "backend": backend_name,
                "manifest_hash": inst.manifest_hash,
                "instance": inst.spec.name,
                "benchmark_version": inst.spec.version,  # the instance's: what its scores mean
                "package_version": package_version(),  # the rap_benchmark package that ran it
                "prompt_version": prompts.PROMPT_VERSION,
                "max_search_calls": spec.max_search_calls,
                "max_tokens": max_tokens,
                "temperature": spec.temperature,
                "shard": f"{shard[0]}/{shard[1]}",
            },
            must_match=MATCH_KEYS,
        )
        if tools is None and any(u.regime is not None for u in units):
            tools = SearchTools(inst)

        def write() -> Path:
            frame = predictions_frame(store, inst.manifest_hash, model=model)
            path = store.root / PREDICTIONS_FILE
            if not frame.empty:
                write_predictions(frame, path)
            return path

        options = {"concurrency": concurrency, "prices": prices, "progress": progress, "limit": limit}
        return run_keeping(units, backend, store, write, tools, **options)
