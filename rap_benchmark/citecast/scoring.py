"""Score an evaluation run after the fact: the scored sessions a store recorded, against the targets.

Every Test task counts for every API key; a task without a submitted prediction scores 0, so
abandoning a hard task never helps.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from rap_benchmark.citecast.records import CiteTask, TaskSplit
from rap_benchmark.citecast.reward import rewards
from rap_benchmark.citecast.sessions import ScoredResult


@dataclass(frozen=True)
class ScoreReport:
    rows: list[dict[str, Any]]  # one per (key, Test task), sorted
    summary: dict[str, dict[str, Any]]  # per key

    def table(self) -> str:
        lines = [f"{'key':<20}{'tasks':>7}{'started':>9}{'submitted':>11}{'mean reward':>13}{'(submitted)':>13}"]
        for key, s in self.summary.items():
            lines.append(
                f"{key:<20}{s['n_tasks']:>7}{s['n_started']:>9}{s['n_submitted']:>11}"
                f"{s['mean_reward']:>13.4f}{s['mean_reward_submitted']:>13.4f}"
            )
        return "\n".join(lines)


def score_results(
    tasks: Mapping[str, CiteTask], results: Iterable[ScoredResult], *, key: str | None = None
) -> ScoreReport:
    test_ids = sorted(t for t, task in tasks.items() if task.split is TaskSplit.TEST)
    by_key: dict[str, dict[str, ScoredResult]] = {}
    for r in results:
        if (key is None or r.key == key) and r.task_id in tasks:
            by_key.setdefault(r.key, {})[r.task_id] = r
    if key is not None:
        by_key.setdefault(key, {})
    rows: list[dict[str, Any]] = []
    summary: dict[str, dict[str, Any]] = {}
    targets = np.array([tasks[t].target for t in test_ids], dtype=np.float64)
    for name in sorted(by_key):
        got = by_key[name]
        pred = np.array(
            [np.nan if got.get(t) is None or got[t].prediction is None else got[t].prediction for t in test_ids],
            dtype=np.float64,
        )
        submitted = ~np.isnan(pred)
        r = np.where(submitted, rewards(np.nan_to_num(pred), targets), 0.0)
        for i, t in enumerate(test_ids):
            res = got.get(t)
            rows.append(
                {
                    "key": name,
                    "task_id": t,
                    "session_id": None if res is None else res.session_id,
                    "prediction": None if not submitted[i] else int(pred[i]),
                    "reward": float(r[i]),
                }
            )
        summary[name] = {
            "n_tasks": len(test_ids),
            "n_started": len(got),
            "n_submitted": int(submitted.sum()),
            "mean_reward": float(r.mean()) if len(r) else float("nan"),
            "mean_reward_submitted": float(r[submitted].mean()) if submitted.any() else float("nan"),
        }
    return ScoreReport(rows, summary)
