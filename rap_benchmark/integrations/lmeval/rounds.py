"""Run the agents' episode loop for many episodes at once over batched ``generate_until`` calls.

lm-eval has no tool loop and asks a model for completions in batches. Each episode runs the
agents' own :func:`rap_benchmark.agents.episode.run_episode` with a backend whose ``complete``
only queues its request; when every unfinished episode waits, the queue goes to the model as ONE
batch (``generate``): about (calls per episode + 1) batched rounds in all, not one call per turn.
The first request of an episode may be answered from ``first_replies`` (what lm-eval already
generated for the task's contexts), used only when the context matches byte for byte.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from rap_benchmark.agents.episode import Episode
from rap_benchmark.agents.protocol import ModelTurn, Request, UnitContext
from rap_benchmark.llmclient.failures import Attempt, BackendFailure
from rap_benchmark.tools.text import stops_for

T = TypeVar("T")

GenerateFn = Callable[[list[tuple[str, dict[str, Any]]]], list[str]]
"""One batched completion call: (context, generation kwargs) pairs in, replies out, same order."""
RenderFn = Callable[[Request], Any]
"""Turns a chat request into the model's context: a string (chat template or plain text), or
lm-eval's ``JsonChatStr`` (the chat's JSON) for chat API models."""
CheckFn = Callable[[str, dict[str, Any]], str | None]
"""Says why a context cannot be sent (e.g. it would overflow the model's window), or None."""


@dataclass(frozen=True)
class EpisodeJob:
    """One episode to run: its key, the backend context and the opened episode."""

    key: str
    context: UnitContext
    episode: Episode


def generation_kwargs(request: Request, base: dict[str, Any]) -> dict[str, Any]:
    """The lm-eval generation kwargs of one request: ``base`` (the task's, with any
    ``--gen_kwargs`` override) with the stop sequences the request's state needs and a token cap
    no larger than the request's."""
    out = {k: v for k, v in base.items() if k != "until"}
    out["until"] = stops_for(request.text_protocol, request.tool_choice == "auto", base.get("until") or [])
    out["max_gen_toks"] = min(int(base.get("max_gen_toks", request.max_tokens)), int(request.max_tokens))
    out.setdefault("do_sample", False)
    out.setdefault("temperature", 0.0)
    return out


def reply_to_turn(reply: str, request: Request, model_name: str, prefill: str = "") -> ModelTurn:
    """A completion as the episode loop's :class:`ModelTurn` (a search call or text).

    ``prefill`` is text that was appended to the context for the model to continue (the answer
    opening on answer turns); the turn's content is the prefill plus the model's continuation.
    """
    if request.text_protocol is not None:
        reply = request.text_protocol.restore_stop(reply)
    text = prefill + reply
    call = request.text_call(text)
    return ModelTurn(
        content=text,
        tool_calls=(call,) if call is not None else (),
        finish_reason="tool_calls" if call is not None else "stop",
        response_model=model_name,
        attempts=(Attempt(1, True, endpoint="lm-eval"),),
        prefill=prefill or None,
    )


@dataclass
class _Batcher:
    generate: GenerateFn
    render: RenderFn
    base_kwargs: dict[str, Any]
    model_name: str
    first_replies: dict[str, tuple[str, str]]
    check: CheckFn | None = None
    answer_prefill: str = ""  # appended to the context of answer turns (see run_rounds)
    active: int = 0
    rounds: int = 0
    pending: list[tuple[str, str, dict[str, Any], Request, str, asyncio.Future[ModelTurn]]] = field(
        default_factory=list
    )

    def maybe_flush(self) -> None:
        if not self.pending or len(self.pending) < self.active:
            return
        batch = sorted(self.pending, key=lambda p: p[0])
        self.pending = []
        self.rounds += 1
        try:
            replies = self.generate([(ctx, kwargs) for _, ctx, kwargs, _, _, _ in batch])
            if len(replies) != len(batch):
                raise RuntimeError(f"generate returned {len(replies)} replies for {len(batch)} requests")
        except Exception as exc:  # noqa: BLE001 - every waiting unit records the failure
            for *_, fut in batch:
                fut.set_exception(exc)
            return
        for (_, _, _, request, prefill, fut), reply in zip(batch, replies, strict=True):
            fut.set_result(reply_to_turn(reply, request, self.model_name, prefill))

    async def finished(self) -> None:
        self.active -= 1
        self.maybe_flush()


@dataclass
class _EpisodeBackend:
    key: str
    batcher: _Batcher
    first_used: bool = False

    async def complete(self, request: Request, context: UnitContext) -> ModelTurn:
        ctx = self.batcher.render(request)
        # a prefill continues a string context; a chat API context (lm-eval's JsonChatStr, the
        # chat's JSON) is sent as messages, which a server cannot be asked to continue
        prefill = self.batcher.answer_prefill if request.is_answer_turn and isinstance(ctx, str) else ""
        ctx = ctx + prefill if prefill else ctx
        kwargs = generation_kwargs(request, self.batcher.base_kwargs)
        problem = self.batcher.check(ctx, kwargs) if self.batcher.check is not None else None
        if problem is not None:
            raise BackendFailure(problem, (Attempt(1, False, problem, endpoint="lm-eval"),))
        if not self.first_used:
            self.first_used = True
            prior = self.batcher.first_replies.get(self.key)
            if prior is not None and prior[0] == ctx:
                return reply_to_turn(prior[1], request, self.batcher.model_name)
        fut: asyncio.Future[ModelTurn] = asyncio.get_running_loop().create_future()
        self.batcher.pending.append((self.key, ctx, kwargs, request, prefill, fut))
        self.batcher.maybe_flush()
        return await fut

    async def aclose(self) -> None:
        return None


def run_rounds(
    episodes: Mapping[str, Callable[[Any], Awaitable[T]]],
    *,
    generate: GenerateFn,
    render: RenderFn,
    base_kwargs: dict[str, Any],
    model_name: str = "lm-eval",
    first_replies: dict[str, tuple[str, str]] | None = None,
    check: CheckFn | None = None,
    answer_prefill: str = "",
) -> tuple[dict[str, T], int]:
    """Run every episode loop (key -> ``async loop(backend)``) over shared batched rounds.

    Each loop talks to its own backend; a round of ``generate`` goes out when every open
    episode waits for a reply. Returns ({key: what the loop returned}, number of rounds).
    ``answer_prefill`` (off when empty) opens every answer turn (no tool offered) for the model
    to continue, as the in-process transformers backend does for small models; it is recorded
    in each such turn.
    """
    batcher = _Batcher(
        generate, render, dict(base_kwargs), model_name, dict(first_replies or {}), check, answer_prefill
    )

    async def one(key: str, loop: Callable[[Any], Awaitable[T]]) -> tuple[str, T]:
        try:
            result = await loop(_EpisodeBackend(key, batcher))
        finally:
            await batcher.finished()
        return key, result

    async def main() -> dict[str, T]:
        batcher.active = len(episodes)
        pairs = await asyncio.gather(*(one(k, f) for k, f in episodes.items()))
        return dict(pairs)

    results = asyncio.run(main())
    return results, batcher.rounds


def run_batched(jobs: Sequence[EpisodeJob], **rounds: Any) -> tuple[dict[str, Any], int]:
    """Run every job (RAP or CiteCast) through the agents' episode loop to a recorded result;
    return ({key: UnitResult}, number of batched rounds). ``rounds`` are :func:`run_rounds`'
    keyword arguments (``generate``, ``render``, ``base_kwargs``, ``first_replies``, ``check``...).

    A context that ``check`` refuses (say, longer than the model's window: lm-eval would cut its
    beginning silently) makes that unit invalid with the reason, as the agent runner does.
    """
    from rap_benchmark.agents.episode import run_episode

    def loop(job: EpisodeJob) -> Callable[[Any], Awaitable[Any]]:
        return lambda backend: run_episode(backend, job.context, job.episode)

    return run_rounds({job.key: loop(job) for job in jobs}, **rounds)
