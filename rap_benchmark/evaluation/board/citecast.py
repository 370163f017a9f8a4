"""The CiteCast track of the board: submissions scored as the CiteCast card defines it.

Each accepted submission is scored on its own with the environment's own scorer
(:func:`rap_benchmark.citecast.scoring.score_results`): the reward
r = 1/cosh(2|ln((p+1)/(t+1))|) per Test task, a task without a valid forecast scores 0, and the
score is the mean over every Test task. The card's baselines (:func:`rap_benchmark.citecast.baselines.sweep`:
the blind constant, the per-category constant and the band oracle, each fitted on train) stand
beside them as reference rows, never ranked. The 95% interval of a mean is a percentile bootstrap
over tasks (``field_bootstrap`` with each task its own unit), the same draws for every row. A second submission of a model already on the board is
refused (the earlier one is kept). The targets stay in the instance folder; nothing here writes them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from rap_benchmark.citecast.baselines import sweep
from rap_benchmark.citecast.records import TaskSplit
from rap_benchmark.citecast.scoring import score_results
from rap_benchmark.citecast.sessions import ScoredResult
from rap_benchmark.core.fsio import atomic_write_text
from rap_benchmark.core.spec import BenchmarkSpec, package_version
from rap_benchmark.core.sums import manifest_hash
from rap_benchmark.evaluation.board.display import fmt_cutoff, fmt_tokens, total_usage
from rap_benchmark.evaluation.board.page import render_page, table_rows
from rap_benchmark.evaluation.citecast_submissions import CITECAST, CiteCastReport, validate_citecast_submission
from rap_benchmark.evaluation.report.tables import fmt, interval_cell
from rap_benchmark.evaluation.scoring import BASELINE_PREFIX, field_bootstrap
from rap_benchmark.evaluation.submissions import board_files, moved_report, verdict_rows
from rap_benchmark.evaluation.usage import fmt_cost, fmt_usage, unknown

STEM = "leaderboard_citecast"
REWARD = "1/cosh(2|ln((p+1)/(t+1))|)"
USAGE = ("input_tokens", "output_tokens", "tool_calls", "cost_usd")
BASELINE_KINDS = {
    "blind_constant": "baseline: floor",
    "category_constant": "baseline: base rates",
    "band_oracle": "baseline: ceiling",
}
NOTE = (
    "CiteCast track, scored as the CiteCast card defines it: reward 1/cosh(2|ln((p+1)/(t+1))|) per Test "
    "task, mean over every Test task (a task without a valid forecast scores 0, so leaving a task out "
    "never helps; every submission is ranked). In brackets the 95% percentile bootstrap interval over "
    "tasks. Baselines (the card's, fitted on train) are reference rows, not ranked: the floor is one "
    "constant for every paper, base rates one constant per primary category, and the ceiling (the band "
    "oracle) one constant per true citation band, which it knows. Usage as the submission's metadata "
    "states it, per task (totals in leaderboard_citecast.csv and in the cells' tooltips; unknown is never 0)."
)


def _rank(row: dict[str, Any]) -> str:
    return "" if unknown(row.get("rank")) else str(int(row["rank"]))


TOKENS = "tokens/task (in + out)"
COLUMNS: tuple[tuple[str, Any], ...] = (
    ("rank", _rank),
    ("model", "model"),
    ("kind", "kind"),
    ("forecasts", lambda r: f"{int(r['submitted'])}/{int(r['tasks'])}"),
    ("mean reward [95% CI]", lambda r: interval_cell(r, "mean_reward")),
    ("mean over forecasts", lambda r: fmt(r.get("mean_reward_submitted"))),
    (TOKENS, lambda r: fmt_tokens(r, per="task")),
    ("web calls/task", lambda r: fmt_usage(r.get("tool_calls_per_task"))),
    ("USD/task", lambda r: fmt_cost(r.get("cost_usd_per_task"))),
    ("cutoff", fmt_cutoff),
)
"""(header, board column or function of a row): the CiteCast board for people (markdown and page).
The totals stay in ``leaderboard_citecast.csv`` (and, on the page, in the per-task cells'
tooltips), so the table fits a 1400 px page, as the retrospective board's does."""
SORT_KEY: dict[str, Any] = {
    "rank": "rank",
    "forecasts": "submitted",
    "mean reward [95% CI]": "mean_reward",
    "mean over forecasts": "mean_reward_submitted",
    TOKENS: lambda row: row.get("input_tokens_per_task", np.nan) + row.get("output_tokens_per_task", np.nan),
    "web calls/task": "tool_calls_per_task",
    "USD/task": "cost_usd_per_task",
}
"""Header -> the raw board column (or function of a raw row) its cells sort by."""
USAGE_HEADERS = (TOKENS, "web calls/task", "USD/task")


@dataclass(frozen=True)
class CiteCastBoard:
    """The scored CiteCast track: every verdict, one row per submission and baseline, and what it
    was scored against (``meta``)."""

    reports: tuple[CiteCastReport, ...]
    board: pd.DataFrame
    meta: dict[str, Any]

    def relocated(self, built: Path, final: Path) -> CiteCastBoard:
        """This result with the submissions read from inside ``built`` named by their place in ``final``."""
        return replace(self, reports=tuple(moved_report(r, built, final) for r in self.reports))


def _row(
    model: str,
    kind: str,
    tasks: list[str],
    rewards: np.ndarray,
    submitted: np.ndarray,
    usage: dict[str, Any],
    boot: tuple[int, int],
) -> dict[str, Any]:
    # each task its own resampling unit (a field of one cell): the plain mean and its percentile interval
    interval = field_bootstrap(rewards, np.asarray(tasks), n_resamples=boot[0], seed=boot[1])
    lo, hi = interval.lo, interval.hi
    row = {
        "model": model,
        "kind": kind,
        "tasks": len(rewards),
        "submitted": int(submitted.sum()),
        "mean_reward": float(rewards.mean()),
        "mean_reward_lo": lo,
        "mean_reward_hi": hi,
        "mean_reward_submitted": float(rewards[submitted].mean()) if submitted.any() else np.nan,
    }
    for key in USAGE:
        value = usage.get(key)
        row[key] = np.nan if value is None else float(value)
        row[f"{key}_per_task"] = row[key] / len(rewards)
    return row


def _submission_row(report: CiteCastReport, inst: Any, boot: tuple[int, int]) -> dict[str, Any]:
    assert report.meta is not None
    model = report.meta.model
    results = [ScoredResult(model, t, "", 0.0, p, None, None) for t, p in report.predictions.items()]
    scored = score_results(inst.tasks, results, key=model)
    rewards = np.array([r["reward"] for r in scored.rows], dtype=np.float64)
    submitted = np.array([r["prediction"] is not None for r in scored.rows], dtype=bool)
    tasks = [r["task_id"] for r in scored.rows]
    row = _row(model, "submission", tasks, rewards, submitted, report.meta.usage or {}, boot)
    cutoff = report.meta.knowledge_cutoff
    return {**row, "knowledge_cutoff": cutoff.isoformat() if cutoff else None, "submission": report.path.name}


def _baseline_rows(inst: Any, boot: tuple[int, int]) -> list[dict[str, Any]]:
    per_task = sweep(list(inst.tasks.values())).per_task
    test = per_task[per_task["split"] == TaskSplit.TEST.value].sort_values(["baseline", "task_id"], kind="stable")
    rows = []
    for name, kind in BASELINE_KINDS.items():
        part = test[test["baseline"] == name]
        rewards = part["reward"].to_numpy(np.float64)
        every = np.ones(len(rewards), bool)
        no_calls = dict.fromkeys(USAGE, 0)
        rows.append(_row(f"{BASELINE_PREFIX}{name}", kind, list(part["task_id"]), rewards, every, no_calls, boot))
    return rows


def board_meta(inst: Any, n_resamples: int, seed: int) -> dict[str, Any]:
    """What a CiteCast board was scored against, as its files and card state it."""
    info = inst.manifest
    return {
        "track": CITECAST,
        "instance": f"citecast-{info.get('provenance', {}).get('instance', 'unknown')}",
        "benchmark_version": info.get("citecast_version"),  # the instance's: what its scores mean
        "manifest_hash": manifest_hash(inst.root),
        "split": TaskSplit.TEST.value,
        "n_tasks": sum(t.split is TaskSplit.TEST for t in inst.tasks.values()),
        "reward": REWARD,
        "n_resamples": n_resamples,
        "seed": seed,
        "package_version": package_version(),  # the rap_benchmark package that scored it
    }


def score_citecast_submissions(
    paths: Iterable[str | Path], inst: Any, *, n_resamples: int | None = None, seed: int | None = None
) -> CiteCastBoard:
    """Validate and score each CiteCast submission on its own (``paths`` read once, in order);
    the board holds the accepted ones, ranked by mean reward, and the card's baselines."""
    spec = BenchmarkSpec()
    boot = (int(n_resamples or spec.bootstrap_resamples), int(spec.bootstrap_seed if seed is None else seed))
    reports, rows, owners = [], [], {}
    for p in paths:
        rep = validate_citecast_submission(p, inst)
        if rep.accepted and rep.meta is not None and rep.meta.model in owners:
            clash = f"[fatal] already submitted: {rep.meta.model} (in {owners[rep.meta.model]}); the earlier is kept"
            rep = replace(rep, meta=None, problems=(*rep.problems, clash))
        if rep.accepted and rep.meta is not None:
            rows.append(_submission_row(rep, inst, boot))
            owners[rep.meta.model] = rep.path.name
        reports.append(rep)
    board = pd.DataFrame(rows + _baseline_rows(inst, boot))
    ranked = board["kind"] == "submission"
    board["rank"] = board["mean_reward"].where(ranked).rank(ascending=False, method="min").astype("Int64")
    board = board.sort_values(["mean_reward", "model"], ascending=[False, True], kind="stable", ignore_index=True)
    board.insert(0, "track", CITECAST)
    board.insert(1, "split", TaskSplit.TEST.value)
    front = ["track", "split", "rank", "model", "kind"]
    board = board[front + [c for c in board.columns if c not in front]]
    return CiteCastBoard(tuple(reports), board, board_meta(inst, *boot))


def citecast_board_files(result: CiteCastBoard, folder: Path, *, page: bool = True) -> None:
    """Write the CiteCast board's files into ``folder`` (a ``building_board`` folder):
    ``leaderboard_citecast.csv`` and ``.md``, ``submissions.json`` (every verdict and problem),
    ``board.json`` and, with ``page``, the self-contained ``index.html``."""
    verdicts = verdict_rows(result.reports)
    title = f"CiteCast leaderboard: {result.meta['instance']}"
    board_files(
        folder,
        result.board,
        verdicts,
        stem=STEM,
        verdicts_name="submissions",
        meta=result.meta,
        note=NOTE,
        title=title,
        page=False,
        columns=COLUMNS,
    )
    if page:
        table = table_rows(
            result.board,
            COLUMNS,
            sort_keys=SORT_KEY,
            usage_headers=USAGE_HEADERS,
            usage_totals=lambda row: total_usage(row, calls=("tool_calls", "web calls")),
        )
        html = render_page(table, title=title, meta=result.meta, verdicts=verdicts, note=NOTE)
        atomic_write_text(folder / "index.html", html)
