"""Scoring benchmark: 40k episode scores and a 10,000-resample block bootstrap.

Measured side by side in one run, on the same synthetic data:

1. the four episode metrics (Spearman, centred cosine, TV, JSD) for 40,000 episodes, vectorised
   (``rap_benchmark.evaluation.scoring.metrics.episode_scores``), against a per-row Python loop (the same
   formulas applied row by row) and against ``scipy.stats.spearmanr`` +
   ``scipy.spatial.distance.jensenshannon`` called per row; the results are checked equal;
2. a 10,000-resample percentile block bootstrap of the field-macro Spearman (~300 fields,
   ~175 dependency blocks), vectorised (``block_bootstrap``), against a loop that draws blocks
   and recomputes the field-macro statistic one resample at a time; the distributions are
   checked equal.

Targets: <= 0.25 s for each vectorised step. The last line printed is one JSON object.

    .venv/bin/python benchmarks/scoring_bench.py            # full run (~30 s on 2 cores)
    .venv/bin/python benchmarks/scoring_bench.py --episodes 4000 --resamples 1000   # quick
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from rap_benchmark.evaluation.scoring.aggregate import field_table
from rap_benchmark.evaluation.scoring.bootstrap import block_bootstrap, resample_statistics
from rap_benchmark.evaluation.scoring.metrics import episode_scores


def _best_of(fn: Callable[[], Any], repeats: int) -> tuple[float, Any]:
    best, out = float("inf"), None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def _once(fn: Callable[[], Any]) -> tuple[float, Any]:
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def synthetic(n_episodes: int, n_fields: int, n_blocks: int, seed: int) -> dict[str, Any]:
    """Forecasts near the truth with ties (rounded percentages), a few uniform and invalid rows."""
    rng = np.random.default_rng(seed)
    y = rng.dirichlet(np.full(8, 0.7), size=n_episodes)
    p = np.abs(y + rng.normal(0, 0.05, y.shape))
    p = np.round(100 * p / p.sum(axis=1, keepdims=True)) + 0.0  # percentages: ties are common
    p[p.sum(axis=1) == 0] = 1.0
    p /= p.sum(axis=1, keepdims=True)
    p[:: max(1, n_episodes // 200)] = 0.125  # uniform valid forecasts score 0
    p[1 :: max(1, n_episodes // 100)] = np.nan  # invalid units
    field_ids = np.array([f"f{i:03d}" for i in rng.integers(0, n_fields, n_episodes)])
    block_of_field = {f"f{i:03d}": f"b{i % n_blocks:03d}" for i in range(n_fields)}
    return {"p": p, "y": y, "field_ids": field_ids, "block_of_field": block_of_field}


# -- per-row comparators ------------------------------------------------------------------------


def _rank(v: np.ndarray) -> np.ndarray:
    order = sorted(range(len(v)), key=lambda i: v[i])
    ranks = np.empty(len(v))
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and v[order[j + 1]] == v[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return ranks


def _corr(a: np.ndarray, b: np.ndarray) -> float:
    ac, bc = a - a.mean(), b - b.mean()
    return float(ac @ bc / np.sqrt((ac @ ac) * (bc @ bc)))


def row_loop_scores(p: np.ndarray, y: np.ndarray) -> dict[str, np.ndarray]:
    """The same four metrics and conventions, one row at a time in Python."""
    n = p.shape[0]
    out = {k: np.full(n, np.nan) for k in ("spearman", "centred_cosine", "tv", "jsd")}
    for i in range(n):
        a, b = p[i], y[i]
        if not (np.isfinite(a).all() and np.isfinite(b).all()):
            continue
        const_a, const_b = a.max() == a.min(), b.max() == b.min()
        out["spearman"][i] = np.nan if const_b else 0.0 if const_a else _corr(_rank(a), _rank(b))
        out["centred_cosine"][i] = np.nan if const_b else 0.0 if const_a else _corr(a, b)
        out["tv"][i] = 0.5 * np.abs(a - b).sum()
        m = 0.5 * (a + b)
        kl_a = sum(a[d] * np.log(a[d] / m[d]) for d in range(8) if a[d] > 0)
        kl_b = sum(b[d] * np.log(b[d] / m[d]) for d in range(8) if b[d] > 0)
        out["jsd"][i] = 0.5 * kl_a + 0.5 * kl_b
    return out


def scipy_row_scores(p: np.ndarray, y: np.ndarray) -> dict[str, np.ndarray]:
    """scipy.stats.spearmanr and scipy.spatial.distance.jensenshannon per row (Spearman, JSD)."""
    from scipy.spatial.distance import jensenshannon
    from scipy.stats import spearmanr

    n = p.shape[0]
    rho, js = np.full(n, np.nan), np.full(n, np.nan)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for i in range(n):
            if not np.isfinite(p[i]).all():
                continue
            rho[i] = 0.0 if p[i].max() == p[i].min() else spearmanr(p[i], y[i]).statistic
            js[i] = jensenshannon(p[i], y[i]) ** 2
    return {"spearman": rho, "jsd": js}


def loop_bootstrap(values: np.ndarray, field_ids: np.ndarray, blocks: dict[str, str], n: int, seed: int) -> np.ndarray:
    """One resample at a time: draw blocks, gather their fields' means, average."""
    table = field_table(values, field_ids)
    keep = table.has_data
    means = dict(zip(table.field_ids[keep].tolist(), table.means[keep].tolist(), strict=True))
    block_ids = sorted({blocks[f] for f in means})
    members = {b: [means[f] for f in sorted(means) if blocks[f] == b] for b in block_ids}
    rng = np.random.default_rng(seed)
    out = np.empty(n)
    for r in range(n):
        drawn = rng.integers(0, len(block_ids), size=len(block_ids))
        vals: list[float] = []
        for k in drawn:
            vals.extend(members[block_ids[k]])
        out[r] = sum(vals) / len(vals)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--episodes", type=int, default=40_000)
    ap.add_argument("--fields", type=int, default=300)
    ap.add_argument("--blocks", type=int, default=175)
    ap.add_argument("--resamples", type=int, default=10_000)
    ap.add_argument("--repeats", type=int, default=7, help="timing repeats of the vectorised steps (best of)")
    ap.add_argument("--seed", type=int, default=20260101)
    args = ap.parse_args(argv)

    data = synthetic(args.episodes, args.fields, args.blocks, args.seed)
    p, y, fids, blocks = data["p"], data["y"], data["field_ids"], data["block_of_field"]

    score_s, vec = _best_of(lambda: episode_scores(p, y), args.repeats)
    print(f"vectorised scoring of {args.episodes} episodes: {score_s:.4f} s", file=sys.stderr)
    loop_s, loop = _once(lambda: row_loop_scores(p, y))
    print(f"per-row Python loop: {loop_s:.3f} s", file=sys.stderr)
    scipy_s, ref = _once(lambda: scipy_row_scores(p, y))
    print(f"scipy per row (spearmanr + jensenshannon): {scipy_s:.3f} s", file=sys.stderr)

    def _maxdiff(a: np.ndarray, b: np.ndarray) -> float:
        same_nan = np.array_equal(np.isnan(a), np.isnan(b))
        return float(np.nanmax(np.abs(a - b))) if same_nan else float("inf")

    diff_loop = max(_maxdiff(vec[k], loop[k]) for k in vec)
    ok = np.isfinite(ref["spearman"]) & np.isfinite(vec["spearman"])
    diff_scipy = max(
        float(np.max(np.abs(vec["spearman"][ok] - ref["spearman"][ok]))),
        float(np.nanmax(np.abs(vec["jsd"] - ref["jsd"]))),
    )

    rho = vec["spearman"]
    boot_s, iv = _best_of(
        lambda: block_bootstrap(rho, fids, blocks, n_resamples=args.resamples, seed=args.seed), args.repeats
    )
    print(f"vectorised block bootstrap ({args.resamples} resamples): {boot_s:.4f} s -> {iv}", file=sys.stderr)
    boot_loop_s, dist_loop = _once(lambda: loop_bootstrap(rho, fids, blocks, args.resamples, args.seed))
    print(f"per-resample Python loop: {boot_loop_s:.3f} s", file=sys.stderr)
    table = field_table(rho, fids)
    keep = table.has_data
    blk = np.array([blocks[f] for f in table.field_ids[keep].tolist()])
    _, inv = np.unique(blk, return_inverse=True)
    dist_vec = resample_statistics(
        np.bincount(inv, weights=table.means[keep]),
        np.bincount(inv).astype(np.float64),
        n_resamples=args.resamples,
        seed=args.seed,
    )
    diff_boot = float(np.max(np.abs(dist_vec - dist_loop)))

    result = {
        "benchmark": "scoring",
        "n_episodes": args.episodes,
        "n_fields": int(keep.sum()),
        "n_blocks": iv.n_units,
        "n_resamples": args.resamples,
        "score_40k_s": round(score_s, 5),
        "row_loop_s": round(loop_s, 4),
        "scipy_per_row_s": round(scipy_s, 4),
        "speedup_vs_row_loop": round(loop_s / score_s, 1),
        "speedup_vs_scipy_per_row": round(scipy_s / score_s, 1),
        "bootstrap_10k_s": round(boot_s, 5),
        "bootstrap_loop_s": round(boot_loop_s, 4),
        "bootstrap_speedup_vs_loop": round(boot_loop_s / boot_s, 1),
        "max_abs_diff_vs_row_loop": diff_loop,
        "max_abs_diff_vs_scipy": diff_scipy,
        "max_abs_diff_bootstrap_vs_loop": diff_boot,
        "target_s": 0.25,
        "score_target_met": score_s <= 0.25,
        "bootstrap_target_met": boot_s <= 0.25,
        "estimate": iv.estimate,
        "interval": [iv.lo, iv.hi],
    }
    print(json.dumps(result))
    return 0 if diff_loop <= 1e-12 and diff_scipy <= 1e-12 and diff_boot <= 1e-12 else 1


if __name__ == "__main__":
    raise SystemExit(main())
