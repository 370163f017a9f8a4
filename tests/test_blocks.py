"""Dependency blocks and the Dev/Test split (the paper's dependency blocks), with property tests for the block rule."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rap_benchmark.core.records import Block, Split
from rap_benchmark.core.spec import BenchmarkSpec
from rap_benchmark.pipeline.blocks import (
    dependency_blocks,
    dev_seed_fields,
    overlap_fraction,
    split_table,
    strong_edges,
)

SPEC = BenchmarkSpec()  # >= 10 shared papers and overlap coefficient >= 0.60


def _memberships(sets: dict[str, set[str]], date: str = "2023-01-01") -> pd.DataFrame:
    rows = [(f, p, date) for f, papers in sets.items() for p in sorted(papers)]
    return pd.DataFrame(rows, columns=["field_id", "arxiv_id", "date"])


def _pair(size_a: int, size_b: int, shared: int) -> dict[str, set[str]]:
    a = {f"s{i}" for i in range(shared)} | {f"a{i}" for i in range(size_a - shared)}
    b = {f"s{i}" for i in range(shared)} | {f"b{i}" for i in range(size_b - shared)}
    return {"fa": a, "fb": b}


def _connected(sets: dict[str, set[str]], spec: BenchmarkSpec = SPEC) -> bool:
    return bool(strong_edges(_memberships(sets), ["fa", "fb"], spec.block_min_shared, spec.block_min_overlap))


def test_exactly_the_threshold_connects():
    assert _connected(_pair(20, 50, 12))  # 12 / 20 = 0.60 exactly
    assert not _connected(_pair(20, 50, 11))  # 0.55
    assert _connected(_pair(35, 35, 21))  # 21 / 35 = 0.60


def test_threshold_compared_exactly_not_in_floats():
    """Regression: 0.55 * 100 is 55.00000000000001 in floats, which would reject 55/100 = 0.55."""
    spec = SPEC.replace(block_min_overlap=0.55)
    assert _connected(_pair(100, 100, 55), spec)
    assert not _connected(_pair(100, 100, 54), spec)


def test_ten_paper_minimum():
    assert not _connected(_pair(9, 9, 9))  # overlap 1.0 but only 9 shared
    assert _connected(_pair(10, 10, 10))
    assert not _connected(_pair(10, 400, 9))


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 60), st.integers(1, 60), st.data())
def test_block_rule_property(size_a: int, size_b: int, data):
    shared = data.draw(st.integers(0, min(size_a, size_b)))
    expected = shared >= 10 and Fraction(shared, min(size_a, size_b)) >= Fraction(3, 5)
    assert _connected(_pair(size_a, size_b, shared)) == expected


@settings(max_examples=100, deadline=None)
@given(st.integers(10, 200), st.integers(10, 200))
def test_overlap_boundary_property(small: int, extra: int):
    """At every size, shared = ceil(0.6 * min) connects and one fewer does not."""
    big = small + extra
    need = max(10, -(-3 * small // 5))
    if need <= small:
        assert _connected(_pair(small, big, need))
    assert not _connected(_pair(small, big, need - 1))


def test_overlap_fraction_reads_the_decimal():
    assert overlap_fraction(0.60) == Fraction(3, 5)
    assert overlap_fraction(0.5) == Fraction(1, 2)


def _union_find_blocks(fields: list[str], edges: list[tuple[str, str]]) -> list[frozenset[str]]:
    parent = {f: f for f in fields}

    def root(f: str) -> str:
        while parent[f] != f:
            f = parent[f]
        return f

    for a, b in edges:
        parent[root(a)] = root(b)
    groups: dict[str, set[str]] = {}
    for f in fields:
        groups.setdefault(root(f), set()).add(f)
    return sorted((frozenset(g) for g in groups.values()), key=min)


_SETS = st.dictionaries(
    st.sampled_from([f"f{i:02d}" for i in range(9)]),
    st.sets(st.integers(0, 40), max_size=40),
    min_size=1,
)


@settings(max_examples=80, deadline=None)
@given(_SETS, st.integers(0, 2**31 - 1))
def test_blocks_are_components_of_strong_edges(sets, seed):
    spec = SPEC.replace(block_min_shared=3, block_min_overlap=0.5)
    named = {f: {f"p{i}" for i in s} for f, s in sets.items()}
    fields = sorted(named)
    frame = _memberships(named).sample(frac=1.0, random_state=seed % 1000)  # input order must not matter
    block_of = dependency_blocks(frame, fields, spec)
    # oracle: pairwise rule by hand + union-find
    edges = []
    for i, a in enumerate(fields):
        for b in fields[i + 1 :]:
            k = len(named[a] & named[b])
            small = min(len(named[a]), len(named[b]))
            if k >= 3 and small and Fraction(k, small) >= Fraction(1, 2):
                edges.append((a, b))
    expected = _union_find_blocks(fields, edges)
    got: dict[str, set[str]] = {}
    for f, b in block_of.items():
        got.setdefault(b, set()).add(f)
    assert sorted((frozenset(g) for g in got.values()), key=min) == expected
    # ids numbered in order of each block's smallest field
    ordered = [block_of[min(g)] for g in expected]
    assert ordered == [f"B{i:03d}" for i in range(len(expected))]


def test_only_pre_cutoff_memberships_connect():
    pre = _memberships(_pair(20, 20, 5))
    post = _memberships(_pair(20, 20, 20), date="2024-03-01")
    post["arxiv_id"] = "late-" + post["arxiv_id"]
    table = split_table(pd.concat([pre, post]), ["fa", "fb"], SPEC.replace(n_dev_seed_fields=1))
    assert table["block_id"].nunique() == 2  # the post-2024 overlap does not count
    both_pre = _memberships(_pair(20, 20, 15))
    table = split_table(both_pre, ["fa", "fb"], SPEC.replace(n_dev_seed_fields=1))
    assert table["block_id"].nunique() == 1


@settings(max_examples=60, deadline=None)
@given(_SETS, st.integers(0, 5), st.integers(0, 2**32 - 1))
def test_split_closure_never_splits_a_block(sets, n_seeds, split_seed):
    spec = SPEC.replace(block_min_shared=3, block_min_overlap=0.5, n_dev_seed_fields=n_seeds, split_seed=split_seed)
    named = {f: {f"p{i}" for i in s} for f, s in sets.items()}
    fields = sorted(named)
    table = split_table(_memberships(named), fields, spec)
    assert table["field_id"].tolist() == fields
    assert (table.groupby("block_id")["split"].nunique() == 1).all()
    seeds = dev_seed_fields(fields, spec)
    assert len(seeds) == min(n_seeds, len(fields))
    dev = set(table.loc[table["split"] == "dev", "field_id"])
    assert set(seeds) <= dev
    dev_blocks = set(table.loc[table["field_id"].isin(seeds), "block_id"])
    assert dev == set(table.loc[table["block_id"].isin(dev_blocks), "field_id"])  # closure, nothing more
    blocks = blocks_from_table(table)
    assert sorted(f for b in blocks for f in b.field_ids) == fields


def test_seed_list_from_spec_and_unknown_seed():
    fields = ["a", "b", "c"]
    assert dev_seed_fields(fields, SPEC.replace(dev_seed_fields=("c", "a"))) == ("a", "c")
    with pytest.raises(ValueError, match="not among"):
        dev_seed_fields(fields, SPEC.replace(dev_seed_fields=("z",)))


def test_seed_draw_depends_only_on_split_seed():
    fields = [f"f{i:03d}" for i in range(50)]
    spec = SPEC.replace(n_dev_seed_fields=7, split_seed=11)
    assert dev_seed_fields(fields, spec) == dev_seed_fields(list(reversed(fields)), spec)
    rng = np.random.default_rng(11)
    assert dev_seed_fields(fields, spec) == tuple(sorted(fields[k] for k in rng.choice(50, 7, replace=False)))


def blocks_from_table(table: pd.DataFrame) -> list[Block]:
    """``blocks.parquet`` rows -> one frozen Block per block id (sorted)."""
    out = []
    for block_id, group in table.sort_values(["block_id", "field_id"]).groupby("block_id", sort=True):
        splits = set(group["split"])
        if len(splits) != 1:
            raise ValueError(f"block {block_id} is split across {sorted(splits)}")
        out.append(Block(str(block_id), tuple(group["field_id"].astype(str)), Split(splits.pop())))
    return out
