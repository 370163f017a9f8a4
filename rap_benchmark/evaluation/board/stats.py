"""Which differences on the board are real: model-vs-model contrasts, rank intervals, exposure.

Everything reuses the report's statistics so the two agree to the last bit where they compute the
same thing: a contrast of two submissions is ``rap report``'s paired contrast (the same block
bootstrap, same seed, differenced on the (field, origin) cells both cover), taken with the second
submission as the reference; rank intervals rank every complete row of a condition on the same
block draws (:func:`rap_benchmark.evaluation.scoring.bootstrap.rank_intervals`); the strict and
exposed strata are the report's exposure table under masks built from each submission's stated
knowledge cutoff (or a registry entry when the metadata has none).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from rap_benchmark.core.records import Condition, Split, Task
from rap_benchmark.evaluation.report.aggregates import exposure_table, in_split, paired_contrasts, resampling
from rap_benchmark.evaluation.scoring import (
    ModelExposure,
    ModelRegistry,
    block_of_field,
    rank_intervals,
    strict_masks,
)

CONTRAST_COLUMNS = [
    "condition",
    "candidate",
    "reference",
    "metric",
    "estimate",
    "lo",
    "hi",
    "field_lo",
    "field_hi",
    "n_cells",
    "n_fields",
    "excludes_zero",
]


def model_contrasts(
    scores: pd.DataFrame,
    inst: Any,
    *,
    split: Split | None = Split.TEST,
    n_resamples: int | None = None,
    seed: int | None = None,
) -> pd.DataFrame:
    """Every ordered pair of models that share a Forecast condition: candidate minus reference on
    the cells both cover (Spearman difference; TV and JSD improvements), as ``rap report`` computes
    a contrast against its reference model. One row per (condition, candidate, reference, metric)."""
    rows = []
    forecast = scores[scores["target"] == "y"] if "target" in scores else scores
    for cond in sorted(set(forecast["condition"].astype(str))):
        if Condition(cond).task is not Task.FORECAST:
            continue
        in_cond = forecast[forecast["condition"] == cond]
        models = sorted(set(in_cond["model"].astype(str)))
        if len(models) < 2:
            continue
        for reference in models:
            table = paired_contrasts(
                in_cond,
                inst,
                pairs=(),
                reference_model=reference,
                reference_condition=cond,
                n_resamples=n_resamples,
                seed=seed,
                split=split,
            )
            if table.empty:
                continue
            rows.append(table.assign(condition=cond, candidate=table["model"], reference=reference)[CONTRAST_COLUMNS])
    if not rows:
        return pd.DataFrame(columns=CONTRAST_COLUMNS)
    return pd.concat(rows, ignore_index=True).sort_values(
        ["condition", "metric", "candidate", "reference"], kind="stable", ignore_index=True
    )


def with_rank_intervals(
    board: pd.DataFrame,
    scores: pd.DataFrame,
    inst: Any,
    *,
    split: Split | None = Split.TEST,
    n_resamples: int | None = None,
    seed: int | None = None,
) -> pd.DataFrame:
    """``rank_lo`` and ``rank_hi`` for every ranked row: the 95% percentile interval of its rank
    among the ranked rows of its condition, every row recomputed on the same block draws."""
    board = board.assign(
        rank_lo=pd.array([pd.NA] * len(board), "Int64"), rank_hi=pd.array([pd.NA] * len(board), "Int64")
    )
    if board.empty or "rank" not in board:
        return board
    n_res, seed_ = resampling(inst, n_resamples, seed)
    blocks = block_of_field(inst)
    frame = in_split(scores, split)
    for cond, rows in board[board["rank"].notna()].groupby("condition", sort=True):
        values, fields = [], []
        for model, target in zip(rows["model"], rows["target"], strict=True):
            g = frame[(frame["model"] == model) & (frame["condition"] == cond) & (frame["target"] == target)]
            values.append(g["spearman"].to_numpy(np.float64))
            fields.append(g["field_id"].to_numpy())
        iv = rank_intervals(values, fields, blocks, n_resamples=n_res, seed=seed_)
        board.loc[rows.index, "rank_lo"] = iv[:, 0]
        board.loc[rows.index, "rank_hi"] = iv[:, 1]
    return board


def cutoff_registry(cutoffs: Mapping[str, str], registry: ModelRegistry | None = None) -> ModelRegistry:
    """The registry of the models whose knowledge cutoff is known: the submission's own metadata
    first, else an entry of ``registry``."""
    source = "submission metadata (knowledge_cutoff)"
    entries = [ModelExposure(m, (), c, None, source) for m, c in sorted(cutoffs.items()) if c]
    stated = {e.model for e in entries}
    if registry is not None:  # a model whose metadata states a cutoff keeps its own
        entries += [e for e in registry.entries if stated.isdisjoint({e.model, *e.aliases})]
    return ModelRegistry(tuple(entries))


def exposure_strata(
    scores: pd.DataFrame,
    inst: Any,
    cutoffs: Mapping[str, str | None],
    *,
    registry: Any = None,
    split: Split | None = Split.TEST,
    n_resamples: int | None = None,
    seed: int | None = None,
) -> pd.DataFrame:
    """The report's strict-vs-exposed table for the board's models with a known cutoff (empty
    when none is known): Forecast-Strict cells for Forecast conditions, Joint-Strict for State."""
    known = cutoff_registry({m: c for m, c in cutoffs.items() if c}, registry)
    models = sorted(m for m in set(scores["model"].astype(str)) if m in known) if len(scores) else []
    if not models:
        return pd.DataFrame()
    strict, joint = strict_masks(known, models, inst.spec.origins, inst.spec.window_months)
    return exposure_table(scores, inst, strict, joint_strict=joint, n_resamples=n_resamples, seed=seed, split=split)


STRATA_COLUMNS = ("spearman_strict", "strict_cells", "spearman_exposed", "exposed_cells")


def with_strata(board: pd.DataFrame, strata: pd.DataFrame) -> pd.DataFrame:
    """Board columns from the exposure table: Spearman and cell count per stratum (NaN where the
    model's cutoff is unknown)."""
    out = board.assign(**{c: np.nan for c in STRATA_COLUMNS})
    if strata.empty or board.empty:
        return out
    for stratum in ("strict", "exposed"):
        part = strata[strata["stratum"] == stratum].set_index(["model", "condition"])
        for i, key in zip(out.index, zip(out["model"], out["condition"], strict=True), strict=True):
            if key in part.index:
                r = part.loc[key]
                out.loc[i, f"{stratum}_cells"] = float(r["n_cells"])
                out.loc[i, f"spearman_{stratum}"] = float(r.get("spearman", np.nan))
    return out
