"""lm-eval entry point for the RAP tasks (generated; the logic is in rap_benchmark.lmeval)."""

from rap_benchmark.lmeval.task import RapTask

__all__ = ["RapTask"]
