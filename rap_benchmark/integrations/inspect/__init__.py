"""Inspect AI tasks for RAP and CiteCast (``inspect eval rap_benchmark/rap_forecast``).

Registered through Inspect's setuptools entry point (``[project.entry-points.inspect_ai]`` in
``pyproject.toml`` names :mod:`rap_benchmark.integrations.inspect._registry`), so after
``pip install "rap_benchmark[inspect]"`` the tasks are ``rap_benchmark/rap_forecast``,
``rap_benchmark/rap_state`` and ``rap_benchmark/citecast``. ``rap harness inspect-predictions LOG``
converts an evaluation log into a prediction file with its submission metadata.

Importing this package imports ``inspect_ai``.
"""

from rap_benchmark.integrations.inspect.logs import log_predictions
from rap_benchmark.integrations.inspect.tasks import citecast, rap_forecast, rap_state

__all__ = ["citecast", "log_predictions", "rap_forecast", "rap_state"]
