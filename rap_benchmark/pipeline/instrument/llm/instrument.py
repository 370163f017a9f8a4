"""The LLM instrument's verbs: :func:`run_llm_instrument` (send, or answer from the store, every
request of the pipeline in :mod:`.stages`; write the review and the summary; fail a stage that
lost too much) and :func:`estimate` (the dry run: the same pipeline with typical stand-in
replies, nothing sent, tokens and price per stage)."""

from __future__ import annotations

import asyncio
import hashlib
import shlex
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pandas as pd

from rap_benchmark.core.errors import InputError, UserError
from rap_benchmark.core.spec import BenchmarkSpec
from rap_benchmark.pipeline.fields import FieldInfo
from rap_benchmark.pipeline.instrument.llm.batch import BatchFolder, WaitingForReplies
from rap_benchmark.pipeline.instrument.llm.client import (
    BatchClient,
    Client,
    LLMClient,
    RoundPending,
    StageUsage,
    StandInClient,
)
from rap_benchmark.pipeline.instrument.llm.prompts import PROMPT_VERSION, prompt_hashes
from rap_benchmark.pipeline.instrument.llm.records import PipelineConfig, PipelineResult, StageLost, stage_sizes
from rap_benchmark.pipeline.instrument.llm.stages import Pipeline
from rap_benchmark.pipeline.instrument.llm.store import REQUESTS_FILE, RequestStore, read_requests

SUMMARY_FILE = "summary.json"
REVIEW_FILE = "review.md"
MAX_DROP_SHARE = 0.05  # a stage that leaves more of its units without a valid answer fails the build
FALLBACKS = ("offline",)
CONSTRUCTIONS = ("paper", "compact")


class StageFailed(UserError, RuntimeError):
    """The construction finished but a stage lost too much (or no field was kept): the build
    stops before anything is written; the store keeps every answer and review.md says why."""


@dataclass(frozen=True)
class LLMSettings:
    """Where the requests go and what they may cost (not part of the artifacts)."""

    base_urls: tuple[str, ...]
    store_dir: Path | None
    max_in_flight: int = 64
    timeout_s: float = 300.0
    max_transport_retries: int = 8
    max_spend_usd: float | None = None
    prices_path: str | None = None
    fallback: str | None = None  # "offline": a refused request (HTTP 4xx) falls back, counted
    batch_dir: Path | None = None  # batch files instead of endpoints (:mod:`.batch`)
    recorded: Path | None = None  # replies shipped with the package: never asked again (alone: a replay)


@dataclass(frozen=True)
class LLMInstrument:
    """The LLM instrument as ``build_instance`` uses it: what to ask and where to send it."""

    config: PipelineConfig
    settings: LLMSettings

    def check(self) -> None:
        """Refuse, before anything is read or sent, endpoints that are not URLs, a model that no
        endpoint serves, and a spend cap without prices (InputError)."""
        from rap_benchmark.llmclient.endpoints import check_url, parse_endpoint

        if self.settings.fallback not in (None, *FALLBACKS):
            raise InputError(f"--fallback: {self.settings.fallback!r} is not one of: {', '.join(FALLBACKS)}")
        bound = [parse_endpoint(u) for u in self.settings.base_urls]
        for _, url in bound:
            check_url(url)
        if bound:
            served = {m for m, _ in bound}
            for model in (self.config.model, *self.config.draft_models):
                if model not in served and None not in served:
                    raise InputError(f"no --base-url serves model {model!r} (bind one with {model}=URL)")
        _check_prices(self.config, self.settings)

    def run(
        self,
        papers: pd.DataFrame,
        memberships: pd.DataFrame,
        candidates: dict[str, FieldInfo],
        spec: BenchmarkSpec,
        *,
        progress: bool = False,
    ) -> tuple[PipelineResult, dict[str, Any]]:
        if self.replay:
            assert self.settings.recorded is not None
            return replay(papers, memberships, candidates, spec, self.config, self.settings.recorded, progress=progress)
        return run_llm_instrument(papers, memberships, candidates, spec, self.config, self.settings, progress=progress)

    @property
    def replay(self) -> bool:
        """Answered from the recorded replies alone: no endpoint, no batch folder, no store."""
        return not self.settings.base_urls and self.settings.batch_dir is None and self.settings.recorded is not None

    @classmethod
    def recorded_for(cls, spec: BenchmarkSpec, **settings: Any) -> LLMInstrument | None:
        """The LLM instrument a spec's ``extra.llm_instrument`` names, answered from the replies it
        ships (``replies``: a file under the package's data folder), or None when it names none.
        ``settings`` (LLMSettings fields) add a transport for the requests without a reply."""
        block = spec.extra.get("llm_instrument")
        if not block:
            return None
        from rap_benchmark.core import resources

        config = PipelineConfig(
            model=block["model"],
            draft_models=tuple(block.get("draft_models") or (block["model"], block["model"])),  # type: ignore[arg-type]
            construction=block.get("construction", "paper"),
            **dict(block.get("config", {})),
        )
        recorded = resources.DATA_DIR / block["replies"]
        return cls(config, LLMSettings(**{"base_urls": (), "store_dir": None, **settings, "recorded": recorded}))


def _prices(path: str | None) -> Any:
    from rap_benchmark.llmclient.pricing import load_prices

    return load_prices(path)


def _check_prices(config: PipelineConfig, settings: LLMSettings) -> None:
    if settings.max_spend_usd is None:
        return
    prices = _prices(settings.prices_path)
    for model in {config.model, *config.draft_models}:
        if prices.cost_usd(model, 1, 1) is None:
            raise InputError(
                f"--max-spend-usd needs a price for model {model!r}: add it to a price table and pass --prices"
            )


def run_llm_instrument(
    papers: pd.DataFrame,
    memberships: pd.DataFrame,
    candidates: dict[str, FieldInfo],
    spec: BenchmarkSpec,
    config: PipelineConfig,
    settings: LLMSettings,
    *,
    progress: bool = False,
) -> tuple[PipelineResult, dict[str, Any]]:
    """Run the pipeline through the endpoints; (result, ledger entry). Writes the store's
    ``review.md`` and ``summary.json``. Raises :class:`StopRun` (spend cap, no endpoint) after
    storing every answer received: rerunning resumes."""
    from rap_benchmark.core.fsio import atomic_write_text
    from rap_benchmark.pipeline.instrument.llm.review import review_markdown

    _check_prices(config, settings)
    lanes = 1 if settings.batch_dir is not None else len(settings.base_urls)
    config = PipelineConfig(**{**config.__dict__, "concurrency": settings.max_in_flight * lanes})
    folder = None
    if settings.batch_dir is not None:
        folder = BatchFolder.open(settings.batch_dir, build_fingerprint(papers, spec, config))
    assert settings.store_dir is not None
    with RequestStore(settings.store_dir) as store:
        strict = None if settings.fallback is not None else MAX_DROP_SHARE
        stopped: list[Any] = []
        pipeline = pipeline_for(config)
        client = _client(store, folder, config, settings)
        if settings.recorded is not None:  # after the client counted the store's spend: these were not paid here
            from rap_benchmark.pipeline.instrument.llm.store import read_recorded

            for key, rec in read_recorded(settings.recorded).items():
                store.records.setdefault(key, rec)  # answered already: never asked, never rewritten
        pending: list[RoundPending] = []

        async def main() -> PipelineResult:
            run = pipeline(client, config, spec, progress, strict)
            async with client:
                try:
                    return await run.run(papers, memberships, candidates)
                except StageLost as lost:
                    stopped.append(lost)
                except RoundPending as waiting:
                    pending.append(waiting)
                return run.partial()

        start, cpu_start = time.perf_counter(), time.process_time()
        try:
            result = asyncio.run(main())
        finally:
            store.flush()
        wall_s, cpu_s = time.perf_counter() - start, time.process_time() - cpu_start
        stages = client.accounting.table()
        summary = {
            "construction": config.construction,
            "rounds": client.rounds if folder is None else len(folder.rounds),
            "stages": stages,
            "truncated_replies": sum(v["truncated"] for v in stages.values()),
            "refused_requests": sum(v["refused"] for v in stages.values()),
            "dropped": {k: d.__dict__ for k, d in result.drops.items() if d.units},
            "store_records": len(store.records),
            "loaded_from_store": store.loaded,
            "repaired_bytes": store.repaired_bytes,
            "transport_errors": getattr(client, "transport_errors", 0),
            "spent_usd_in_store": round(getattr(client, "spent", 0.0), 6),
            "wall_s": round(wall_s, 3),
            "client_cpu_s": round(cpu_s, 3),
        }
        atomic_write_text(settings.store_dir / SUMMARY_FILE, orjson.dumps(summary, option=orjson.OPT_INDENT_2).decode())
        entry = ledger_entry(config, result, len(candidates), spec.seed)
        header = {
            "model": config.model,
            "drafting models": ", ".join(config.draft_models),
            "fallback": settings.fallback or "none (a refused request stops the build)",
        }
        if stopped:
            header["stopped"] = f"after stage {stopped[0].stage} (it lost more than {100 * MAX_DROP_SHARE:.0f}%)"
        waiting = None
        if pending:
            assert isinstance(client, BatchClient) and folder is not None
            waiting = next_round(folder, client, config)
            header["waiting"] = waiting
        atomic_write_text(settings.store_dir / REVIEW_FILE, review_markdown(result, header, stages))
    if waiting is not None:
        raise WaitingForReplies(waiting)
    check_outcome(result, settings, settings.store_dir / REVIEW_FILE)
    return result, entry


def pipeline_for(config: PipelineConfig) -> type[Pipeline]:
    """The construction's pipeline class (``paper`` or ``compact``)."""
    if config.construction not in CONSTRUCTIONS:
        raise InputError(f"--construction: {config.construction!r} is not one of: {', '.join(CONSTRUCTIONS)}")
    if config.construction == "compact":
        from rap_benchmark.pipeline.instrument.llm.compact import CompactPipeline

        return CompactPipeline
    return Pipeline


def _client(store: RequestStore, folder: BatchFolder | None, config: PipelineConfig, settings: LLMSettings) -> Client:
    """The transport: batch files when the settings name a folder, else the endpoints."""
    prices = _prices(settings.prices_path)
    if folder is not None:
        return BatchClient(
            store,
            folder,
            prices,
            extra_body=config.extra_body,
            fallback=settings.fallback,
            max_failures=settings.max_transport_retries,
        )
    return LLMClient(
        settings.base_urls,
        store,
        prices,
        max_in_flight=settings.max_in_flight,
        timeout_s=settings.timeout_s,
        max_transport_retries=settings.max_transport_retries,
        max_spend_usd=settings.max_spend_usd,
        extra_body=config.extra_body,
        fallback=settings.fallback,
    )


def build_fingerprint(papers: pd.DataFrame, spec: BenchmarkSpec, config: PipelineConfig) -> str:
    """What a batch folder belongs to: the corpus (ids and dates), the spec's constants (not its
    prose, version or recorded replies), the construction and its models. Other settings (batch
    sizes, samples) may change between runs: a request they change is another request (its key),
    and the replies of the old one are simply not used."""
    h = hashlib.sha256()
    constants = spec.to_dict()
    for prose in ("description", "_why", "version"):  # words and the version: not what is asked
        constants.pop(prose, None)
    constants["extra"] = {k: v for k, v in constants.get("extra", {}).items() if k != "llm_instrument"}
    h.update(orjson.dumps(constants, option=orjson.OPT_SORT_KEYS))
    who = [config.construction, config.model, *config.draft_models]
    h.update(orjson.dumps(who))
    h.update("\n".join(papers["arxiv_id"].astype(str) + " " + papers["date"].astype(str)).encode())
    return h.hexdigest()


def next_round(folder: BatchFolder, client: BatchClient, config: PipelineConfig) -> str:
    """Write the requests the construction waits for as the next round (those a provider has not
    yet answered at all stay where they are); the one line that says what to do next."""
    keys = list(client.pending)
    outstanding = folder.outstanding(keys)
    new = [k for k in keys if k not in set(outstanding)]
    root = folder.root
    if not new:
        files = sorted({folder.requests[k][0] for k in outstanding})
        return (
            f"waiting for batch replies: {len(outstanding):,} requests of {', '.join(files)} have no reply in "
            f"{root} yet; put the output file(s) there (any name ending in .jsonl) and rerun this command"
        )
    paths = folder.write_round({k: client.pending[k] for k in new})
    prompt, completion = client.pending_tokens
    cost = client.pending_cost
    price = (
        f"at most ${cost / 2:,.2f} at a batch API's half price"
        if cost is not None
        else "price unknown (no price for the model: --prices)"
    )
    shown = paths[0] if len(paths) == 1 else f"{paths[0].parent}/{paths[0].name.split('.part-')[0]}.part-*"
    models = sorted({m for m, _ in client.pending.values()})
    waited = f" ({len(outstanding):,} more still wait in earlier files)" if outstanding else ""
    return (
        f"round {len(folder.rounds)}: wrote {len(new):,} requests{waited} to {shown} ({prompt:,} prompt tokens, at "
        f"most {completion:,} completion tokens; {price}); run each file with "
        f"`vllm run-batch -i FILE -o {root}/round-{len(folder.rounds):03d}.output.jsonl --model {shlex.quote(models[0])}` "
        f"or a provider's Batch API (OpenAI: upload it as is; Anthropic Message Batches: each body as params), "
        f"put the output file(s) in {root} and rerun this command"
    )


class MissingReplies(UserError, RuntimeError):
    """A replayed construction asked a request its recorded replies do not hold."""


def replay(
    papers: pd.DataFrame,
    memberships: pd.DataFrame,
    candidates: dict[str, FieldInfo],
    spec: BenchmarkSpec,
    config: PipelineConfig,
    recorded: Path,
    *,
    progress: bool = False,
) -> tuple[PipelineResult, dict[str, Any]]:
    """The construction answered from recorded replies alone (no endpoint, nothing written):
    byte-identical to the build that recorded them. A request without a recorded reply (a code,
    prompt or corpus change) fails the build in one line, with the command that writes the
    missing requests as a batch file; it never falls back."""
    from rap_benchmark.pipeline.instrument.llm.client import ReplayClient
    from rap_benchmark.pipeline.instrument.llm.store import read_recorded

    if not recorded.is_file():
        raise MissingReplies(f"the recorded replies {recorded} are not installed (reinstall the package)")
    records = read_recorded(recorded)
    client = ReplayClient(records, _prices(None), config.extra_body)
    pipeline = pipeline_for(config)(client, config, spec, progress, MAX_DROP_SHARE)

    async def main() -> PipelineResult:
        async with client:
            return await pipeline.run(papers, memberships, candidates)

    try:
        result = asyncio.run(main())
    except RoundPending:
        stages = ", ".join(sorted(set(client.missing.values())))
        raise MissingReplies(
            f"{len(client.missing):,} requests of the {config.construction} construction ({stages}) have no "
            f"recorded reply in {recorded.name} (did code, a prompt or the corpus change?); nothing was built; "
            f"`rap build --instance {spec.name} --out OUT --instrument llm --batch BATCH_DIR` writes them as a "
            "batch file (the recorded replies answer the rest)"
        ) from None
    except StageLost as lost:
        raise StageFailed(
            f"LLM instrument (replayed from {recorded.name}): stage {lost.stage} lost too many units"
        ) from None
    entry = ledger_entry(config, result, len(candidates), spec.seed)
    entry["replayed_from"] = recorded.name
    entry["replies_sha256"] = hashlib.sha256(recorded.read_bytes()).hexdigest()
    if not result.codebooks:
        raise StageFailed(f"LLM instrument (replayed from {recorded.name}): no field kept")
    return result, entry


def check_outcome(result: PipelineResult, settings: LLMSettings, review: Path) -> None:
    """Raise :class:`StageFailed` when no field was kept, or (without a fallback) when a stage
    left more than 5% of its units without a valid answer: one line, the stage, the first reasons."""
    where = f"every answer is kept in {settings.store_dir}; see {review}"
    if settings.fallback is None:
        for stage, d in result.drops.items():
            if d.units and d.share > MAX_DROP_SHARE:
                raise StageFailed(
                    f"LLM instrument: stage {stage} lost {d.dropped} of {d.units} units ({100 * d.share:.1f}% > "
                    f"{100 * MAX_DROP_SHARE:.0f}%): {' | '.join(d.reasons[:2])}; {where}"
                )
    if not result.codebooks:
        first = next((d for d in result.drops.values() if d.reasons), None)
        why = f": {first.reasons[0]}" if first is not None else ""
        raise StageFailed(f"LLM instrument: no field kept (every field was dropped){why}; {where}")


def ledger_entry(config: PipelineConfig, result: PipelineResult, candidates: int, seed: int) -> dict[str, Any]:
    """What the ledger records about the LLM construction (deterministic)."""
    entry = {
        "name": "llm",
        "construction": config.construction,
        "config": config.to_dict(),
        "prompt_version": PROMPT_VERSION,
        "prompts_sha256": prompt_hashes(),
        **stage_sizes(result),
        "notes": list(result.notes),
    }
    if result.compact is not None:
        from rap_benchmark.pipeline.instrument.llm.compact import summary

        entry["compact"] = summary(result.compact, candidates, seed)
    return entry


def estimate(
    papers: pd.DataFrame,
    memberships: pd.DataFrame,
    candidates: dict[str, FieldInfo],
    spec: BenchmarkSpec,
    config: PipelineConfig,
    *,
    store_dir: Path | None = None,
    prices_path: str | None = None,
    tokenizer: str | None = None,
    recorded: Path | None = None,
) -> dict[str, dict[str, Any]]:
    """The dry run: requests, tokens and price per stage, sending nothing. The real pipeline is
    walked; answers in the store (``store_dir``, read only, by the build's own reader
    :func:`.store.read_requests`) or among the ``recorded`` replies count as ``from_store``,
    every other request is rendered and answered with a typical stand-in reply
    (:mod:`.standin`). Tokens are counted with
    ``tokenizer`` (a Hugging Face name or folder) when given, else by :mod:`.tokens`.
    """
    records = {} if store_dir is None else read_requests(Path(store_dir) / REQUESTS_FILE)[0]
    if recorded is not None:  # replies the package ships: answered, never asked
        from rap_benchmark.pipeline.instrument.llm.store import read_recorded

        records = {**read_recorded(recorded), **records}
    client = StandInClient(records, _prices(prices_path), tokenizer, config.extra_body)
    asyncio.run(pipeline_for(config)(client, config, spec).run(papers, memberships, candidates))
    table = client.accounting.table()
    total = {k: sum(v[k] for v in table.values()) for k in StageUsage().to_dict() if k != "cost_usd"}
    costs = [v["cost_usd"] for v in table.values()]
    total["cost_usd"] = None if any(c is None for c in costs) else round(sum(costs), 6)
    total["rounds"] = client.rounds
    return {**table, "total": total}
