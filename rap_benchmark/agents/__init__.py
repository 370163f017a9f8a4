"""Agent rollouts for RAP conditions A0-A4 and CiteCast tasks: prompts, backends, the one episode
loop (generic over a tool set), the resumable run store, reference agents, diagnostics and SFT
export. CiteCast units and its constant policy: :mod:`rap_benchmark.agents.citecast`.

Public API::

    from rap_benchmark.agents import (
        OpenAIBackend, TransformersBackend, ReferenceBackend,                   # backends
        run_benchmark, RunStore, UnitKey,                                       # running
        condition_prompt, PROMPT_VERSION,                                       # prompts
    )

Heavy dependencies (openai, torch, transformers) are imported only when a backend is built.
"""

from rap_benchmark.agents.backends import OpenAIBackend, Throttled
from rap_benchmark.agents.episode import Episode, UnitResult, run_episode
from rap_benchmark.agents.prompts import PROMPT_VERSION, condition_prompt, format_answer, task_prompt
from rap_benchmark.agents.protocol import Backend, EpisodeContext, ModelTurn, Request, ToolCall
from rap_benchmark.agents.reference import ReferenceBackend
from rap_benchmark.agents.runner import (
    RunStats,
    SearchTools,
    UnitSpec,
    episode_cells,
    native_units,
    predictions_frame,
    run_benchmark,
    run_units,
)
from rap_benchmark.agents.store import RunStore, UnitKey, merge_stores
from rap_benchmark.llmclient.failures import Attempt, BackendFailure


def __getattr__(name: str):  # lazy: importing transformers is slow
    if name == "TransformersBackend":
        from rap_benchmark.agents.transformers_backend import TransformersBackend

        return TransformersBackend
    raise AttributeError(name)


__all__ = [
    "PROMPT_VERSION",
    "Attempt",
    "Backend",
    "BackendFailure",
    "Episode",
    "EpisodeContext",
    "ModelTurn",
    "OpenAIBackend",
    "ReferenceBackend",
    "Request",
    "RunStats",
    "RunStore",
    "SearchTools",
    "Throttled",
    "ToolCall",
    "TransformersBackend",
    "UnitKey",
    "UnitResult",
    "UnitSpec",
    "condition_prompt",
    "episode_cells",
    "format_answer",
    "merge_stores",
    "native_units",
    "predictions_frame",
    "run_benchmark",
    "run_episode",
    "run_units",
    "task_prompt",
]
