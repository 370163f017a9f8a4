"""Score prediction rows against an instance's episodes: numbers per episode.

``score_predictions`` joins validated prediction rows to their episodes (one counting policy) and
computes every episode metric in one vectorised pass. The tables that aggregate those rows
(leaderboard, contrasts, per origin, ...) are built in ``rap_benchmark.evaluation.report.aggregates``.

Conventions:

* weights of valid rows are renormalised to the simplex; invalid rows score NaN and are counted;
* an episode whose target window is empty scores NaN (undefined, reported, never coerced).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from rap_benchmark.core.records import DIRECTION_KEYS, Policy, parse_enum
from rap_benchmark.evaluation.scoring.baselines import baseline_forecasts, composition_array
from rap_benchmark.evaluation.scoring.metrics import (
    change_rich_mask,
    episode_scores,
    pred_recent,
    residual_spearman,
)

if TYPE_CHECKING:
    from rap_benchmark.core.artifacts import Instance

Array = NDArray[np.float64]


@dataclass(frozen=True)
class EpisodeArrays:
    """One policy's episodes as aligned arrays, keyed by ``field_id@origin``."""

    keys: pd.Index
    field_id: NDArray[np.str_]
    origin: NDArray[np.str_]
    split: NDArray[np.str_]
    block_id: NDArray[np.str_]
    x: Array
    y: Array
    ewma: Array
    change_rich: NDArray[np.bool_]


def episode_arrays(inst: Instance, policy: Policy = Policy.CANONICAL) -> EpisodeArrays:
    """The episodes of one counting policy as arrays, with the EWMA reference and change-rich flag.

    Change-rich episodes are those whose rho(EWMA, y) is in the lowest quartile over all episodes
    of the policy: chosen from truth and baselines only, never from model outputs.
    """
    policy = parse_enum(Policy, policy).value
    eps = inst.episodes[inst.episodes["policy"].astype(str) == policy]
    if eps.empty:
        raise ValueError(f"the instance has no episodes under policy {policy!r}")
    eps = eps.sort_values(["field_id", "origin"], kind="stable").reset_index(drop=True)
    field_id = eps["field_id"].astype(str).to_numpy()
    origin = eps["origin"].astype(str).str[:10].to_numpy()
    keys = pd.Index(np.char.add(np.char.add(field_id.astype(str), "@"), origin.astype(str)))
    if keys.has_duplicates:
        raise ValueError(f"duplicate episodes under policy {policy!r}: {keys[keys.duplicated()][:5].tolist()}")
    x = composition_array(eps, "x")
    y = composition_array(eps, "y")
    ewma = baseline_forecasts(eps, inst.spec)["ewma"]
    return EpisodeArrays(
        keys=keys,
        field_id=field_id,
        origin=origin,
        split=eps["split"].astype(str).to_numpy(),
        block_id=eps["block_id"].astype(str).to_numpy(),
        x=x,
        y=y,
        ewma=ewma,
        change_rich=change_rich_mask(ewma, y),
    )


def prediction_weights(preds: pd.DataFrame) -> tuple[Array, NDArray[np.bool_]]:
    """Valid rows' weights renormalised to the simplex (NaN rows elsewhere) and the validity mask.

    A row counts as valid only when it says so and its eight weights are finite, nonnegative and
    positive in total (the validator already turns other rows into invalid units).
    """
    w = preds[list(DIRECTION_KEYS)].to_numpy(np.float64, na_value=np.nan)
    total = w.sum(axis=1)
    ok = preds["valid"].to_numpy(bool) & np.isfinite(w).all(axis=1) & (w >= 0).all(axis=1) & (total > 0)
    out = np.full_like(w, np.nan)
    out[ok] = w[ok] / total[ok, None]
    return out, ok


def episode_index(eps: EpisodeArrays, preds: pd.DataFrame) -> NDArray[np.intp]:
    """Each prediction row's position in ``eps`` (raises on an episode the instance lacks)."""
    keys = (
        preds["field_id"].astype(str).to_numpy().astype(object) + "@" + preds["origin"].astype(str).str[:10].to_numpy()
    )
    idx = eps.keys.get_indexer(keys)
    if (idx < 0).any():
        bad = sorted(set(keys[idx < 0].tolist()))
        raise ValueError(f"{len(bad)} prediction episode(s) are not in the instance (validate first): {bad[:10]}")
    return idx


def score_predictions(
    inst: Instance,
    preds: pd.DataFrame,
    *,
    policy: Policy = Policy.CANONICAL,
    target: str = "y",
    episodes: EpisodeArrays | None = None,
) -> pd.DataFrame:
    """One row per prediction row: the paper's episode metrics against ``target``.

    ``target="y"`` scores Forecasts (and State outputs as forecasts, "State-as-Forecast");
    ``target="x"`` scores against the recent window (State fidelity). Columns: the episode
    (model, condition, field_id, origin, split, block_id, policy, target), valid, defined, the
    metrics of :func:`episode_scores`, pred_recent, residual_spearman, change_rich.
    ``residual_spearman`` is rho(p - e, y - e) with e the EWMA forecast (only for
    ``target="y"``). ``defined`` is False where the target window is empty.
    """
    if target not in ("x", "y"):
        raise ValueError(f"target must be 'x' or 'y', got {target!r}")
    eps = episodes if episodes is not None else episode_arrays(inst, policy)
    idx = episode_index(eps, preds)
    p, valid = prediction_weights(preds)
    truth = (eps.y if target == "y" else eps.x)[idx]
    defined = np.isfinite(truth).all(axis=1)
    scores = episode_scores(p, truth)
    if target == "y":
        residual = residual_spearman(p, truth, eps.ewma[idx])
    else:
        residual = np.full(len(preds), np.nan, dtype=np.float64)
    return pd.DataFrame(
        {
            "model": preds["model"].astype(str).to_numpy(),
            "condition": preds["condition"].astype(str).to_numpy(),
            "field_id": eps.field_id[idx],
            "origin": eps.origin[idx],
            "split": eps.split[idx],
            "block_id": eps.block_id[idx],
            "policy": parse_enum(Policy, policy).value,
            "target": target,
            "valid": valid,
            "defined": defined,
            **scores,
            "pred_recent": pred_recent(p, eps.x[idx]),
            "residual_spearman": residual,
            "change_rich": eps.change_rich[idx],
        }
    )


def block_of_field(inst: Instance) -> dict[str, str]:
    """field_id -> dependency block id, from ``blocks.parquet``."""
    blocks = inst.blocks
    return dict(zip(blocks["field_id"].astype(str), blocks["block_id"].astype(str), strict=True))
