"""Blind and oracle baselines, computed by a sweep that writes every per-task reward.

Each is fitted on train (mean reward) and evaluated on both splits: ``blind_constant`` (one
integer for every paper: the floor), ``category_constant`` (one per primary category, the blind
constant for one absent from train: field base rates) and ``band_oracle`` (one per *true* citation
band: the ceiling of band-level knowledge). The grid is 0..200 plus 300 log-spaced integers up to
100,000; ties go to the smallest constant.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from rap_benchmark.citecast.records import CiteTask, TaskSplit
from rap_benchmark.citecast.reward import rewards
from rap_benchmark.core.fsio import atomic_open, atomic_path, atomic_write_text

CONSTANT_GRID: np.ndarray = np.unique(
    np.concatenate([np.arange(0, 201), np.round(np.geomspace(200, 100_000, 300))]).astype(np.int64)
)
BASELINES: tuple[str, ...] = ("blind_constant", "category_constant", "band_oracle")


def best_constant(targets: np.ndarray, grid: np.ndarray = CONSTANT_GRID) -> tuple[int, float]:
    """The grid constant with the highest mean reward on ``targets`` (smallest on ties)."""
    t = np.asarray(targets, dtype=np.float64)
    if t.size == 0:
        raise ValueError("best_constant needs at least one target")
    means = np.empty(len(grid), dtype=np.float64)
    for i in range(0, len(grid), 256):  # grid x tasks in blocks: memory stays bounded
        block = grid[i : i + 256].astype(np.float64)
        means[i : i + len(block)] = rewards(block[:, None], t[None, :]).mean(axis=1)
    j = int(np.argmax(means))  # first maximum = smallest constant
    return int(grid[j]), float(means[j])


@dataclass(frozen=True)
class SweepResult:
    per_task: pd.DataFrame  # task_id, arxiv_id, split, band, primary_category, target, baseline, prediction, reward
    summary: pd.DataFrame  # baseline, split, n, mean_reward
    fitted: dict[str, object]  # the fitted constants

    def table(self) -> str:
        """The summary as a plain-text table: one row per baseline, one column per split."""
        wide = self.summary.pivot(index="baseline", columns="split", values="mean_reward").reindex(list(BASELINES))
        cols = [c for c in ("train", "test") if c in wide.columns]
        lines = [f"{'baseline':<20}" + "".join(f"{c:>10}" for c in cols)]
        for name, row in wide.iterrows():
            lines.append(f"{name:<20}" + "".join(f"{row[c]:>10.3f}" for c in cols))
        return "\n".join(lines)


def _frame(tasks: Sequence[CiteTask]) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "task_id": [t.task_id for t in tasks],
            "arxiv_id": [t.paper.arxiv_id for t in tasks],
            "split": [t.split.value for t in tasks],
            "band": [t.band for t in tasks],
            "primary_category": [t.paper.primary_category for t in tasks],
            "target": np.array([t.target for t in tasks], dtype=np.int64),
        }
    ).sort_values("task_id", kind="stable", ignore_index=True)


def _per_group(frame: pd.DataFrame, key: str, fallback: int, grid: np.ndarray) -> dict[str, int]:
    train = frame[frame["split"] == TaskSplit.TRAIN.value]
    fits = {str(g): best_constant(sub["target"].to_numpy(), grid)[0] for g, sub in train.groupby(key, sort=True)}
    for g in frame[key].unique():
        fits.setdefault(str(g), fallback)
    return dict(sorted(fits.items()))


def sweep(tasks: Sequence[CiteTask], grid: np.ndarray = CONSTANT_GRID) -> SweepResult:
    """Fit every baseline on train and score every task under each."""
    frame = _frame(tasks)
    train_t = frame.loc[frame["split"] == TaskSplit.TRAIN.value, "target"].to_numpy()
    if train_t.size == 0:
        raise ValueError("the sweep needs train tasks to fit on")
    blind, _ = best_constant(train_t, grid)
    per_cat = _per_group(frame, "primary_category", blind, grid)
    per_band = _per_group(frame, "band", blind, grid)
    preds = {
        "blind_constant": np.full(len(frame), blind, dtype=np.int64),
        "category_constant": frame["primary_category"].map(per_cat).to_numpy(dtype=np.int64),
        "band_oracle": frame["band"].map(per_band).to_numpy(dtype=np.int64),
    }
    parts = []
    for name in BASELINES:
        part = frame.copy()
        part["baseline"] = name
        part["prediction"] = preds[name]
        part["reward"] = rewards(preds[name], frame["target"].to_numpy())
        parts.append(part)
    per_task = pd.concat(parts, ignore_index=True)
    summary = (
        per_task.groupby(["baseline", "split"], sort=False)
        .agg(n=("reward", "size"), mean_reward=("reward", "mean"))
        .reset_index()
    )
    return SweepResult(
        per_task, summary, {"blind_constant": blind, "category_constant": per_cat, "band_oracle": per_band}
    )


def write_sweep(result: SweepResult, out_dir: str | Path) -> list[Path]:
    """Per-task rewards (JSONL and CSV), the summary (CSV) and the fitted constants (JSON)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = [
        out / name for name in ("sweep_rewards.jsonl", "sweep_rewards.csv", "sweep_summary.csv", "sweep_fitted.json")
    ]
    with atomic_open(paths[0]) as fh:
        for row in result.per_task.to_dict(orient="records"):
            fh.write(json.dumps(row, sort_keys=True) + "\n")
    with atomic_path(paths[1]) as tmp:
        result.per_task.to_csv(tmp, index=False, float_format="%.12g")
    with atomic_path(paths[2]) as tmp:
        result.summary.to_csv(tmp, index=False, float_format="%.6f")
    atomic_write_text(paths[3], json.dumps(result.fitted, sort_keys=True, indent=1) + "\n")
    return paths
