"""Sending the pipeline's requests: keyed store, several endpoints, accounting, spend cap.

:class:`LLMClient` sends chat requests (temperature 0) through
:class:`rap_benchmark.llmclient.endpoints.EndpointPool` (failover, backoff, resting endpoints).
Every request is keyed by the sha256 of its canonical body (:func:`request_body`): a key already
in the :class:`~.store.RequestStore` is answered from it, two identical requests in flight are
sent once. A refused request (HTTP 4xx other than 429) stops the run (:class:`RequestRefused`)
unless the offline fallback was asked for. The pipeline reads answers by request, so results
never depend on which endpoint answered or when.

:class:`StandInClient` answers what the store does not hold with :mod:`.standin`'s typical
replies, so the dry run walks the real pipeline and renders every real prompt.

Spend: each answer is priced from llmclient/pricing.py. With a cap, a request is sent only while
the stored spend plus the worst case of everything in flight (estimated prompt tokens plus
``max_tokens``) stays within it; otherwise the run stops cleanly (:class:`SpendCapReached`) once
the requests in flight are stored, and a rerun with a higher cap resumes.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections import defaultdict
from collections.abc import Awaitable, Callable, Sequence
from contextvars import ContextVar
from dataclasses import asdict, dataclass, field
from typing import Any

import orjson

from rap_benchmark.core.errors import StoppedEarly, UserError
from rap_benchmark.llmclient.endpoints import EndpointPool, Refused, call_with_failover, check_extra_body
from rap_benchmark.llmclient.failures import BackendFailure, reasoning_of
from rap_benchmark.llmclient.health import failure_line, retry_notes
from rap_benchmark.llmclient.pricing import PriceTable
from rap_benchmark.pipeline.instrument.llm.batch import AwaitingReply, BatchFolder
from rap_benchmark.pipeline.instrument.llm.store import RequestStore
from rap_benchmark.pipeline.instrument.llm.tokens import count_prompt_tokens, count_tokens
from rap_benchmark.pipeline.instrument.llm.validate import split_reasoning

FLUSH_EVERY_S = 0.05
_CHAIN: ContextVar[list[int] | None] = ContextVar("rap_request_chain", default=None)
"""The requests not yet answered that the running unit (a job of :func:`run_all`) has asked, one
after the other: the deepest chain of a stage is the rounds a batch transport needs for it."""


class RoundPending(Exception):
    """Some units of a stage wait for batch replies: the construction stops after the stage.
    ``results`` are the stage's results in job order (None for a unit that waits)."""

    def __init__(self, units: int, results: list[Any]) -> None:
        super().__init__(f"{units} units wait for replies")
        self.units = units
        self.results = results


class StopRun(UserError, RuntimeError):
    """The run stopped cleanly; everything answered so far is in the store (rerun to resume)."""


class SpendCapReached(StopRun):
    pass


class EndpointsFailed(StopRun, StoppedEarly):
    """No endpoint answered a request (exit 75; the same command resumes from the store)."""


class RequestRefused(StopRun):
    """An endpoint refused a request (HTTP 4xx other than 429): the request itself is wrong for
    this server (context too long, unknown model, a bad parameter), so no retry can help."""


@dataclass(frozen=True, slots=True)
class Reply:
    content: str | None  # the answer, reasoning cut out; None when refused (HTTP 4xx, with --fallback)
    error: str | None
    prompt_tokens: int
    completion_tokens: int
    cached: bool
    finish_reason: str | None = None  # "length": cut at max_tokens
    reasoning: str | None = None  # reasoning_content, or the reply's <think> blocks

    @property
    def truncated(self) -> bool:
        return self.finish_reason == "length"


@dataclass
class StageUsage:
    requests: int = 0  # answers used by the pipeline (sent now, or read from the store)
    sent: int = 0
    from_store: int = 0
    retries: int = 0  # requests that re-ask a unit (after an invalid or a truncated reply)
    truncated: int = 0  # replies cut at max_tokens (finish_reason "length")
    refused: int = 0  # requests an endpoint refused (HTTP 4xx), answered by the offline fallback
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = 0.0

    def add(
        self, prompt: int, completion: int, cost: float | None, *, cached: bool, retry: bool, truncated: bool
    ) -> None:
        self.requests += 1
        self.from_store += cached
        self.sent += not cached
        self.retries += retry
        self.truncated += truncated
        self.prompt_tokens += prompt
        self.completion_tokens += completion
        self.cost_usd = None if cost is None or self.cost_usd is None else self.cost_usd + cost

    def to_dict(self) -> dict[str, Any]:
        return asdict(self) | {"cost_usd": None if self.cost_usd is None else round(self.cost_usd, 6)}


def request_body(
    model: str, messages: Sequence[dict[str, str]], max_tokens: int, extra: dict[str, Any] | None = None
) -> bytes:
    """The canonical request: compact JSON, sorted keys; its sha256 is the request's key.

    ``extra`` holds the further body keys sent with every request (``chat_template_kwargs``,
    vLLM sampling options); none of them may replace one of the canonical keys."""
    body: dict[str, Any] = {"model": model, "messages": list(messages), "temperature": 0.0, "max_tokens": max_tokens}
    if extra:
        check_extra_body(extra, "the pipeline")
        body.update(extra)
    return orjson.dumps(body, option=orjson.OPT_SORT_KEYS)


@dataclass
class Accounting:
    prices: PriceTable
    stages: dict[str, StageUsage] = field(default_factory=lambda: defaultdict(StageUsage))

    def cost(self, model: str, prompt: int, completion: int) -> float | None:
        return self.prices.cost_usd(model, prompt, completion)

    def record(self, stage: str, model: str, rec: dict[str, Any], *, cached: bool, retry: bool) -> None:
        prompt, completion = rec["prompt_tokens"], rec["completion_tokens"]
        cost = self.cost(model, prompt, completion)
        truncated = rec.get("finish_reason") == "length"
        self.stages[stage].add(prompt, completion, cost, cached=cached, retry=retry, truncated=truncated)

    def refused(self, stage: str) -> None:
        self.stages[stage].refused += 1

    def table(self) -> dict[str, dict[str, Any]]:
        return {str(k): v.to_dict() for k, v in self.stages.items()}


class Client:
    """What both clients share: a request already answered (``records``, by key) is answered from
    there, any other by :meth:`_answer`; every answer is counted per stage."""

    def __init__(
        self, records: dict[str, dict[str, Any]], prices: PriceTable, extra_body: dict[str, Any] | None
    ) -> None:
        self.records = records
        self.accounting = Accounting(prices)
        self.extra_body = dict(extra_body or {})
        self.stop_reason: StopRun | None = None
        self.rounds = 0  # rounds of requests a batch transport needs (answered requests do not count)

    async def complete(
        self, stage: str, model: str, messages: list[dict[str, str]], max_tokens: int, *, retry: bool = False
    ) -> Reply:
        """The answer to one request, from the records or by :meth:`_answer`; ``retry`` marks a
        re-ask (counted). A refused request raises :class:`RequestRefused`, or with
        ``fallback="offline"`` comes back with ``error`` set."""
        body = request_body(model, messages, max_tokens, self.extra_body)
        key = hashlib.sha256(body).hexdigest()
        rec = self.records.get(key)
        cached = rec is not None
        if rec is None:
            chain = _CHAIN.get()
            if chain is not None:
                chain[0] += 1
            rec, cached = await self._answer(stage, model, key, body, messages, max_tokens)
        if rec.get("error") is not None:
            self.accounting.refused(stage)
            return Reply(None, rec["error"], 0, 0, False)
        self.accounting.record(stage, model, rec, cached=cached, retry=retry)
        tokens = rec["prompt_tokens"], rec["completion_tokens"]
        return Reply(rec["content"], None, *tokens, cached, rec.get("finish_reason"), rec.get("reasoning"))

    async def _answer(
        self, stage: str, model: str, key: str, body: bytes, messages: list[dict[str, str]], max_tokens: int
    ) -> tuple[dict[str, Any], bool]:
        """(the record answering a request not in ``records``, whether it is a stored answer)."""
        raise NotImplementedError


class LLMClient(Client):
    """Requests through the store to several endpoints (see the module docstring)."""

    def __init__(
        self,
        base_urls: Sequence[str],
        store: RequestStore,
        prices: PriceTable,
        *,
        max_in_flight: int = 64,
        timeout_s: float = 300.0,
        max_transport_retries: int = 8,
        max_spend_usd: float | None = None,
        api_key: str | None = None,
        extra_body: dict[str, Any] | None = None,
        fallback: str | None = None,
    ) -> None:
        super().__init__(store.records, prices, extra_body)
        self.pool = EndpointPool(base_urls, api_key=api_key, timeout_s=timeout_s, max_in_flight=max_in_flight)
        self.store = store
        self.max_transport_retries = max_transport_retries
        self.max_spend_usd = max_spend_usd
        self.spent = self._stored_spend()
        self._reserved = 0.0
        self._inflight: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self.transport_errors = 0
        self.fallback = fallback
        self._flusher: asyncio.Task[None] | None = None

    def _stored_spend(self) -> float:
        cost = self.accounting.cost
        return sum(cost(r["model"], r["prompt_tokens"], r["completion_tokens"]) or 0.0 for r in self.records.values())

    async def __aenter__(self) -> LLMClient:
        self._flusher = asyncio.get_running_loop().create_task(self._flush_loop())
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._flusher is not None:
            self._flusher.cancel()
        self.store.flush()
        await self.pool.aclose()

    async def _flush_loop(self) -> None:
        while True:
            await asyncio.sleep(FLUSH_EVERY_S)
            self.store.flush()

    async def _answer(
        self, stage: str, model: str, key: str, body: bytes, messages: list[dict[str, str]], max_tokens: int
    ) -> tuple[dict[str, Any], bool]:
        """Sent (see the module docstring); an identical request already in flight is sent once."""
        fut = self._inflight.get(key)
        if fut is not None:
            return await asyncio.shield(fut), True
        fut = asyncio.get_running_loop().create_future()
        self._inflight[key] = fut
        try:
            rec = await self._send(stage, model, key, body, messages, max_tokens)
        except BaseException as exc:
            fut.set_exception(exc)
            fut.exception()  # mark retrieved
            raise
        finally:
            self._inflight.pop(key, None)
        fut.set_result(rec)
        return rec, False

    async def _send(
        self, stage: str, model: str, key: str, body: bytes, messages: list[dict[str, str]], max_tokens: int
    ) -> dict[str, Any]:
        if self.stop_reason is not None:
            raise self.stop_reason
        reserve = 0.0
        if self.max_spend_usd is not None:
            reserve = self.accounting.cost(model, count_prompt_tokens(messages), max_tokens) or 0.0
            if self.spent + self._reserved + reserve > self.max_spend_usd:
                self.stop_reason = SpendCapReached(
                    f"spend cap ${self.max_spend_usd:.2f} reached (${self.spent:.4f} spent); "
                    "rerun with a higher --max-spend-usd to resume"
                )
                raise self.stop_reason
            self._reserved += reserve
        kwargs: dict[str, Any] = {"model": model, "messages": messages, "temperature": 0.0, "max_tokens": max_tokens}
        if self.extra_body:
            kwargs["extra_body"] = dict(self.extra_body)
        try:
            try:
                response, attempts = await call_with_failover(
                    self.pool, kwargs, max_attempts=self.max_transport_retries + 1, backoff=_backoff
                )
            except Refused as exc:
                self.transport_errors += len(exc.attempts) - 1
                error = f"{exc.url} refused a {stage} request: {exc}"
                if self.fallback is None:
                    if self.stop_reason is None:
                        self.stop_reason = RequestRefused(
                            f"{error}; no retry can help a refused request (fix the request or the server; "
                            "--fallback offline keeps offline names and labels instead)"
                        )
                    raise self.stop_reason from None
                return {"error": error}  # not stored: a rerun asks again
            except BackendFailure as exc:
                self.transport_errors += len(exc.attempts)
                self.stop_reason = EndpointsFailed(
                    f"{failure_line(exc)}; the {len(self.records)} answers so far are kept in {self.store.root}"
                )
                raise self.stop_reason from None
            self.transport_errors += len(attempts) - 1
            rec = response_record(response, key, stage, model)
        finally:
            self._reserved -= reserve
        self.store.put(rec)
        cost = self.accounting.cost(model, rec["prompt_tokens"], rec["completion_tokens"])
        self.spent += cost or 0.0
        return rec


def _backoff(attempt: int) -> float:
    return min(0.01 * 3 ** (attempt - 1), 30.0)  # ~33 s over 8 retries


def response_record(response: Any, key: str, stage: str, model: str) -> dict[str, Any]:
    """The store record of a chat.completion. A thinking model's reasoning (``reasoning_content``
    from vLLM's parsers, else the reply's ``<think>`` block) is kept apart from the answer, in the
    store only, never in the artifacts."""
    choice = response.choices[0]
    message = choice.message
    content = message.content if isinstance(message.content, str) else None
    answer, inline = split_reasoning(content)
    reasoning = "\n".join(r for r in (reasoning_of(message), inline) if r) or None
    usage = getattr(response, "usage", None)
    finish = getattr(choice, "finish_reason", None)
    return {
        "key": key,
        "stage": stage,
        "model": model,
        "content": answer,
        "prompt_tokens": int(getattr(usage, "prompt_tokens", 0) or 0),
        "completion_tokens": int(getattr(usage, "completion_tokens", 0) or 0),
        "response_model": getattr(response, "model", None),
        "finish_reason": finish if isinstance(finish, str) else None,
        "reasoning": reasoning,
    }


class BatchClient(Client):
    """Requests through batch files (:mod:`.batch`): a reply read back from the folder enters the
    store when the construction asks for it; a request without one is kept for the next round and
    its unit waits (:class:`~.batch.AwaitingReply`). A refused request stops the run (or, with the
    offline fallback, comes back as an error), as over HTTP; so does a request that failed in more
    output lines than ``max_failures``."""

    def __init__(
        self,
        store: RequestStore,
        folder: BatchFolder,
        prices: PriceTable,
        *,
        extra_body: dict[str, Any] | None = None,
        fallback: str | None = None,
        max_failures: int = 8,
    ) -> None:
        super().__init__(store.records, prices, extra_body)
        self.store = store
        self.folder = folder
        self.fallback = fallback
        self.max_failures = max_failures
        self.pending: dict[str, tuple[str, bytes]] = {}  # key -> (model, canonical body), in asking order
        self.pending_tokens = [0, 0]  # prompt tokens (estimated) and max_tokens of the pending requests
        self.pending_cost: float | None = 0.0

    async def __aenter__(self) -> BatchClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.store.flush()

    async def _answer(
        self, stage: str, model: str, key: str, body: bytes, messages: list[dict[str, str]], max_tokens: int
    ) -> tuple[dict[str, Any], bool]:
        from openai.types.chat import ChatCompletion

        if self.stop_reason is not None:
            raise self.stop_reason
        reply = self.folder.replies.get(key)
        if reply is not None:
            rec = response_record(ChatCompletion.construct(**reply), key, stage, model)
            self.store.put(rec)
            return rec, False
        failures = self.folder.failures.get(key, [])
        refused = next((f for f in failures if f.refused), None)
        if refused is not None:
            status = "" if refused.status is None else f" (status {refused.status})"
            error = f"{refused.where} refused a {stage} request{status}: {refused.message}"
            if self.fallback is None:
                self.stop_reason = RequestRefused(
                    f"{error}; no retry can help a refused request (fix the request or the model; "
                    "--fallback offline keeps offline names and labels instead)"
                )
                raise self.stop_reason
            return {"error": error}, False
        if len(failures) > self.max_failures:
            last = failures[-1]
            self.stop_reason = EndpointsFailed(
                f"a {stage} request failed in {len(failures)} batch output lines (last {last.where}: "
                f"{last.message}); check the provider, then rerun to ask it again in a new round"
            )
            raise self.stop_reason
        if key not in self.pending:
            self.pending[key] = (model, body)
            prompt = count_prompt_tokens(messages)
            self.pending_tokens[0] += prompt
            self.pending_tokens[1] += max_tokens
            cost = self.accounting.cost(model, prompt, max_tokens)
            self.pending_cost = None if cost is None or self.pending_cost is None else self.pending_cost + cost
        raise AwaitingReply(key)


class ReplayClient(Client):
    """Answers only from recorded replies (an instance rebuilt offline); a request without one is
    noted (``missing``, key -> stage) and its unit waits, so a whole stage's gaps are counted."""

    def __init__(
        self, records: dict[str, dict[str, Any]], prices: PriceTable, extra_body: dict[str, Any] | None
    ) -> None:
        super().__init__(records, prices, extra_body)
        self.missing: dict[str, str] = {}

    async def __aenter__(self) -> ReplayClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None

    async def _answer(
        self, stage: str, model: str, key: str, body: bytes, messages: list[dict[str, str]], max_tokens: int
    ) -> tuple[dict[str, Any], bool]:
        self.missing[key] = stage
        raise AwaitingReply(key)


class StandInClient(Client):
    """The dry run's client: answers from the store when it can, else with typical replies."""

    def __init__(
        self,
        store_records: dict[str, dict[str, Any]],
        prices: PriceTable,
        tokenizer: str | None = None,
        extra_body: dict[str, Any] | None = None,
    ) -> None:
        from rap_benchmark.pipeline.instrument.llm.standin import respond
        from rap_benchmark.pipeline.instrument.llm.tokens import tokenizer_counters

        super().__init__(store_records, prices, extra_body)
        self._respond = respond
        self._count_prompt, self._count_text = (
            tokenizer_counters(tokenizer) if tokenizer else (count_prompt_tokens, count_tokens)
        )

    async def _answer(
        self, stage: str, model: str, key: str, body: bytes, messages: list[dict[str, str]], max_tokens: int
    ) -> tuple[dict[str, Any], bool]:
        content = self._respond(messages, typical=True)
        return {
            "content": content,
            "prompt_tokens": self._count_prompt(messages),
            "completion_tokens": self._count_text(content),
        }, False


async def run_all(
    client: Client,
    jobs: Sequence[Callable[[], Awaitable[Any]]],
    concurrency: int,
    desc: str | None = None,
) -> list[Any]:
    """Run ``jobs`` with at most ``concurrency`` at a time; results in job order (a progress bar
    named ``desc`` when given). When the client stops, no further job starts, the running ones
    finish (their answers are stored) and the stop is raised."""
    from tqdm import tqdm

    results: list[Any] = [None] * len(jobs)
    it = iter(range(len(jobs)))
    first_error: list[BaseException] = []
    waiting = [0]
    depth = [0]
    bar = tqdm(total=len(jobs), desc=desc, unit=" units", disable=desc is None or not jobs)

    async def worker() -> None:
        for i in it:
            if client.stop_reason is not None or first_error:
                return
            chain = [0]
            _CHAIN.set(chain)
            try:
                results[i] = await jobs[i]()
                bar.update()
            except AwaitingReply:
                waiting[0] += 1
            except StopRun:
                return
            except Exception as exc:  # noqa: BLE001 - re-raised below, after the others drained
                first_error.append(exc)
                return
            finally:
                depth[0] = max(depth[0], chain[0])

    async with retry_notes(getattr(getattr(client, "pool", None), "retrying", None), bar.set_postfix_str):
        await asyncio.gather(*(worker() for _ in range(max(1, min(concurrency, len(jobs))))))
    bar.close()
    client.rounds += depth[0]
    if first_error:
        raise first_error[0]
    if client.stop_reason is not None:
        raise client.stop_reason
    if waiting[0]:
        raise RoundPending(waiting[0], results)
    return results
