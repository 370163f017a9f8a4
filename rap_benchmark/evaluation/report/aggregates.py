"""The tables that aggregate episode scores: within field, then across fields, with intervals.

``leaderboard`` (one row per model and condition), ``paired_contrasts``, ``per_origin_table``,
``exposure_table``, ``policy_table``, ``state_table`` and ``revision_table`` read the episode
scores of :func:`rap_benchmark.evaluation.scoring.score_predictions` and return plain DataFrames
of numbers with block-bootstrap intervals (the paper's uncertainty intervals); ``tables`` formats
them. Intervals use the spec's resample count and seed unless given, and every group of a table
uses the same seed, so intervals are reproducible one by one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from rap_benchmark.core.dates import add_months, parse_date
from rap_benchmark.core.records import Condition, Policy, Split, Task, parse_enum
from rap_benchmark.evaluation.scoring import (
    Interval,
    block_bootstrap,
    block_of_field,
    episode_arrays,
    episode_index,
    field_bootstrap,
    field_macro,
    paired_contrast,
    prediction_stability,
    prediction_weights,
    revision_alignment,
    revision_alignment_cc,
    score_predictions,
    truth_stability,
)

if TYPE_CHECKING:
    from rap_benchmark.core.artifacts import Instance

EWMA_MODEL = "baseline/ewma"
"""The persistence anchor every model is contrasted with (the paper's paired contrasts)."""

DEFAULT_PAIRS: tuple[tuple[Condition, Condition], ...] = (
    (Condition.A1, Condition.A0),
    (Condition.A3, Condition.A1),
    (Condition.A4, Condition.A3),
)
"""Paired condition contrasts (candidate, reference) of the paper's paired contrasts."""


def resampling(inst: Instance, n_resamples: int | None, seed: int | None) -> tuple[int, int]:
    """The resample count and seed of an interval: the spec's unless given."""
    return (
        int(inst.spec.bootstrap_resamples if n_resamples is None else n_resamples),
        int(inst.spec.bootstrap_seed if seed is None else seed),
    )


@dataclass(frozen=True)
class _Boot:
    """One table's bootstrap settings: the instance's dependency blocks, resample count and seed."""

    blocks: Mapping[str, str]
    n: int
    seed: int

    def block(self, values: np.ndarray, fids: np.ndarray) -> Interval:
        return block_bootstrap(values, fids, self.blocks, n_resamples=self.n, seed=self.seed)


def _boot(inst: Instance, n_resamples: int | None, seed: int | None) -> _Boot:
    return _Boot(block_of_field(inst), *resampling(inst, n_resamples, seed))


def in_split(scores: pd.DataFrame, split: Split | None) -> pd.DataFrame:
    return scores if split is None else scores[scores["split"] == parse_enum(Split, split).value]


def _interval_columns(prefix: str, iv: Interval) -> dict[str, float]:
    return {prefix: iv.estimate, f"{prefix}_lo": iv.lo, f"{prefix}_hi": iv.hi}


def leaderboard(
    scores: pd.DataFrame,
    inst: Instance,
    *,
    n_resamples: int | None = None,
    seed: int | None = None,
    split: Split | None = Split.TEST,
    field_clustered: bool = True,
    forecast_only: bool = True,
) -> pd.DataFrame:
    """One row per (model, condition): field-macro scores on ``split`` with 95% intervals.

    With ``forecast_only`` (default) only Forecast conditions (A0, A1, A3) are ranked; State
    outputs belong in ``state_table``.

    Columns: model, condition, n_fields, n_episodes, n_invalid, n_undefined, spearman with
    block-bootstrap ``spearman_lo``/``spearman_hi`` (and field-clustered ``spearman_field_lo``/
    ``_hi``), centred_cosine, tv, jsd, pred_recent, residual_spearman, spearman_change_rich.
    Sorted by Spearman, best first.
    """
    boot = _boot(inst, n_resamples, seed)
    rows = []
    frame = in_split(scores, split)
    if forecast_only:
        frame = frame[frame["condition"].map(lambda c: Condition(c).task is Task.FORECAST).to_numpy(bool)]
    for (model, condition), g in frame.groupby(["model", "condition"]):
        fids = g["field_id"].to_numpy()
        rho = g["spearman"].to_numpy(np.float64)
        iv = boot.block(rho, fids)
        row: dict[str, Any] = {
            "model": model,
            "condition": condition,
            "n_fields": iv.n_fields,
            "n_episodes": len(g),
            "n_invalid": int((~g["valid"]).sum()),
            "n_undefined": int((g["valid"] & ~g["defined"]).sum()),
            **_interval_columns("spearman", iv),
        }
        if field_clustered:
            fv = field_bootstrap(rho, fids, n_resamples=boot.n, seed=boot.seed)
            row["spearman_field_lo"], row["spearman_field_hi"] = fv.lo, fv.hi
        for col in ("centred_cosine", "tv", "jsd", "pred_recent", "residual_spearman"):
            row[col] = field_macro(g[col].to_numpy(np.float64), fids)
        rich = g["change_rich"].to_numpy(bool)
        row["spearman_change_rich"] = field_macro(rho[rich], fids[rich]) if rich.any() else np.nan
        rows.append(row)
    out = pd.DataFrame(rows)
    if out.empty:
        return out
    return out.sort_values(
        ["spearman", "model", "condition"], ascending=[False, True, True], kind="stable"
    ).reset_index(drop=True)


def _contrast(
    a: pd.DataFrame, b: pd.DataFrame, metric: str, boot: _Boot, *, reverse: bool
) -> tuple[Interval, Interval]:
    """a - b on matched cells (b - a when ``reverse``: distance improvements), block and field."""
    first, second = (b, a) if reverse else (a, b)
    args = (
        first[metric].to_numpy(np.float64),
        first["field_id"].to_numpy(),
        first["origin"].to_numpy(),
        second[metric].to_numpy(np.float64),
        second["field_id"].to_numpy(),
        second["origin"].to_numpy(),
    )
    block = paired_contrast(*args, block_of_field=boot.blocks, n_resamples=boot.n, seed=boot.seed)
    return block, paired_contrast(*args, block_of_field=None, n_resamples=boot.n, seed=boot.seed)


CONTRAST_METRICS: tuple[tuple[str, bool], ...] = (("spearman", False), ("tv", True), ("jsd", True))
"""(metric, reverse): TV and JSD contrasts are improvements, reference minus candidate."""


def paired_contrasts(
    scores: pd.DataFrame,
    inst: Instance,
    *,
    pairs: Sequence[tuple[Condition | str, Condition | str]] = DEFAULT_PAIRS,
    reference_model: str = EWMA_MODEL,
    reference_condition: Condition | str = Condition.A0,
    n_resamples: int | None = None,
    seed: int | None = None,
    split: Split | None = Split.TEST,
) -> pd.DataFrame:
    """Paired contrasts on the same (field, origin) cells, differenced before aggregation.

    Rows: for every model, each pair (candidate, reference) of its conditions present in
    ``scores``; and every (model, Forecast condition) against ``reference_model`` (EWMA).
    Columns: model, contrast, candidate, reference, metric (spearman, tv, jsd: for TV and JSD the
    value is the improvement, reference distance minus candidate distance), estimate, lo, hi
    (block bootstrap), field_lo, field_hi (field-clustered), n_cells, n_fields, excludes_zero.
    No multiplicity correction is applied.
    """
    boot = _boot(inst, n_resamples, seed)
    frame = in_split(scores, split)
    ref_cond = Condition(reference_condition).value
    by_unit = {key: g for key, g in frame.groupby(["model", "condition"])}
    reference = by_unit.get((reference_model, ref_cond))
    todo: list[tuple[str, str, str, str]] = []  # (model, contrast, candidate unit, reference unit)
    for model in sorted({m for m, _ in by_unit}):
        for cand, ref in pairs:
            c, r = Condition(cand).value, Condition(ref).value
            if (model, c) in by_unit and (model, r) in by_unit:
                todo.append((model, f"{c}-{r}", c, r))
    if reference is not None:
        todo += [
            (model, f"{cond} vs {reference_model}", cond, "")
            for model, cond in sorted(by_unit)
            if model != reference_model and Condition(cond).task is Task.FORECAST
        ]
    rows = []
    for model, contrast, c, r in todo:
        cand, ref = by_unit[(model, c)], by_unit[(model, r)] if r else reference
        ref_name = f"{model} {r}" if r else f"{reference_model} {ref_cond}"
        for metric, reverse in CONTRAST_METRICS:
            block, field = _contrast(cand, ref, metric, boot, reverse=reverse)
            rows.append(
                {
                    "model": model,
                    "contrast": contrast,
                    "candidate": f"{model} {c}",
                    "reference": ref_name,
                    "metric": metric if not reverse else f"{metric}_improvement",
                    "estimate": block.estimate,
                    "lo": block.lo,
                    "hi": block.hi,
                    "field_lo": field.lo,
                    "field_hi": field.hi,
                    "n_cells": block.n_cells,
                    "n_fields": block.n_fields,
                    "excludes_zero": block.excludes_zero(),
                }
            )
    return pd.DataFrame(rows)


def per_origin_table(
    scores: pd.DataFrame,
    inst: Instance,
    *,
    n_resamples: int | None = None,
    seed: int | None = None,
    split: Split | None = Split.TEST,
) -> pd.DataFrame:
    """Spearman per (model, condition, origin): mean over fields with a block-bootstrap interval."""
    boot = _boot(inst, n_resamples, seed)
    rows = []
    for (model, condition, origin), g in in_split(scores, split).groupby(["model", "condition", "origin"]):
        iv = boot.block(g["spearman"].to_numpy(np.float64), g["field_id"].to_numpy())
        rows.append(
            {
                "model": model,
                "condition": condition,
                "origin": origin,
                "n_fields": iv.n_fields,
                "n_invalid": int((~g["valid"]).sum()),
                **_interval_columns("spearman", iv),
            }
        )
    return pd.DataFrame(rows)


def exposure_table(
    scores: pd.DataFrame,
    inst: Instance,
    strict: Mapping[tuple[str, str], bool],
    *,
    joint_strict: Mapping[tuple[str, str], bool] | None = None,
    n_resamples: int | None = None,
    seed: int | None = None,
    split: Split | None = Split.TEST,
) -> pd.DataFrame:
    """Strict vs potentially exposed scores (the paper's temporal exposure masks).

    ``strict[(model, origin)]`` is the Forecast-Strict flag of a cell; State conditions use
    ``joint_strict`` when given (Joint-Strict), else ``strict``. Models absent from the masks are
    left out. Rows: model, condition, stratum (all / strict / exposed), n_cells, n_fields and
    spearman with its block-bootstrap interval (a stratum without cells has counts only).
    """
    boot = _boot(inst, n_resamples, seed)
    rows = []
    for (model, condition), g in in_split(scores, split).groupby(["model", "condition"]):
        mask_src = joint_strict if (joint_strict is not None and Condition(condition).task is Task.STATE) else strict
        keys = list(zip(g["model"], g["origin"], strict=True))
        if not any(k in mask_src for k in keys):
            continue
        is_strict = np.array([bool(mask_src.get(k, False)) for k in keys])
        rho = g["spearman"].to_numpy(np.float64)
        fids = g["field_id"].to_numpy()
        for stratum, m in (("all", np.ones(len(g), bool)), ("strict", is_strict), ("exposed", ~is_strict)):
            if m.any():
                iv = boot.block(rho[m], fids[m])
                cells = {"n_cells": iv.n_cells, "n_fields": iv.n_fields, **_interval_columns("spearman", iv)}
            else:
                cells = {"n_cells": 0, "n_fields": 0}
            rows.append({"model": model, "condition": condition, "stratum": stratum, **cells})
    return pd.DataFrame(rows)


def _unranked_board(
    scores: pd.DataFrame, inst: Instance, n_resamples: int | None, seed: int | None, split: Split | None
) -> pd.DataFrame:
    """The leaderboard of every condition without field-clustered intervals (the rescoring tables)."""
    return leaderboard(
        scores, inst, n_resamples=n_resamples, seed=seed, split=split, field_clustered=False, forecast_only=False
    )


def policy_table(
    inst: Instance,
    preds: pd.DataFrame,
    *,
    policies: Sequence[Policy | str] = tuple(Policy),
    n_resamples: int | None = None,
    seed: int | None = None,
    split: Split | None = Split.TEST,
) -> pd.DataFrame:
    """Rescore the same predictions under each counting policy's targets (the paper's counting policies).

    Rows: model, condition, policy, n_fields, spearman with block-bootstrap interval, tv, jsd.
    Policies the instance lacks are skipped.
    """
    present = set(inst.episodes["policy"].astype(str))
    frames = []
    for pol in policies:
        pol = parse_enum(Policy, pol).value
        if pol not in present:
            continue
        board = _unranked_board(score_predictions(inst, preds, policy=pol), inst, n_resamples, seed, split)
        frames.append(board.assign(policy=pol))
    if not frames:
        return pd.DataFrame()
    out = pd.concat(frames, ignore_index=True)
    cols = ["model", "condition", "policy", "n_fields", "spearman", "spearman_lo", "spearman_hi", "tv", "jsd"]
    return out[cols].sort_values(["model", "condition", "policy"], kind="stable").reset_index(drop=True)


def state_table(
    inst: Instance,
    preds: pd.DataFrame,
    *,
    n_resamples: int | None = None,
    seed: int | None = None,
    split: Split | None = Split.TEST,
) -> pd.DataFrame:
    """State outputs (A2, A4) scored against x (State fidelity) and y (State-as-Forecast)."""
    state = preds[preds["condition"].map(lambda c: Condition(c).task is Task.STATE)]
    if state.empty:
        return pd.DataFrame()
    eps = episode_arrays(inst)
    out = []
    for target, name in (("x", "state_fidelity"), ("y", "state_as_forecast")):
        board = _unranked_board(
            score_predictions(inst, state, target=target, episodes=eps), inst, n_resamples, seed, split
        )
        out.append(
            board[["model", "condition", "n_fields", "spearman", "spearman_lo", "spearman_hi"]].assign(target=name)
        )
    return pd.concat(out, ignore_index=True).sort_values(["model", "condition", "target"]).reset_index(drop=True)


def revision_table(
    inst: Instance,
    preds: pd.DataFrame,
    *,
    horizons: Sequence[int] | None = None,
    n_resamples: int | None = None,
    seed: int | None = None,
    split: Split | None = Split.TEST,
) -> pd.DataFrame:
    """Rolling revision alignment at h months (the paper's metrics), where origins T and T+h both exist.

    For each (model, condition, h): rho(p[T+h] - p[T], y[T+h] - y[T]) per (field, T) pair,
    averaged within field then across fields, with a block-bootstrap interval; the centred-cosine
    sensitivity; prediction stability rho(p[T+h], p[T]) and truth stability rho(y[T+h], y[T]).
    """
    boot = _boot(inst, n_resamples, seed)
    eps = episode_arrays(inst)
    horizons = tuple(inst.spec.revision_horizons if horizons is None else horizons)
    p_all, _ = prediction_weights(preds)
    idx_all = episode_index(eps, preds)
    origins = sorted(set(eps.origin.tolist()))
    rows = []
    frame = preds.assign(_i=np.arange(len(preds)))
    for (model, condition), g in frame.groupby(["model", "condition"]):
        gi = g["_i"].to_numpy()
        ep_idx = idx_all[gi]
        pos = pd.Index(eps.keys[ep_idx])
        own = eps.origin[ep_idx]
        for h in horizons:
            later = {o: add_months(parse_date(o), h).isoformat() for o in origins}
            keys_b = np.char.add(np.char.add(eps.field_id[ep_idx].astype(str), "@"), [later[o] for o in own])
            loc = pos.get_indexer(keys_b)  # each row's episode h months later, -1 where there is none
            ia = np.flatnonzero(loc >= 0)
            ia = ia[np.argsort(own[ia], kind="stable")]  # pairs ordered by T, then as the rows come
            ib = loc[ia]
            if split is not None:
                keep = eps.split[ep_idx[ia]] == parse_enum(Split, split).value
                ia, ib = ia[keep], ib[keep]
            if not len(ia):
                continue
            e_a, e_b = ep_idx[ia], ep_idx[ib]
            p_t, p_th = p_all[gi[ia]], p_all[gi[ib]]
            y_t, y_th = eps.y[e_a], eps.y[e_b]
            fids = eps.field_id[e_a]
            iv = boot.block(revision_alignment(p_t, p_th, y_t, y_th), fids)
            rows.append(
                {
                    "model": model,
                    "condition": condition,
                    "horizon_months": h,
                    "n_pairs": iv.n_cells,
                    "n_fields": iv.n_fields,
                    **_interval_columns("revision_alignment", iv),
                    "revision_alignment_cc": field_macro(revision_alignment_cc(p_t, p_th, y_t, y_th), fids),
                    "prediction_stability": field_macro(prediction_stability(p_t, p_th), fids),
                    "truth_stability": field_macro(truth_stability(y_t, y_th), fids),
                }
            )
    return pd.DataFrame(rows)
