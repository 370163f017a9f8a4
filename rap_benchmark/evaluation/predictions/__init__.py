"""Prediction files: the format, reading, validating and writing.

A prediction file is JSONL or parquet with one row per (model, condition, field_id, origin); its
columns are the Arrow schema ``rap_benchmark.core.schemas.PREDICTIONS`` (docs/ARCHITECTURE.md,
"Prediction files"): the key, D0..D7 (null when the unit is invalid), ``valid``,
``invalid_reason``, ``manifest_hash`` and optional run metadata columns.

Reading never raises on bad input: :func:`load_predictions` (``reading``) returns the rows it
could read plus a list of :class:`Problem`. :func:`validate_predictions` (``validating``) adds the
checks against an instance (unknown, duplicate and missing episodes, weights, manifest hash) and
returns a :class:`ValidationReport` whose ``frame`` is what the scorer may use:

* rows whose key cannot be trusted (bad JSON, bad types, unknown condition or episode) are dropped;
* every copy of a duplicated key is dropped (the validator never guesses which copy is meant),
  so the episode is then counted as missing;
* rows that claim ``valid`` but carry unusable weights (the one weight rule,
  :func:`rap_benchmark.evaluation.scoring.weight_fault`) are kept as invalid units, with
  ``invalid_reason`` starting ``"validator: "``.

Weights of valid rows are not renormalised here; the scorer renormalises to the simplex.
"""

from rap_benchmark.evaluation.predictions.problems import (
    ALL_COLUMNS,
    DEFAULT_MAX_BYTES,
    KEY_COLUMNS,
    MAX_LISTED,
    META_COLUMNS,
    REQUIRED_COLUMNS,
    PredictionFileError,
    Problem,
    ProblemKind,
    Severity,
    ValidationReport,
    empty_frame,
)
from rap_benchmark.evaluation.predictions.reading import load_predictions, read_predictions
from rap_benchmark.evaluation.predictions.validating import (
    combine_validated,
    keep_first_owner,
    n_expected_episodes,
    validate_predictions,
)
from rap_benchmark.evaluation.predictions.writing import write_predictions

__all__ = [
    "ALL_COLUMNS",
    "DEFAULT_MAX_BYTES",
    "KEY_COLUMNS",
    "MAX_LISTED",
    "META_COLUMNS",
    "REQUIRED_COLUMNS",
    "PredictionFileError",
    "Problem",
    "ProblemKind",
    "Severity",
    "ValidationReport",
    "combine_validated",
    "empty_frame",
    "keep_first_owner",
    "load_predictions",
    "n_expected_episodes",
    "read_predictions",
    "validate_predictions",
    "write_predictions",
]
