"""The paper's dependency blocks and Dev/Test split.

Two fields are *connected* when their pre-cutoff membership sets A and B share at least
``spec.block_min_shared`` papers AND their overlap coefficient |A ∩ B| / min(|A|, |B|) is at least
``spec.block_min_overlap``. The connected components of that graph are the frozen dependency
blocks (a field with no strong edge is a block of its own). Dev is the seed fields plus every
block containing one (closure); Test is everything else, so no block is ever split.

The overlap comparison is exact: the threshold is read as the decimal fraction it was written as
(0.60 -> 3/5) and compared in integer arithmetic, so an overlap of exactly 0.60 connects and
anything below it does not, whatever floating-point rounding would say.

Block ids are ``B000``, ``B001``, ... in the order of each block's smallest field id, so they
depend only on the block structure, never on input order.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pandas as pd

from rap_benchmark.core.dates import parse_date
from rap_benchmark.core.records import Split
from rap_benchmark.core.spec import BenchmarkSpec


def overlap_fraction(threshold: float) -> Fraction:
    """The threshold as the exact fraction its decimal spelling denotes (0.6 -> 3/5)."""
    return Fraction(repr(float(threshold))).limit_denominator(10**9)


def membership_overlaps(
    memberships: pd.DataFrame, field_ids: list[str]
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Pairwise intersections of fields' paper sets.

    ``memberships`` has ``field_id`` and ``arxiv_id`` (duplicates ignored). Returns
    ``(sizes, i, j, shared)``: each field's set size (in ``field_ids`` order) and every pair
    i < j with a non-empty intersection of ``shared`` papers.
    """
    from scipy import sparse

    index = {f: k for k, f in enumerate(field_ids)}
    pairs = memberships[["field_id", "arxiv_id"]].drop_duplicates()
    pairs = pairs[pairs["field_id"].isin(index)]
    rows = pairs["field_id"].map(index).to_numpy(dtype=np.int64)
    papers, cols = np.unique(pairs["arxiv_id"].to_numpy(dtype=object), return_inverse=True)
    incidence = sparse.csr_matrix(
        (np.ones(len(rows), dtype=np.int64), (rows, cols.astype(np.int64))), shape=(len(field_ids), len(papers))
    )
    sizes = np.asarray(incidence.sum(axis=1)).ravel().astype(np.int64)
    co = sparse.triu(incidence @ incidence.T, k=1).tocoo()
    return sizes, co.row.astype(np.int64), co.col.astype(np.int64), co.data.astype(np.int64)


def strong_edges(
    memberships: pd.DataFrame, field_ids: list[str], min_shared: int, min_overlap: float
) -> list[tuple[str, str]]:
    """Every connected pair (field_a < field_b by position in ``field_ids``) under the block rule."""
    sizes, i, j, shared = membership_overlaps(memberships, field_ids)
    frac = overlap_fraction(min_overlap)
    smaller = np.minimum(sizes[i], sizes[j])
    keep = (shared >= min_shared) & (shared * frac.denominator >= frac.numerator * smaller)
    return [(field_ids[a], field_ids[b]) for a, b in zip(i[keep], j[keep], strict=True)]


def dependency_blocks(memberships: pd.DataFrame, field_ids: list[str], spec: BenchmarkSpec) -> dict[str, str]:
    """field_id -> block_id for every field in ``field_ids``.

    ``memberships`` must already be restricted to the pre-cutoff period (see
    :func:`pre_cutoff`); every row counts toward the sets.
    """
    from scipy import sparse
    from scipy.sparse.csgraph import connected_components

    fields = sorted(set(field_ids))
    index = {f: k for k, f in enumerate(fields)}
    edges = strong_edges(memberships, fields, spec.block_min_shared, spec.block_min_overlap)
    a = np.array([index[x] for x, _ in edges], dtype=np.int64)
    b = np.array([index[y] for _, y in edges], dtype=np.int64)
    graph = sparse.coo_matrix((np.ones(len(a)), (a, b)), shape=(len(fields), len(fields)))
    _, labels = connected_components(graph, directed=False)
    # renumber components by their smallest field (fields are sorted, so first appearance)
    order: dict[int, int] = {}
    for label in labels:
        order.setdefault(int(label), len(order))
    width = max(3, len(str(max(len(order) - 1, 0))))
    return {f: f"B{order[int(labels[k])]:0{width}d}" for f, k in index.items()}


def pre_cutoff(assignments: pd.DataFrame, spec: BenchmarkSpec) -> pd.DataFrame:
    """Membership rows dated before the codebook cutoff (the sets the block rule compares)."""
    cutoff = parse_date(spec.codebook_cutoff).isoformat()
    return assignments.loc[assignments["date"].astype(str) < cutoff, ["field_id", "arxiv_id"]]


def dev_seed_fields(field_ids: list[str], spec: BenchmarkSpec) -> tuple[str, ...]:
    """The spec's seed list, or ``n_dev_seed_fields`` drawn from sorted field ids with ``split_seed``."""
    fields = sorted(set(field_ids))
    if spec.dev_seed_fields:
        missing = sorted(set(spec.dev_seed_fields) - set(fields))
        if missing:
            raise ValueError(f"dev_seed_fields not among the instance's fields: {missing}")
        return tuple(sorted(set(spec.dev_seed_fields)))
    n = min(spec.n_dev_seed_fields, len(fields))
    rng = np.random.default_rng(spec.split_seed)
    chosen = rng.choice(len(fields), size=n, replace=False)
    return tuple(sorted(fields[k] for k in chosen))


def split_table(assignments: pd.DataFrame, field_ids: list[str], spec: BenchmarkSpec) -> pd.DataFrame:
    """The ``blocks.parquet`` table: ``field_id``, ``block_id``, ``split`` (sorted by field_id).

    Blocks come from pre-cutoff memberships; Dev is the closure of the seed fields over blocks.
    """
    block_of = dependency_blocks(pre_cutoff(assignments, spec), field_ids, spec)
    seeds = dev_seed_fields(list(block_of), spec)
    dev_blocks = {block_of[f] for f in seeds}
    fields = sorted(block_of)
    return pd.DataFrame(
        {
            "field_id": pd.Series(fields, dtype=object),
            "block_id": pd.Series([block_of[f] for f in fields], dtype=object),
            "split": pd.Series(
                [(Split.DEV if block_of[f] in dev_blocks else Split.TEST).value for f in fields], dtype=object
            ),
        }
    )
