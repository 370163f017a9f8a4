"""Counting policies: assignments -> direction mass (the paper's counting policies), vectorised.

Each paper-field membership contributes at most one unit of mass to the eight directions
D0..D7. The four frozen policies differ only in where that unit goes:

=================  ==========  ===========================  ==========  ===========
policy             single      boundary                     bridge      other /
                                                                        low_evidence
=================  ==========  ===========================  ==========  ===========
``canonical``      1 primary   1 primary                    1 primary   0
``split_boundary`` 1 primary   1/2 primary, 1/2 secondary   1 primary   0
``single_only``    1 primary   0                            0           0
``secondary``      1 primary   1 secondary                  1 primary   0
=================  ==========  ===========================  ==========  ===========

The paper describes the alternative policies only in terms of boundary mass, so a bridge keeps
its primary unit under ``split_boundary`` and ``secondary`` and, not being single-direction, is
dropped under ``single_only``. A row whose primary is ``other`` counts nothing whatever its type;
a boundary row without a secondary keeps its mass on the primary.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from rap_benchmark.core.records import DIRECTION_KEYS, N_DIRECTIONS, AssignmentType, Policy, parse_enum

_KEY_INDEX = {key: i for i, key in enumerate(DIRECTION_KEYS)}


def direction_index(labels: pd.Series | np.ndarray | list[object]) -> np.ndarray:
    """``D0..D7`` -> 0..7; ``other``, None and anything else -> -1 (int64 array)."""
    series = pd.Series(labels, dtype=object)
    return series.map(_KEY_INDEX).fillna(-1).to_numpy(dtype=np.int64)


def _type_mask(types: np.ndarray, *kinds: AssignmentType) -> np.ndarray:
    return np.isin(types, [k.value for k in kinds])


def direction_weights(assignments: pd.DataFrame, policy: Policy) -> np.ndarray:
    """Mass each assignment row gives to D0..D7 under ``policy``: float64 array (n_rows, 8).

    ``assignments`` needs the columns ``primary``, ``secondary`` and ``type``. Each row's mass
    sums to 1 (counted) or 0 (not counted).
    """
    policy = parse_enum(Policy, policy)
    n = len(assignments)
    types = assignments["type"].astype(object).to_numpy()
    unknown = set(pd.unique(types)) - {t.value for t in AssignmentType}
    if unknown:
        raise ValueError(f"unknown assignment types: {sorted(map(str, unknown))}")
    primary = direction_index(assignments["primary"].to_numpy())
    secondary = direction_index(assignments["secondary"].to_numpy())

    counted = _type_mask(types, AssignmentType.SINGLE, AssignmentType.BOUNDARY, AssignmentType.BRIDGE)
    if policy is Policy.SINGLE_ONLY:
        counted = _type_mask(types, AssignmentType.SINGLE)
    counted &= primary >= 0
    boundary = counted & _type_mask(types, AssignmentType.BOUNDARY) & (secondary >= 0)

    to_primary = counted.astype(np.float64)
    to_secondary = np.zeros(n, dtype=np.float64)
    if policy is Policy.SPLIT_BOUNDARY:
        to_primary[boundary] = 0.5
        to_secondary[boundary] = 0.5
    elif policy is Policy.SECONDARY:
        to_primary[boundary] = 0.0
        to_secondary[boundary] = 1.0

    weights = np.zeros((n, N_DIRECTIONS), dtype=np.float64)
    rows = np.arange(n)
    weights[rows[counted], primary[counted]] = to_primary[counted]  # one cell per row: no collisions
    weights[rows[boundary], secondary[boundary]] += to_secondary[boundary]
    return weights


def composition(counts: np.ndarray) -> np.ndarray:
    """Rows of counts -> rows on the simplex; rows with zero mass become all-NaN."""
    counts = np.asarray(counts, dtype=np.float64)
    total = counts.sum(axis=-1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(total > 0, counts / np.where(total > 0, total, 1.0), np.nan)
