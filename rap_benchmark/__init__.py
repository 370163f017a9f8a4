"""rap_benchmark: RAP (Research Attention Prediction) and CiteCast.

The public API is eight verbs and the few types they take and return (each verb's docstring
has a worked example)::

    build     build an instance folder from a spec (and an arXiv metadata source)
    load      load a built instance, hashes and schemas checked
    verify    check an instance folder against its SHA256SUMS
    search    one Search call, exactly as an agent makes it
    run       run an agent (a backend or a reference agent) over the episodes, resumably
    validate  check a prediction file against an instance, naming every problem
    score     validate and score prediction files into a leaderboard
    export    write the instance as Hugging Face dataset repos

What they return is exported too: ``Instance`` (load), ``SearchObservation`` (search),
``RunStats`` (run), ``ValidationReport`` (validate), ``ScoreResult`` (score) and ``ExportResult``
(export); ``Instance``, ``PublicInstance`` and the last three load their module on first use, as
the verbs do.

Everything else is private to its subpackage (``core``, ``pipeline``, ``bm25``, ``agents``,
``evaluation``, ``hub``, ``integrations``, ``citecast``, ``cli``).
"""

from rap_benchmark.api import ScoreResult, build, export, load, run, score, search, validate, verify
from rap_benchmark.core.errors import UserError
from rap_benchmark.core.records import Condition, Policy, Regime, SearchObservation, Split, Task
from rap_benchmark.core.spec import BENCHMARK_VERSION, BenchmarkSpec, package_version

_LAZY_TYPES = {
    "Instance": "rap_benchmark.core.artifacts",
    "PublicInstance": "rap_benchmark.core.artifacts",
    "RunStats": "rap_benchmark.agents.runner",
    "ValidationReport": "rap_benchmark.evaluation.predictions",
    "ExportResult": "rap_benchmark.hub.export",
}
"""Types whose modules are heavy (pandas and pyarrow come with ``core.artifacts``): imported on
first access, so ``import rap_benchmark`` and every ``rap`` command start without them (the verbs
import their subpackages the same way; ``tests/test_cli_imports.py``)."""


def __getattr__(name: str) -> object:
    module = _LAZY_TYPES.get(name)
    if module is None:
        raise AttributeError(f"module 'rap_benchmark' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "BENCHMARK_VERSION",
    "BenchmarkSpec",
    "Condition",
    "ExportResult",
    "Instance",
    "Policy",
    "PublicInstance",
    "Regime",
    "RunStats",
    "ScoreResult",
    "SearchObservation",
    "Split",
    "Task",
    "UserError",
    "ValidationReport",
    "build",
    "export",
    "load",
    "run",
    "score",
    "search",
    "validate",
    "verify",
]
__version__ = package_version()
