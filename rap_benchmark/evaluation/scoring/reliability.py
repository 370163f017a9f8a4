"""The paper's split-half reliability of the target windows and its reliability ceiling.

For every episode (field f, origin T) the papers of the target window [T, T+w) that carry counted
mass under the policy are split at random into two halves (sizes floor(n/2) and ceil(n/2)). Each
half's direction counts give a composition; the halves' direction ranks are correlated
(Spearman, NaN when a half is constant, e.g. empty) and the Spearman-Brown correction
r_full = 2r / (1 + r) restores the full sample size (undefined, NaN, at r = -1). Each episode's
reliability is its mean over ``n_splits`` random splits (splits where it is undefined are left
out); the repeatability is the mean over episodes with a defined value, and the observable-score
ceiling is sqrt(repeatability).

Realised changes at h months: for a field with origins T and T+h, each window is split into
halves independently; half A's change is share_A(T+h) - share_A(T) and likewise for B; the
halves' changes are rank-correlated and corrected the same way. The halves partition each
window, so their sampling deviations are opposite: where the realised change is mostly sampling
noise the change reliability is negative (the paper reports 0.149 / 0.298 / 0.405 at 6 / 12 / 18
months). ``*_half`` fields keep the uncorrected mean correlations, from which Spearman-Brown of
the mean correlation can be formed when a less outlier-sensitive summary is wanted (the per-split
correction 2r/(1+r) grows without bound as r approaches -1).

The paper's 0.911 ceiling is the square root of a posterior-predictive repeatability; the
split-half Spearman-Brown value here is the estimator the paper reports beside it (0.820 over all
episodes), so this ceiling is the split-half version.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from rap_benchmark.core.artifacts import Instance
from rap_benchmark.core.dates import add_months, parse_date
from rap_benchmark.core.records import N_DIRECTIONS, Policy, Split, parse_enum
from rap_benchmark.core.serial import SKIP, Record, renamed
from rap_benchmark.evaluation.scoring.metrics import rank_correlation
from rap_benchmark.pipeline.policies import direction_weights


@dataclass(frozen=True, eq=False)
class ReliabilityResult(Record):
    """Split-half reliability of one policy's targets (optionally one split's fields)."""

    policy: Policy
    split: Split | None
    n_splits: int
    seed: int
    # mean Spearman-Brown full-window reliability (the repeatability)
    level: float = field(metadata=renamed("repeatability"))
    level_half: float = field(metadata=renamed("split_half_r"))  # mean uncorrected split-half Spearman
    ceiling: float  # sqrt(repeatability)
    n_episodes: int  # episodes with a defined reliability
    changes: dict[int, float] = field(default_factory=dict)  # h -> mean Spearman-Brown reliability
    changes_n: dict[int, int] = field(default_factory=dict)  # h -> origin pairs with a defined value
    # h -> mean uncorrected split-half r
    changes_half: dict[int, float] = field(default_factory=dict, metadata=renamed("changes_split_half_r"))
    # field_id, origin, n_papers, r_half, r_full (for Python callers; not in the JSON form)
    episodes: pd.DataFrame = field(default_factory=pd.DataFrame, metadata=SKIP)


def spearman_brown(r: NDArray[np.float64]) -> NDArray[np.float64]:
    """Full-length reliability 2r / (1 + r) from a split-half correlation; NaN at r = -1."""
    r = np.asarray(r, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(r > -1, 2 * r / (1 + r), np.nan)


class _Splitter:
    """Random half-splits of every group's papers, prepared once and drawn many times.

    Papers are sorted by group once; a draw gives each paper a uniform key, orders papers by
    (group, key) with one argsort of ``group + key/2`` on already group-sorted data, and puts the
    first floor(n/2) papers of each group of n into half 0. Direction mass is kept as sparse
    (paper, direction, mass) triplets so that one ``bincount`` yields every half's counts.
    """

    def __init__(self, groups: NDArray[np.int64], weights: NDArray[np.float64], n_groups: int) -> None:
        groups = np.asarray(groups, dtype=np.int64)
        self.m = groups.size
        self.n_groups = n_groups
        self.n_dirs = weights.shape[1]
        self.by_group = np.argsort(groups, kind="stable")
        self.sorted_groups = groups[self.by_group].astype(np.float64)
        sizes = np.bincount(groups, minlength=n_groups)
        starts = np.concatenate(([0], np.cumsum(sizes)[:-1]))
        sg = groups[self.by_group]
        self.pos_base = np.arange(self.m) - starts[sg]  # position within the group, in sorted order
        self.half_size = (sizes // 2)[sg]
        paper, direction = np.nonzero(weights)
        self.t_paper = paper
        self.t_base = (groups[paper] * 2) * self.n_dirs + direction
        self.t_mass = weights[paper, direction]

    def draw(self, rng: np.random.Generator) -> NDArray[np.float64]:
        keys = rng.random(self.m)
        within = np.argsort(self.sorted_groups + 0.5 * keys[self.by_group])  # stays group-sorted
        half = np.empty(self.m, dtype=np.int64)
        half[self.by_group[within]] = (self.pos_base >= self.half_size).astype(np.int64)
        slots = self.t_base + half[self.t_paper] * self.n_dirs
        counts = np.bincount(slots, weights=self.t_mass, minlength=self.n_groups * 2 * self.n_dirs)
        return counts.reshape(self.n_groups, 2, self.n_dirs)


def _shares(counts: NDArray[np.float64]) -> NDArray[np.float64]:
    total = counts.sum(axis=-1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(total > 0, counts / np.where(total > 0, total, 1.0), np.nan)


def _nanmean_rows(a: NDArray[np.float64]) -> NDArray[np.float64]:
    ok = np.isfinite(a)
    n = ok.sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(n > 0, np.where(ok, a, 0.0).sum(axis=0) / np.maximum(n, 1), np.nan)


def _cat(parts: list[NDArray[np.int64]]) -> NDArray[np.int64]:
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


def _mean_finite(a: NDArray[np.float64]) -> tuple[float, int]:
    ok = np.isfinite(a)
    return (float(a[ok].mean()) if ok.any() else float("nan")), int(ok.sum())


def reliability(
    inst: Instance,
    policy: Policy = Policy.CANONICAL,
    *,
    n_splits: int | None = None,
    seed: int | None = None,
    split: Split | None = None,
    horizons: tuple[int, ...] | None = None,
    progress: bool = True,
) -> ReliabilityResult:
    """Split-half reliability of the instance's target windows under ``policy``.

    ``n_splits`` and ``seed`` default to the spec's ``reliability_splits`` and
    ``reliability_seed``; ``split`` restricts to Dev or Test fields (None: all episodes);
    ``horizons`` defaults to the spec's ``revision_horizons``.
    """
    from tqdm.auto import tqdm

    spec = inst.spec
    policy = parse_enum(Policy, policy)
    n_splits = spec.reliability_splits if n_splits is None else int(n_splits)
    seed = spec.reliability_seed if seed is None else int(seed)
    horizons = tuple(spec.revision_horizons) if horizons is None else tuple(horizons)
    split_value = None if split is None else parse_enum(Split, split).value
    if n_splits < 1:
        raise ValueError("n_splits must be >= 1")

    eps = inst.episodes[inst.episodes["policy"].astype(str) == policy.value]
    if split_value is not None:
        eps = eps[eps["split"].astype(str) == split_value]
    eps = eps[["field_id", "origin"]].astype(str).drop_duplicates().sort_values(["field_id", "origin"])
    field_ids = sorted(eps["field_id"].unique().tolist())
    origins = [str(o) for o in spec.origins]
    n_f, n_o = len(field_ids), len(origins)
    n_groups = n_f * n_o
    in_panel = np.zeros(n_groups, dtype=bool)
    f_index = {f: i for i, f in enumerate(field_ids)}
    o_index = {o: k for k, o in enumerate(origins)}
    for f, o in eps.itertuples(index=False):
        if o in o_index:
            in_panel[f_index[f] * n_o + o_index[o]] = True

    asg = inst.assignments
    asg = asg[asg["field_id"].astype(str).isin(f_index)]
    weights = direction_weights(asg, policy)
    counted = weights.sum(axis=1) > 0
    asg, weights = asg[counted], weights[counted]
    fidx = asg["field_id"].astype(str).map(f_index).to_numpy(dtype=np.int64)
    dates = asg["date"].astype(str).str.slice(0, 10).to_numpy()
    group_parts, weight_parts = [], []
    for k, origin in enumerate(origins):
        start = parse_date(origin)
        end = add_months(start, spec.window_months)
        sel = (dates >= start.isoformat()) & (dates < end.isoformat())
        group_parts.append(fidx[sel] * n_o + k)
        weight_parts.append(weights[sel])
    groups = _cat(group_parts)
    paper_w = np.concatenate(weight_parts) if weight_parts else np.zeros((0, N_DIRECTIONS))
    keep = in_panel[groups]
    groups, paper_w = groups[keep], paper_w[keep]
    n_papers = np.bincount(groups, minlength=n_groups)

    # origin pairs (T, T+h) of the same field, for the change reliabilities
    pairs: dict[int, tuple[NDArray[np.int64], NDArray[np.int64]]] = {}
    for h in horizons:
        firsts, seconds = [], []
        for k, origin in enumerate(origins):
            later = add_months(parse_date(origin), h).isoformat()
            if later in o_index:
                base = np.arange(n_f) * n_o
                a, b = base + k, base + o_index[later]
                ok = in_panel[a] & in_panel[b]
                firsts.append(a[ok])
                seconds.append(b[ok])
        pairs[h] = (_cat(firsts), _cat(seconds))

    rng = np.random.default_rng(seed)
    splitter = _Splitter(groups, paper_w, n_groups)
    r_half = np.full((n_splits, n_groups), np.nan)
    r_change = {h: np.full((n_splits, pairs[h][0].size), np.nan) for h in horizons}
    for s in tqdm(range(n_splits), desc=f"reliability ({policy.value})", disable=not progress, leave=False):
        halves = splitter.draw(rng)
        r_half[s] = rank_correlation(halves[:, 0], halves[:, 1])
        shares = _shares(halves)
        for h, (a, b) in pairs.items():
            if a.size:
                delta = shares[b] - shares[a]  # (pairs, 2, 8)
                r_change[h][s] = rank_correlation(delta[:, 0], delta[:, 1])

    r_full_ep = _nanmean_rows(spearman_brown(r_half))
    r_half_ep = _nanmean_rows(r_half)
    level, n_defined = _mean_finite(r_full_ep[in_panel])
    level_half, _ = _mean_finite(r_half_ep[in_panel])
    changes: dict[int, float] = {}
    changes_n: dict[int, int] = {}
    changes_half: dict[int, float] = {}
    for h in horizons:  # no origin pair at h: NaN over 0 pairs
        changes[h], changes_n[h] = _mean_finite(_nanmean_rows(spearman_brown(r_change[h])))
        changes_half[h], _ = _mean_finite(_nanmean_rows(r_change[h]))
    panel = np.flatnonzero(in_panel)
    table = pd.DataFrame(
        {
            "field_id": [field_ids[g // n_o] for g in panel],
            "origin": [origins[g % n_o] for g in panel],
            "n_papers": n_papers[panel],
            "r_half": r_half_ep[panel],
            "r_full": r_full_ep[panel],
        }
    )
    ceiling = float(np.sqrt(level)) if np.isfinite(level) and level > 0 else float("nan")
    return ReliabilityResult(
        policy=policy.value,
        split=split_value,
        n_splits=n_splits,
        seed=seed,
        level=level,
        level_half=level_half,
        ceiling=ceiling,
        n_episodes=n_defined,
        changes=changes,
        changes_n=changes_n,
        changes_half=changes_half,
        episodes=table,
    )
