"""The LLM instrument: the paper's codebook construction and assignment (its sections 3.2-3.3) through
any OpenAI-compatible endpoint, resumable, concurrent, priced.

Verbs (:mod:`.instrument`): :func:`run_llm_instrument` and :func:`estimate` (the dry run). The
stages are in :mod:`.stages`, requests in :mod:`.client` and :mod:`.store`, validation in
:mod:`.validate`, the review file in :mod:`.review`.
"""

from rap_benchmark.pipeline.instrument.llm.client import EndpointsFailed, RequestRefused, SpendCapReached, StopRun
from rap_benchmark.pipeline.instrument.llm.instrument import (
    LLMInstrument,
    LLMSettings,
    StageFailed,
    estimate,
    run_llm_instrument,
)
from rap_benchmark.pipeline.instrument.llm.records import PipelineConfig, PipelineResult
from rap_benchmark.pipeline.instrument.llm.validate import InvalidOutput

__all__ = [
    "EndpointsFailed",
    "InvalidOutput",
    "LLMInstrument",
    "LLMSettings",
    "PipelineConfig",
    "PipelineResult",
    "RequestRefused",
    "SpendCapReached",
    "StageFailed",
    "StopRun",
    "estimate",
    "run_llm_instrument",
]
