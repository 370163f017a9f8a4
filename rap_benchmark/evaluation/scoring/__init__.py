"""Scoring and statistics: answer parsing, episode metrics, field-macro aggregation, bootstrap
intervals, statistical baselines, reliability ceiling and temporal exposure masks.

Pure functions over arrays and tables that return numbers; the tables that aggregate them are
built in ``rap_benchmark.evaluation.report``. The names below are what code outside this package
uses; every other function is private to its module (``parse``,
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
from rap_benchmark.evaluation.scoring.bootstrap import (
    Interval,
    block_bootstrap,
    field_bootstrap,
    paired_contrast,
    rank_intervals,
)
from rap_benchmark.evaluation.scoring.exposure import (
    ModelExposure,
    ModelRegistry,
    exposure_masks,
    load_registry,
    strict_lookup,
    strict_masks,
)
from rap_benchmark.evaluation.scoring.metrics import (
    prediction_stability,
    rank_correlation,
    revision_alignment,
    revision_alignment_cc,
    spearman,
    truth_stability,
)
from rap_benchmark.evaluation.scoring.parse import (
    MAX_WEIGHT,
    DuplicateKey,
    no_duplicate_keys,
    parse_answer,
    weight_fault,
)
from rap_benchmark.evaluation.scoring.reliability import reliability
from rap_benchmark.evaluation.scoring.score import (
    block_of_field,
    episode_arrays,
    episode_index,
    prediction_weights,
    score_predictions,
)

__all__ = [
    "BASELINE_NAMES",
    "BASELINE_PREFIX",
    "DuplicateKey",
    "Interval",
    "MAX_WEIGHT",
    "ModelExposure",
    "ModelRegistry",
    "baseline_forecasts",
    "baseline_predictions",
    "block_bootstrap",
    "block_of_field",
    "episode_arrays",
    "episode_index",
    "exposure_masks",
    "field_bootstrap",
    "field_macro",
    "load_registry",
    "no_duplicate_keys",
    "paired_contrast",
    "parse_answer",
    "prediction_stability",
    "prediction_weights",
    "rank_correlation",
    "rank_intervals",
    "reliability",
    "revision_alignment",
    "revision_alignment_cc",
    "score_predictions",
    "spearman",
    "strict_lookup",
    "strict_masks",
    "truth_stability",
    "tune_baselines",
    "weight_fault",
]
