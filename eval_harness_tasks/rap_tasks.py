"""lm-eval entry point for the RAP and CiteCast tasks (generated; the logic is in rap_benchmark.integrations.lmeval)."""

from rap_benchmark.integrations.lmeval.citecast_task import CiteCastTask
from rap_benchmark.integrations.lmeval.task import RapTask

__all__ = ["CiteCastTask", "RapTask"]
