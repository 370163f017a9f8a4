"""Scoring and statistics: answer parsing, episode metrics, field-macro aggregation, bootstrap
intervals, statistical baselines, reliability ceiling and temporal exposure masks.

Pure functions over arrays and tables; reporting lives elsewhere. The names below are what code
outside this package uses; every other function is private to its module (``parse``,
``metrics``, ``aggregate``, ``bootstrap``, ``baselines``, ``reliability``, ``exposure``,
``score``), and ``tests/test_import_graph.py`` checks that no module outside imports them.
"""

from rap_benchmark.evaluation.scoring.aggregate import field_macro
from rap_benchmark.evaluation.scoring.baselines import (
    BASELINE_NAMES,
    BASELINE_PREFIX,
    baseline_forecasts,
    baseline_predictions,
    tune_baselines,
)
from rap_benchmark.evaluation.scoring.bootstrap import rank_intervals
from rap_benchmark.evaluation.scoring.exposure import exposure_masks, load_registry, strict_lookup
from rap_benchmark.evaluation.scoring.metrics import rank_correlation, spearman
from rap_benchmark.evaluation.scoring.parse import MAX_WEIGHT, parse_answer, weight_fault
from rap_benchmark.evaluation.scoring.reliability import reliability
from rap_benchmark.evaluation.scoring.score import (
    block_of_field,
    episode_arrays,
    exposure_table,
    leaderboard,
    paired_contrasts,
    per_origin_table,
    policy_table,
    prediction_weights,
    revision_table,
    score_predictions,
    state_table,
)

__all__ = [
    "BASELINE_NAMES",
    "BASELINE_PREFIX",
    "baseline_forecasts",
    "baseline_predictions",
    "block_of_field",
    "episode_arrays",
    "exposure_masks",
    "exposure_table",
    "field_macro",
    "MAX_WEIGHT",
    "leaderboard",
    "load_registry",
    "paired_contrasts",
    "parse_answer",
    "per_origin_table",
    "policy_table",
    "prediction_weights",
    "rank_intervals",
    "rank_correlation",
    "reliability",
    "revision_table",
    "score_predictions",
    "spearman",
    "state_table",
    "strict_lookup",
    "tune_baselines",
    "weight_fault",
]
