"""The offline assignment instrument: similarity to direction prototypes with margin rules.

For each paper-field membership, ``s_k`` is the cosine between the paper's vector and direction
k's prototype: the pre-cutoff TF-IDF space of :class:`~rap_benchmark.pipeline.codebook.Prototypes`
(mini) or the field's own LSA space of :class:`~rap_benchmark.pipeline.codebook.LocalPrototypes`
(real text). With ``s1 >= s2`` the best two (ties to the lower key) and ``m_f`` the field's
calibration level (median ``s1`` over the field's pre-cutoff memberships with enough
evidence and a positive ``s1``, frozen with the codebook), the rules are applied in this order:

``low_evidence``
    fewer than ``min_known_tokens`` tokens of the paper are in the space's vocabulary
    (primary ``other``, no secondary).
``other``
    ``s1 < other_ratio * m_f``: no direction is close enough (primary ``other``).
``bridge``
    a tie (``s2 >= r* s1``, see below) where the paper is a *strong* member of both
    directions (``s2 >= bridge_strength * m_f``) and the two directions are *distinct* (their
    prototypes' cosine is at most the median cosine between the field's direction pairs): the
    paper genuinely spans two separate programmes. Primary = best, secondary = runner-up.
``boundary``
    any other tie: the runner-up is within the relative margin of the best, ``s2 >= r* s1``.
``single``
    otherwise (no secondary).

The tie ratio ``r*`` is the ``1 - tie_rate`` quantile of ``s2 / s1`` over the calibration rows
(memberships with enough evidence dated before the codebook cutoff, or before
``spec.eligibility_end`` with ``tie_calibration = "eligibility"``), so that a share ``tie_rate``
of them are ties. The default is the paper's instrument's tie share (42.60% boundary + 1.58%
bridge): a fixed margin does not transfer between corpora (real abstracts give much flatter
similarity profiles than mini), a calibrated rate does. With ``bridge_rate`` set, the bridge
strength is calibrated the same way: the quantile of ``s2 / m_f`` among calibration ties between
distinct directions that makes that share of the calibration rows bridges. No forecasting
outcome is consulted; later papers are labelled with the frozen values.

The rule constants are :class:`AssignRules`; ``spec.extra["assign_rules"]`` may override them
(so the parameter ledger records what was used).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import pandas as pd

from rap_benchmark.core.records import DIRECTION_KEYS, AssignmentType, Codebook
from rap_benchmark.core.spec import BenchmarkSpec
from rap_benchmark.pipeline.codebook import LocalPrototypes, Prototypes

__all__ = [
    "AssignRules",
    "assign_offline",
    "calibrate_bridge_strength",
    "calibrate_tie_ratio",
    "classify",
    "direction_similarities",
    "distinct_pairs",
    "label_memberships",
    "runner_up_ratio",
]


@dataclass(frozen=True)
class AssignRules:
    """Constants of the offline instrument's margin rules (see the module docstring)."""

    min_known_tokens: int = 8
    other_ratio: float = 0.39
    tie_rate: float = 0.4418
    bridge_strength: float = 0.80
    bridge_rate: float | None = None  # None: the fixed bridge_strength
    tie_calibration: str = "pre_cutoff"  # or "eligibility": which rows calibrate r* and m_f

    @classmethod
    def from_spec(cls, spec: BenchmarkSpec) -> AssignRules:
        overrides = dict(spec.extra.get("assign_rules", {}))
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(overrides) - known)
        if unknown:
            raise ValueError(f"unknown assign_rules keys: {', '.join(unknown)}")
        rules = cls(**overrides)
        if rules.bridge_rate is not None and not 0.0 <= rules.bridge_rate < 1.0:
            raise ValueError(f"assign_rules.bridge_rate must be in [0, 1), not {rules.bridge_rate!r}")
        if rules.tie_calibration not in ("pre_cutoff", "eligibility"):
            raise ValueError(
                f"assign_rules.tie_calibration must be pre_cutoff or eligibility, not {rules.tie_calibration!r}"
            )
        return rules


def direction_similarities(
    papers: pd.DataFrame, memberships: pd.DataFrame, prototypes: Prototypes | LocalPrototypes
) -> tuple[pd.DataFrame, np.ndarray, np.ndarray]:
    """Cosine of each membership's paper to its field's eight prototypes.

    Returns (memberships joined with ``date``, sorted by (field_id, date, arxiv_id);
    similarities n x 8; known-token counts n). Papers missing from ``papers`` raise KeyError.
    """
    pos = pd.Series(np.arange(len(papers)), index=papers["arxiv_id"].to_numpy())
    missing = ~memberships["arxiv_id"].isin(pos.index)
    if missing.any():
        raise KeyError(
            f"{int(missing.sum())} memberships name papers not in the corpus, e.g. {memberships.loc[missing, 'arxiv_id'].iloc[0]}"
        )
    absent = sorted(set(memberships["field_id"]) - set(prototypes.centroids))
    if absent:
        raise KeyError(f"no prototypes for fields {', '.join(absent[:5])}")
    prepared = prototypes.prepare(papers)
    m = memberships[["arxiv_id", "field_id"]].copy()
    rows = pos.loc[m["arxiv_id"].to_numpy()].to_numpy()
    m["date"] = papers["date"].astype(str).to_numpy()[rows]
    m["_row"] = rows
    m = m.sort_values(["field_id", "date", "arxiv_id"], kind="stable").reset_index(drop=True)
    sims = np.zeros((len(m), len(DIRECTION_KEYS)), dtype=np.float64)
    fids = m["field_id"].to_numpy().astype(str)
    bounds = np.flatnonzero(np.r_[True, fids[1:] != fids[:-1], True])
    for lo, hi in zip(bounds[:-1], bounds[1:], strict=True):
        sims[lo:hi] = prototypes.similarities(prepared, fids[lo], m["_row"].to_numpy()[lo:hi])
    n_known = prepared[1]
    known = n_known[m["_row"].to_numpy()]
    return m.drop(columns="_row"), sims, known


@dataclass(frozen=True)
class Calibration:
    """What the margin rules were calibrated to, frozen with the codebook: ``tie_ratio`` (``r*``),
    ``levels`` (field id -> ``m_f``), ``distinct`` (field id -> its 8 x 8 distinct-pair table) and
    ``bridge_strength`` (calibrated when the rules set ``bridge_rate``; None: the rules' fixed one)."""

    tie_ratio: float
    levels: dict[str, float]
    distinct: dict[str, np.ndarray]
    bridge_strength: float | None = None


def _row_tables(fids: np.ndarray, calibration: Calibration) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per row: its field's level, its field's table index, and the stacked distinct-pair tables
    (index 0 is an all-False table)."""
    order = sorted(calibration.levels)
    absent = sorted(set(fids) - set(order))
    if absent:
        raise KeyError(f"no calibration for fields {', '.join(absent[:5])}")
    index = {fid: i + 1 for i, fid in enumerate(order)}
    level_of = np.array([0.0] + [calibration.levels[f] for f in order])
    tables = np.stack(
        [np.zeros((len(DIRECTION_KEYS), len(DIRECTION_KEYS)), dtype=bool)] + [calibration.distinct[f] for f in order]
    )
    table = np.fromiter((index[f] for f in fids), dtype=np.int64, count=len(fids))
    return level_of[table], table, tables


def assign_offline(
    papers: pd.DataFrame,
    memberships: pd.DataFrame,
    codebooks: list[Codebook],
    prototypes: Prototypes | LocalPrototypes,
    spec: BenchmarkSpec,
) -> pd.DataFrame:
    """Label every membership (see the module docstring).

    Returns the ``assignments.parquet`` columns (:data:`rap_benchmark.core.schemas.ASSIGNMENTS`), one row per
    membership, sorted by (field_id, date, arxiv_id).
    """
    return calibrate_and_assign(papers, memberships, codebooks, prototypes, spec)[0]


def calibrate_and_assign(
    papers: pd.DataFrame,
    memberships: pd.DataFrame,
    codebooks: list[Codebook],
    prototypes: Prototypes,
    spec: BenchmarkSpec,
) -> tuple[pd.DataFrame, Calibration]:
    """:func:`assign_offline`'s labels and the :class:`Calibration` they were made with."""
    rules = AssignRules.from_spec(spec)
    cb_fields = {cb.field_id for cb in codebooks}
    absent = sorted(set(memberships["field_id"]) - cb_fields)
    if absent:
        raise KeyError(f"no codebook for fields {', '.join(absent[:5])}")
    m, sims, known = direction_similarities(papers, memberships, prototypes)
    s1 = sims.max(axis=1)
    fids = m["field_id"].to_numpy().astype(str)
    calib_end = spec.codebook_cutoff if rules.tie_calibration == "pre_cutoff" else spec.eligibility_end
    pre = m["date"].to_numpy().astype(str) < calib_end
    levels: dict[str, float] = {}
    bounds = np.flatnonzero(np.r_[True, fids[1:] != fids[:-1], True])
    for lo, hi in zip(bounds[:-1], bounds[1:], strict=True):
        calib = _calibration_rows(known[lo:hi], s1[lo:hi], pre[lo:hi], rules)
        levels[str(fids[lo])] = float(np.median(s1[lo:hi][calib])) if calib.any() else 0.0
    distinct = {fid: distinct_pairs(prototypes.centroids[fid]) for fid in levels}
    calibration = Calibration(calibrate_tie_ratio(sims, known, pre, rules), levels, distinct)
    if rules.bridge_rate is not None:
        level, table, tables = _row_tables(fids, calibration)
        strength = calibrate_bridge_strength(sims, known, pre, level, tables, table, calibration.tie_ratio, rules)
        calibration = dataclasses.replace(calibration, bridge_strength=strength)
    return label_memberships(m, sims, known, calibration, rules), calibration


def label_memberships(
    m: pd.DataFrame, sims: np.ndarray, known: np.ndarray, calibration: Calibration, rules: AssignRules
) -> pd.DataFrame:
    """The assignments of ``direction_similarities``' output under a frozen calibration."""
    fids = m["field_id"].to_numpy().astype(str)
    level, table, tables = _row_tables(fids, calibration)
    primary, secondary, kind = classify(
        sims, known, level, tables, table, rules, calibration.tie_ratio, calibration.bridge_strength
    )
    out = m[["arxiv_id", "field_id", "date"]].copy()
    out["primary"] = pd.Series(primary, index=out.index, dtype=object)
    out["secondary"] = pd.Series(secondary, index=out.index, dtype=object)  # None, not NaN
    out["type"] = pd.Series(kind, index=out.index, dtype=object)
    return out.reset_index(drop=True)


def _top_two(sims: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per row: the best and second direction (ties to the lower key) and their cosines s1, s2."""
    order = np.argsort(-sims, axis=1, kind="stable")
    best, second = order[:, 0], order[:, 1]
    rows = np.arange(sims.shape[0])
    return best, second, sims[rows, best], sims[rows, second]


def _calibration_rows(known: np.ndarray, s1: np.ndarray, pre: np.ndarray, rules: AssignRules) -> np.ndarray:
    """Rows with enough evidence and a positive best cosine, dated in the calibration frame (all
    such rows when none is)."""
    ok = (known >= rules.min_known_tokens) & (s1 > 0)
    return ok & pre if (ok & pre).any() else ok


def runner_up_ratio(sims: np.ndarray) -> np.ndarray:
    """``s2 / s1`` per row (0 where ``s1 <= 0``)."""
    top = -np.sort(-sims, axis=1)[:, :2]
    return np.divide(top[:, 1], top[:, 0], out=np.zeros(len(sims)), where=top[:, 0] > 0)


def calibrate_tie_ratio(sims: np.ndarray, known: np.ndarray, pre: np.ndarray, rules: AssignRules) -> float:
    """``r*``: the ``1 - tie_rate`` quantile of ``s2 / s1`` over pre-cutoff rows with enough
    evidence and a positive best similarity (all such rows when none is pre-cutoff)."""
    calib = _calibration_rows(known, sims.max(axis=1, initial=0.0), pre, rules)
    if not calib.any():
        return 1.0
    return float(np.quantile(runner_up_ratio(sims)[calib], 1.0 - rules.tie_rate))


def calibrate_bridge_strength(
    sims: np.ndarray,
    known: np.ndarray,
    pre: np.ndarray,
    level: np.ndarray,
    tables: np.ndarray,
    table: np.ndarray,
    tie_ratio: float,
    rules: AssignRules,
) -> float:
    """The bridge strength that makes a share ``rules.bridge_rate`` of the calibration rows (those
    :func:`calibrate_tie_ratio` uses) bridges: a quantile of ``s2 / m_f`` over the calibration
    ties between distinct directions (0.0 when there are too few such ties to reach the share; just
    above the largest when the share is 0)."""
    best, second, s1, s2 = _top_two(sims)
    calib = _calibration_rows(known, s1, pre, rules)
    cand = calib & (s2 >= tie_ratio * s1) & tables[table, best, second] & (level > 0)
    want = float(rules.bridge_rate or 0.0) * int(calib.sum())
    if not cand.any() or want >= cand.sum():
        return 0.0
    strength = s2[cand] / level[cand]
    if want <= 0:
        return float(np.nextafter(strength.max(), np.inf))  # no calibration row is a bridge
    return float(np.quantile(strength, 1.0 - want / int(cand.sum())))


def distinct_pairs(centroids: np.ndarray) -> np.ndarray:
    """8 x 8 booleans: directions i and j are *distinct* when their prototypes' cosine is at
    most the median cosine over the field's 28 direction pairs."""
    pair = centroids @ centroids.T
    off = pair[np.triu_indices(len(DIRECTION_KEYS), 1)]
    out = pair <= np.median(off)
    np.fill_diagonal(out, False)
    return out


def classify(
    sims: np.ndarray,
    known: np.ndarray,
    level: np.ndarray,
    distinct: np.ndarray,
    table: np.ndarray,
    rules: AssignRules,
    tie_ratio: float,
    bridge_strength: float | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The margin rules of the module docstring, vectorised (``tie_ratio`` is ``r*``;
    ``bridge_strength`` the calibrated one, None for ``rules.bridge_strength``).

    ``sims`` n x 8 cosines; ``known`` known-token counts; ``level`` each row's field calibration
    level; ``distinct[table[i]]`` the 8 x 8 distinct-pair table of row i's field. Returns
    (primary, secondary, type) object arrays.
    """
    n = sims.shape[0]
    best, second, s1, s2 = _top_two(sims)
    enough = known >= rules.min_known_tokens
    tie = s2 >= tie_ratio * s1
    apart = distinct[table, best, second]
    kind = np.full(n, AssignmentType.SINGLE.value, dtype=object)
    kind[tie] = AssignmentType.BOUNDARY.value
    strength = rules.bridge_strength if bridge_strength is None else bridge_strength
    kind[tie & apart & (s2 >= strength * level)] = AssignmentType.BRIDGE.value
    kind[(s1 < rules.other_ratio * level) | (s1 <= 0.0)] = AssignmentType.OTHER.value
    kind[~enough] = AssignmentType.LOW_EVIDENCE.value

    keys = np.asarray(DIRECTION_KEYS, dtype=object)
    primary = keys[best].copy()
    no_dir = (kind == AssignmentType.OTHER.value) | (kind == AssignmentType.LOW_EVIDENCE.value)
    primary[no_dir] = "other"
    secondary = np.full(n, None, dtype=object)
    has_second = (kind == AssignmentType.BOUNDARY.value) | (kind == AssignmentType.BRIDGE.value)
    secondary[has_second] = keys[second[has_second]]
    return primary, secondary, kind
