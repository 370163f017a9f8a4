"""Split-half reliability and the ceiling (the paper's reliability ceiling)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from rap_benchmark.core.artifacts import Instance
from rap_benchmark.core.records import DIRECTION_KEYS
from rap_benchmark.core.spec import BenchmarkSpec
from rap_benchmark.evaluation.scoring.reliability import _Splitter, reliability, spearman_brown

ORIGINS = ("2024-01-01", "2024-07-01", "2025-01-01", "2025-07-01")


def _instance(n_fields: int, papers_per_window: int, *, seed: int, drift: float = 0.0) -> Instance:
    """Fields whose direction shares are fixed (or drift strongly); papers drawn from them."""
    rng = np.random.default_rng(seed)
    spec = BenchmarkSpec().replace(name="test", origins=ORIGINS, date_start="2022-06-01")
    rows, eps = [], []
    for f in range(n_fields):
        fid = f"f{f:02d}"
        base = np.sort(rng.dirichlet(np.full(8, 2.0)))[::-1]
        direction_trend = rng.normal(0, 1, 8)
        for k, origin in enumerate(ORIGINS):
            share = np.exp(np.log(base) + drift * k * direction_trend)
            share /= share.sum()
            year, month = int(origin[:4]), int(origin[5:7])
            labels = rng.choice(8, size=papers_per_window, p=share)
            for i, d in enumerate(labels):
                day = f"{year}-{month + (i % 6):02d}-{1 + i % 28:02d}"
                kind = "boundary" if i % 5 == 0 else "single"
                rows.append(
                    {
                        "arxiv_id": f"{fid}.{origin}.{i}",
                        "field_id": fid,
                        "date": day,
                        "primary": DIRECTION_KEYS[d],
                        "secondary": DIRECTION_KEYS[(d + 1) % 8] if kind == "boundary" else None,
                        "type": kind,
                    }
                )
            # an uncounted paper in every window: never split
            rows.append(
                {"arxiv_id": f"{fid}.{origin}.x", "field_id": fid, "date": origin,
                 "primary": "other", "secondary": None, "type": "other"}
            )  # fmt: skip
            eps.append({"field_id": fid, "origin": origin, "policy": "canonical", "split": "dev" if f < 2 else "test"})
    assignments = pd.DataFrame(rows)
    episodes = pd.DataFrame(eps)
    blocks = episodes[["field_id", "split"]].drop_duplicates().assign(block_id=lambda d: d["field_id"])
    return Instance(
        root=Path("."),
        spec=spec,
        ledger={},
        papers=pd.DataFrame(),
        codebooks={},
        assignments=assignments,
        blocks=blocks,
        episodes=episodes,
        search_manifest=pd.DataFrame(),
        manifest_hash="",
    )


def test_spearman_brown() -> None:
    np.testing.assert_allclose(spearman_brown(np.array([0.0, 0.5, 1.0, -0.5])), [0.0, 2 / 3, 1.0, -2.0])
    assert np.isnan(spearman_brown(np.array([-1.0]))[0])


def split_halves(groups, weights, n_groups: int, rng: np.random.Generator) -> np.ndarray:
    """One random split of every group's papers: counts of shape (n_groups, 2, 8).

    ``groups[i]`` is paper i's group (episode) and ``weights[i]`` its direction mass; each paper
    gets a uniform key from ``rng`` (in input order) and the floor(n/2) papers of a group of n with
    the smallest keys form half 0.
    """
    return _Splitter(groups, weights, n_groups).draw(rng)


def test_split_halves_against_explicit_loop() -> None:
    rng = np.random.default_rng(0)
    groups = rng.integers(0, 7, size=200)
    weights = np.zeros((200, 8))
    weights[np.arange(200), rng.integers(0, 8, 200)] = 1.0
    weights[::3] *= 0.5
    weights[::3, 0] += 0.5
    fast = split_halves(groups, weights, 8, np.random.default_rng(42))
    keys = np.random.default_rng(42).random(200)
    slow = np.zeros((8, 2, 8))
    for g in range(8):
        members = np.flatnonzero(groups == g)
        members = members[np.argsort(keys[members], kind="stable")]
        first = members[: members.size // 2]
        second = members[members.size // 2 :]
        slow[g, 0] = weights[first].sum(axis=0)
        slow[g, 1] = weights[second].sum(axis=0)
    np.testing.assert_allclose(fast, slow, atol=1e-12)
    # every paper lands in exactly one half
    np.testing.assert_allclose(fast.sum(axis=1), np.stack([weights[groups == g].sum(axis=0) for g in range(8)]))


def test_reliability_grows_with_sample_size_and_is_seeded() -> None:
    small = reliability(_instance(6, 30, seed=1), n_splits=30, seed=3, progress=False)
    large = reliability(_instance(6, 2000, seed=1), n_splits=30, seed=3, progress=False)
    again = reliability(_instance(6, 2000, seed=1), n_splits=30, seed=3, progress=False)
    other = reliability(_instance(6, 2000, seed=1), n_splits=30, seed=4, progress=False)
    assert 0 < small.level < large.level <= 1
    assert large.level > 0.9
    assert large.ceiling == pytest.approx(np.sqrt(large.level))
    assert again.level == large.level
    assert other.level != large.level
    assert large.n_episodes == 6 * len(ORIGINS)
    assert (large.episodes["n_papers"] == 2000).all()  # the uncounted paper is not split
    assert large.level_half < large.level  # Spearman-Brown raises a positive half correlation


def test_level_matches_direct_formula_on_one_split() -> None:
    inst = _instance(3, 200, seed=5)
    res = reliability(inst, n_splits=1, seed=9, progress=False, horizons=())
    # recompute from the episode table: mean of Spearman-Brown of each episode's split-half r
    np.testing.assert_allclose(res.episodes["r_full"], spearman_brown(res.episodes["r_half"].to_numpy()))
    assert res.level == pytest.approx(res.episodes["r_full"].mean())


def test_change_reliability_detects_real_change() -> None:
    stable = reliability(_instance(8, 600, seed=2, drift=0.0), n_splits=20, seed=1, progress=False)
    moving = reliability(_instance(8, 600, seed=2, drift=0.6), n_splits=20, seed=1, progress=False)
    assert set(stable.changes) == {6, 12, 18}
    assert stable.changes_n[6] == 8 * 3 and stable.changes_n[12] == 8 * 2 and stable.changes_n[18] == 8
    # with no real change the realised change is sampling noise, and the two halves of one window
    # deviate in opposite directions (they partition it): no positive change reliability
    assert stable.changes[6] < 0 and stable.changes_half[6] < 0
    assert moving.changes[6] > 0.7 and moving.changes[18] > moving.changes[6] - 0.1


def test_split_filter_and_policy() -> None:
    inst = _instance(5, 300, seed=7)
    dev = reliability(inst, split="dev", n_splits=5, seed=1, progress=False, horizons=())
    assert set(dev.episodes["field_id"]) == {"f00", "f01"}
    single = reliability(inst, policy="single_only", n_splits=5, seed=1, progress=False, horizons=())
    assert (single.episodes["n_papers"] == 240).all()  # boundary papers do not count under single_only
