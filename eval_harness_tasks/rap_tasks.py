"""lm-eval entry point for the RAP and CiteCast tasks (generated; the logic is in rap_benchmark.lmeval)."""

from rap_benchmark.lmeval.citecast_task import CiteCastTask
from rap_benchmark.lmeval.task import RapTask

__all__ = ["CiteCastTask", "RapTask"]
