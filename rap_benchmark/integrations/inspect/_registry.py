"""Inspect's entry point module: importing it registers the tasks under ``rap_benchmark/``."""

from rap_benchmark.integrations.inspect.tasks import citecast, rap_forecast, rap_state

__all__ = ["citecast", "rap_forecast", "rap_state"]
