"""Percentile bootstrap intervals for field-macro statistics (the paper's uncertainty intervals).

The primary unit is the frozen dependency block: blocks are drawn with replacement (as many
draws as there are blocks) and the field-macro statistic is recomputed on the fields of the
drawn blocks, each field counted once per draw of its block. ``field_bootstrap`` resamples fields
instead (the field-clustered sensitivity). Paired contrasts difference matched (field, origin)
cells before aggregation.

Vectorised: the per-field means are summed per block once; a resample is a vector of block draw
counts (a row of a bincount matrix), so every resample's statistic is
``(W @ block_sums) / (W @ block_field_counts)``. Units (blocks or fields) without any finite value
are not resampling units. Randomness comes only from ``np.random.default_rng(seed)``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from numpy.typing import ArrayLike, NDArray

from rap_benchmark.core.serial import Record
from rap_benchmark.evaluation.scoring.aggregate import field_table

_CHUNK = 2048  # resamples drawn per batch (bounds memory; results do not depend on it)
_CACHED_BYTES = 32 << 20  # draws at most this large are kept for reuse (8 of them at most)


@dataclass(frozen=True, slots=True)
class Interval(Record):
    """A point estimate with a two-sided percentile bootstrap interval."""

    estimate: float
    lo: float
    hi: float
    n_resamples: int
    seed: int
    level: float = 0.95
    unit: str = "block"  # what was resampled: "block" or "field"
    n_units: int = 0  # resampling units carrying data
    n_fields: int = 0  # fields carrying data
    n_cells: int = 0  # finite episode (or matched-cell) values aggregated

    def excludes_zero(self) -> bool:
        return bool(self.lo > 0 or self.hi < 0)


def draw_weights(n_units: int, n_resamples: int, seed: int) -> Iterator[NDArray[np.float64]]:
    """The bootstrap's unit draws, in chunks: row r counts how often each of ``n_units`` units was
    drawn in resample r (``n_units`` draws with replacement). Every statistic of this module, and
    the rank intervals, see the same draws for the same (n_units, n_resamples, seed).

    A board or report asks for the same draws once per interval (every model, metric and
    contrast), so draws up to ``_CACHED_BYTES`` are made once and kept (read-only) for the next
    call; larger ones are drawn chunk by chunk each time. The chunks are the same either way."""
    if n_units == 0:
        raise ValueError("no resampling unit carries data")
    if n_resamples < 1:
        raise ValueError("n_resamples must be >= 1")
    if n_units * n_resamples * np.dtype(np.float64).itemsize <= _CACHED_BYTES:
        yield from _kept_draws(n_units, n_resamples, seed)
    else:
        yield from _draws(n_units, n_resamples, seed)


def _draws(n_units: int, n_resamples: int, seed: int) -> Iterator[NDArray[np.float64]]:
    rng = np.random.default_rng(seed)
    for start in range(0, n_resamples, _CHUNK):
        size = min(_CHUNK, n_resamples - start)
        draws = rng.integers(0, n_units, size=(size, n_units))
        flat = (draws + (np.arange(size) * n_units)[:, None]).ravel()
        yield np.bincount(flat, minlength=size * n_units).reshape(size, n_units).astype(np.float64)


@lru_cache(maxsize=8)
def _kept_draws(n_units: int, n_resamples: int, seed: int) -> tuple[NDArray[np.float64], ...]:
    chunks = tuple(_draws(n_units, n_resamples, seed))
    for chunk in chunks:
        chunk.setflags(write=False)
    return chunks


def resample_statistics(
    unit_sums: NDArray[np.float64], unit_counts: NDArray[np.float64], *, n_resamples: int, seed: int
) -> NDArray[np.float64]:
    """The bootstrap distribution of sum(W·sums)/sum(W·counts) over ``n_resamples`` unit draws.

    ``unit_sums[b]`` is the sum of the field means in unit b and ``unit_counts[b]`` its number of
    fields; each resample draws len(units) units with replacement. A second axis holds several
    statistics recomputed on the same draws (NaN where a statistic has no field in a draw).
    """
    out = np.empty((n_resamples, *unit_sums.shape[1:]), dtype=np.float64)
    start = 0
    for weights in draw_weights(unit_sums.shape[0], n_resamples, seed):
        with np.errstate(invalid="ignore", divide="ignore"):
            out[start : start + len(weights)] = (weights @ unit_sums) / (weights @ unit_counts)
        start += len(weights)
    return out


def rank_intervals(
    values: Sequence[ArrayLike],
    field_ids: Sequence[ArrayLike],
    block_of_field: Mapping[str, str],
    *,
    n_resamples: int,
    seed: int,
    level: float = 0.95,
) -> NDArray[np.int64]:
    """Percentile intervals of each entry's rank (1 = highest field-macro mean) under the block
    bootstrap: every entry is recomputed on the same block draws in each resample, ranked there
    (ties share the better rank; an entry without data in a draw ranks last), and the interval is
    the ``level`` quantiles of its ranks. Returns an (n, 2) integer array of (lo, hi) ranks.
    """
    from scipy.stats import rankdata

    if len(values) != len(field_ids):
        raise ValueError("values and field_ids differ in length")
    tables = [field_table(v, f) for v, f in zip(values, field_ids, strict=True)]
    blocks = sorted({str(block_of_field[str(f)]) for t in tables for f in t.field_ids[t.has_data].tolist()})
    index = {b: i for i, b in enumerate(blocks)}
    sums = np.zeros((len(tables), len(blocks)))
    counts = np.zeros((len(tables), len(blocks)))
    for k, t in enumerate(tables):
        for f, m in zip(t.field_ids[t.has_data].tolist(), t.means[t.has_data].tolist(), strict=True):
            b = index[str(block_of_field[str(f)])]
            sums[k, b] += m
            counts[k, b] += 1
    stats = resample_statistics(sums.T, counts.T, n_resamples=n_resamples, seed=seed)
    ranks = rankdata(np.where(np.isnan(stats), np.inf, -stats), "min", axis=1)
    lo = np.quantile(ranks, (1 - level) / 2, axis=0, method="lower")
    hi = np.quantile(ranks, (1 + level) / 2, axis=0, method="higher")
    return np.column_stack([lo, hi]).astype(np.int64)


def _interval(
    values: ArrayLike,
    field_ids: ArrayLike,
    block_of_field: Mapping[str, str] | None,
    *,
    n_resamples: int,
    seed: int,
    level: float,
) -> Interval:
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    table = field_table(values, field_ids)
    keep = table.has_data
    fids = table.field_ids[keep]
    means = table.means[keep]
    n_cells = int(table.counts.sum())
    unit = "field" if block_of_field is None else "block"
    if fids.size == 0:
        nan = float("nan")
        return Interval(nan, nan, nan, n_resamples, seed, level, unit, 0, 0, 0)
    if block_of_field is None:
        unit_sums, unit_counts = means, np.ones_like(means)
    else:
        missing = [f for f in fids.tolist() if f not in block_of_field]
        if missing:
            raise KeyError(f"fields without a dependency block: {', '.join(missing[:10])}")
        blocks = np.array([str(block_of_field[f]) for f in fids.tolist()])
        _, inv = np.unique(blocks, return_inverse=True)
        unit_sums = np.bincount(inv, weights=means)
        unit_counts = np.bincount(inv).astype(np.float64)
    stats = resample_statistics(unit_sums, unit_counts, n_resamples=n_resamples, seed=seed)
    lo, hi = np.quantile(stats, [(1 - level) / 2, (1 + level) / 2])
    return Interval(
        estimate=float(means.mean()),
        lo=float(lo),
        hi=float(hi),
        n_resamples=n_resamples,
        seed=seed,
        level=level,
        unit=unit,
        n_units=int(unit_sums.size),
        n_fields=int(fids.size),
        n_cells=n_cells,
    )


def block_bootstrap(
    values: ArrayLike,
    field_ids: ArrayLike,
    block_of_field: Mapping[str, str],
    *,
    n_resamples: int,
    seed: int,
    level: float = 0.95,
) -> Interval:
    """Field-macro estimate with a percentile interval from resampling dependency blocks."""
    return _interval(values, field_ids, block_of_field, n_resamples=n_resamples, seed=seed, level=level)


def field_bootstrap(
    values: ArrayLike, field_ids: ArrayLike, *, n_resamples: int, seed: int, level: float = 0.95
) -> Interval:
    """Field-clustered sensitivity: the same interval resampling fields instead of blocks."""
    return _interval(values, field_ids, None, n_resamples=n_resamples, seed=seed, level=level)


def match_cells(
    a_fields: ArrayLike, a_origins: ArrayLike, b_fields: ArrayLike, b_origins: ArrayLike
) -> tuple[NDArray[np.intp], NDArray[np.intp]]:
    """Indices (ia, ib) of the (field, origin) cells present in both a and b, sorted by key.

    Duplicate keys on either side raise ValueError (a cell is one episode).
    """
    ka = np.char.add(np.char.add(np.asarray(a_fields).astype(str), "@"), np.asarray(a_origins).astype(str))
    kb = np.char.add(np.char.add(np.asarray(b_fields).astype(str), "@"), np.asarray(b_origins).astype(str))
    for name, keys in (("a", ka), ("b", kb)):
        uniq, counts = np.unique(keys, return_counts=True)
        if (counts > 1).any():
            raise ValueError(f"duplicate (field, origin) cells in {name}: {', '.join(uniq[counts > 1][:5])}")
    _, ia, ib = np.intersect1d(ka, kb, assume_unique=True, return_indices=True)
    return ia, ib


def paired_contrast(
    a_values: ArrayLike,
    a_fields: ArrayLike,
    a_origins: ArrayLike,
    b_values: ArrayLike,
    b_fields: ArrayLike,
    b_origins: ArrayLike,
    *,
    block_of_field: Mapping[str, str] | None,
    n_resamples: int,
    seed: int,
    level: float = 0.95,
) -> Interval:
    """a - b on the same (field, origin) cells only, differenced before aggregation.

    A cell enters when both a and b have a finite value there. The interval resamples dependency
    blocks (``block_of_field``) or, when it is None, fields (the field-clustered sensitivity).
    """
    av = np.asarray(a_values, dtype=np.float64).ravel()
    bv = np.asarray(b_values, dtype=np.float64).ravel()
    ia, ib = match_cells(a_fields, a_origins, b_fields, b_origins)
    diff = av[ia] - bv[ib]
    fields = np.asarray(a_fields).astype(str)[ia]
    return _interval(diff, fields, block_of_field, n_resamples=n_resamples, seed=seed, level=level)
