"""Field-macro aggregation, block bootstrap and paired contrasts (the paper's uncertainty intervals)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rap_benchmark.evaluation.scoring.aggregate import field_macro, field_table
from rap_benchmark.evaluation.scoring.bootstrap import (
    block_bootstrap,
    draw_weights,
    field_bootstrap,
    match_cells,
    paired_contrast,
    resample_statistics,
)


def field_means(values, field_ids) -> dict[str, float]:
    """Each field's mean over its finite episode values (fields without any are omitted)."""
    table = field_table(values, field_ids)
    keep = table.has_data
    return dict(zip(table.field_ids[keep].tolist(), table.means[keep].tolist(), strict=True))


def _panel(n_fields: int = 60, n_origins: int = 5, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict]:
    rng = np.random.default_rng(seed)
    fields = np.repeat([f"f{i:03d}" for i in range(n_fields)], n_origins)
    origins = np.tile([f"202{4 + k // 2}-0{1 + 6 * (k % 2)}-01" for k in range(n_origins)], n_fields)
    effect = np.repeat(rng.normal(0.6, 0.1, n_fields), n_origins)
    values = effect + rng.normal(0, 0.05, fields.size)
    blocks = {f"f{i:03d}": f"b{i // 3:03d}" for i in range(n_fields)}
    return values, fields, origins, blocks


def test_field_macro_matches_pandas() -> None:
    values, fields, _, _ = _panel()
    values[::7] = np.nan
    values[:5] = np.nan  # field f000 has no finite value: left out
    ref = pd.Series(values).groupby(fields).mean().dropna().mean()
    assert field_macro(values, fields) == pytest.approx(ref, abs=1e-15)
    means = field_means(values, fields)
    assert "f000" not in means and len(means) == 59


def test_field_macro_weights_fields_not_episodes() -> None:
    values = np.array([1.0, 1.0, 1.0, 1.0, 0.0])
    fields = np.array(["a", "a", "a", "a", "b"])
    assert field_macro(values, fields) == 0.5
    assert np.isnan(field_macro([np.nan], ["a"]))


def test_block_bootstrap_is_seeded_and_covers_estimate() -> None:
    values, fields, _, blocks = _panel()
    a = block_bootstrap(values, fields, blocks, n_resamples=2000, seed=11)
    b = block_bootstrap(values, fields, blocks, n_resamples=2000, seed=11)
    c = block_bootstrap(values, fields, blocks, n_resamples=2000, seed=12)
    assert a == b
    assert (a.lo, a.hi) != (c.lo, c.hi)
    assert a.lo < a.estimate < a.hi
    assert a.estimate == pytest.approx(field_macro(values, fields))
    assert a.n_units == 20 and a.n_fields == 60 and a.n_cells == values.size
    assert a.unit == "block" and a.seed == 11 and a.n_resamples == 2000


def test_resample_statistics_against_explicit_loop() -> None:
    """The bincount/matmul path equals drawing blocks one by one and recomputing the macro."""
    values, fields, _, blocks = _panel(n_fields=30, seed=2)
    means = pd.Series(values).groupby(fields).mean()
    block_ids = sorted(set(blocks.values()))
    sums = np.array([sum(means[f] for f in means.index if blocks[f] == b) for b in block_ids])
    counts = np.array([sum(1 for f in means.index if blocks[f] == b) for b in block_ids], dtype=float)
    fast = resample_statistics(sums, counts, n_resamples=300, seed=5)
    rng = np.random.default_rng(5)
    slow = []
    for _ in range(300):
        drawn = rng.integers(0, len(block_ids), size=len(block_ids))
        field_values = [means[f] for k in drawn for f in means.index if blocks[f] == block_ids[k]]
        slow.append(np.mean(field_values))
    np.testing.assert_allclose(fast, slow, rtol=0, atol=1e-12)


@pytest.mark.parametrize(("n_units", "n_resamples"), [(7, 5000), (4500, 1000)])
def test_draws_are_the_same_whether_kept_or_drawn_anew(n_units: int, n_resamples: int, monkeypatch) -> None:
    """The draws kept for reuse (small: 7 units) and those drawn anew each time (over the cap)
    equal row-wise bincounts of the seeded generator, chunk for chunk; kept ones are read-only."""
    import rap_benchmark.evaluation.scoring.bootstrap as bootstrap

    monkeypatch.setattr(bootstrap, "_CACHED_BYTES", 1 << 20)  # 7 x 5000 is kept, 4500 x 1000 is not
    rng = np.random.default_rng(9)
    want = []
    for start in range(0, n_resamples, 2048):
        draws = rng.integers(0, n_units, size=(min(2048, n_resamples - start), n_units))
        want.append(np.stack([np.bincount(row, minlength=n_units) for row in draws]).astype(np.float64))
    first, second = list(draw_weights(n_units, n_resamples, 9)), list(draw_weights(n_units, n_resamples, 9))
    kept = n_units * n_resamples * 8 <= 1 << 20
    assert len(first) == len(second) == len(want) == -(-n_resamples // 2048)
    for a, b, w in zip(first, second, want, strict=True):
        np.testing.assert_array_equal(a, w)
        np.testing.assert_array_equal(b, w)
        assert (a is b) == kept and a.flags.writeable == (not kept)
    if kept:
        with pytest.raises(ValueError, match="read-only"):
            first[0][0, 0] = 5.0


def test_block_interval_wider_than_field_interval_under_block_correlation() -> None:
    """Fields within a block share their effect: resampling fields understates uncertainty."""
    rng = np.random.default_rng(9)
    n_blocks, per_block = 40, 5
    block_effect = np.repeat(rng.normal(0, 0.2, n_blocks), per_block)
    fields = np.array([f"f{i}" for i in range(n_blocks * per_block)])
    blocks = {f: f"b{i // per_block}" for i, f in enumerate(fields)}
    values = block_effect + rng.normal(0, 0.01, fields.size)
    blk = block_bootstrap(values, fields, blocks, n_resamples=4000, seed=1)
    fld = field_bootstrap(values, fields, n_resamples=4000, seed=1)
    assert blk.estimate == fld.estimate
    assert (blk.hi - blk.lo) > 1.5 * (fld.hi - fld.lo)
    assert fld.unit == "field" and fld.n_units == fields.size


def test_unknown_block_is_an_error() -> None:
    with pytest.raises(KeyError, match="without a dependency block"):
        block_bootstrap([0.1, 0.2], ["a", "b"], {"a": "x"}, n_resamples=10, seed=0)


def test_paired_contrast_differences_matched_cells_first() -> None:
    values, fields, origins, blocks = _panel()
    better = values + 0.05
    better[::4] = np.nan  # invalid units drop their cell from the contrast
    # b is given in a different order and lacks some cells
    order = np.random.default_rng(0).permutation(values.size)[:-10]
    res = paired_contrast(
        better, fields, origins, values[order], fields[order], origins[order],
        block_of_field=blocks, n_resamples=2000, seed=3,
    )  # fmt: skip
    assert res.estimate == pytest.approx(0.05, abs=1e-12)
    assert res.lo == pytest.approx(0.05, abs=1e-12) and res.hi == pytest.approx(0.05, abs=1e-12)
    ia, ib = match_cells(fields, origins, fields[order], origins[order])
    assert ia.size == values.size - 10
    assert res.n_cells == int(np.isfinite(better[ia]).sum())


def test_paired_contrast_rejects_duplicate_cells() -> None:
    with pytest.raises(ValueError, match="duplicate"):
        match_cells(["a", "a"], ["2024-01-01", "2024-01-01"], ["a"], ["2024-01-01"])


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(2, 25))
def test_interval_is_ordered_and_within_range(seed: int, n_fields: int) -> None:
    rng = np.random.default_rng(seed)
    values = rng.normal(size=n_fields * 2)
    fields = np.repeat([f"f{i}" for i in range(n_fields)], 2)
    blocks = {f"f{i}": f"b{i % 4}" for i in range(n_fields)}
    iv = block_bootstrap(values, fields, blocks, n_resamples=200, seed=seed)
    field_vals = np.array(list(field_means(values, fields).values()))
    assert field_vals.min() - 1e-12 <= iv.lo <= iv.hi <= field_vals.max() + 1e-12
