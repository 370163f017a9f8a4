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

Everything else is private to its subpackage (``core``, ``pipeline``, ``search``, ``agents``,
``evaluation``, ``hub``, ``integrations``, ``citecast``, ``cli``).
"""

# The subpackage rap_benchmark.search shares its name with the verb: import it first, so that the
# import system's binding of the subpackage to this module's ``search`` attribute happens now and
# the verb below replaces it (a later ``import rap_benchmark.search.x`` no longer rebinds it).
import rap_benchmark.search  # noqa: F401, I001  (must precede the verbs)
from rap_benchmark.api import ScoreResult, build, export, load, run, score, search, validate, verify
from rap_benchmark.core.artifacts import Instance, PublicInstance
from rap_benchmark.core.errors import UserError
from rap_benchmark.core.records import Condition, Policy, Regime, Split, Task
from rap_benchmark.core.spec import BENCHMARK_VERSION, BenchmarkSpec, package_version

__all__ = [
    "BENCHMARK_VERSION",
    "BenchmarkSpec",
    "Condition",
    "Instance",
    "Policy",
    "PublicInstance",
    "Regime",
    "ScoreResult",
    "Split",
    "Task",
    "UserError",
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
