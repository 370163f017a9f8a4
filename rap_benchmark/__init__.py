"""rap_benchmark: RAP (Research Attention Prediction) and CiteCast.

The public API is named here; everything else is private to its module.
"""

from rap_benchmark.core.artifacts import Instance, load_instance, verify
from rap_benchmark.core.records import (
    DIRECTION_KEYS,
    Assignment,
    AssignmentType,
    Block,
    Codebook,
    Condition,
    Direction,
    Episode,
    Policy,
    Regime,
    SearchCall,
    SearchHit,
    SearchObservation,
    Split,
    episode_id,
)
from rap_benchmark.core.spec import BENCHMARK_VERSION, BenchmarkSpec, spec_for

__all__ = [
    "BENCHMARK_VERSION",
    "DIRECTION_KEYS",
    "Assignment",
    "AssignmentType",
    "BenchmarkSpec",
    "Block",
    "Codebook",
    "Condition",
    "Direction",
    "Episode",
    "Instance",
    "Policy",
    "Regime",
    "SearchCall",
    "SearchHit",
    "SearchObservation",
    "Split",
    "episode_id",
    "load_instance",
    "spec_for",
    "verify",
]
__version__ = "1.0.0"
