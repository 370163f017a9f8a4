"""The board's figures (matplotlib, Agg canvas, no pyplot state): the forest plot is the report's
interval plot; the cost-versus-score plot puts each row's Spearman against what one episode cost,
in USD and in tokens, and names the rows whose cost is unknown instead of drawing them at 0."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from rap_benchmark.evaluation.report.plots import SERIES_COLOURS, SERIES_MARKERS, _figure, _save


def plot_cost_vs_score(board: pd.DataFrame, path: str | Path, *, title: str = "") -> Path:
    """Two panels, USD per episode and tokens per episode (symmetric log axes, so a known 0 sits
    at 0), against field-macro Spearman with its 95% block interval; one colour per condition.
    Rows whose cost or tokens are unknown are listed under the panel, not plotted."""
    fig = _figure(11.0, 5.2)
    axes = fig.subplots(1, 2, sharey=True)
    rows = board[board["target"] == "y"] if "target" in board else board
    conditions = sorted(set(rows["condition"].astype(str))) if len(rows) else []
    for ax, column, xlabel in (
        (axes[0], "cost_usd_per_episode", "USD per episode (symlog)"),
        (axes[1], "tokens_per_episode", "input + output tokens per episode (symlog)"),
    ):
        if column == "tokens_per_episode" and len(rows):
            x_all = rows["input_tokens_per_episode"] + rows["output_tokens_per_episode"]
        else:
            x_all = rows[column] if len(rows) else pd.Series(dtype=float)
        unknown: list[str] = []
        for k, cond in enumerate(conditions):
            sel = (rows["condition"] == cond).to_numpy()
            part, x = rows[sel], x_all[sel].to_numpy(float)
            known = np.isfinite(x)
            unknown += [f"{m} {cond}" for m in part["model"][~known]]
            if not known.any():
                continue
            est = part["spearman"].to_numpy(float)[known]
            err = np.vstack(
                [est - part["spearman_lo"].to_numpy(float)[known], part["spearman_hi"].to_numpy(float)[known] - est]
            )
            ax.errorbar(
                x[known],
                est,
                yerr=err,
                fmt=SERIES_MARKERS[k % len(SERIES_MARKERS)],
                color=SERIES_COLOURS[k % len(SERIES_COLOURS)],
                capsize=3,
                label=cond,
            )
            for xi, yi, m in zip(x[known], est, part["model"][known], strict=True):
                ax.annotate(str(m), (xi, yi), textcoords="offset points", xytext=(4, 3), fontsize=7)
        ax.set_xscale("symlog", linthresh=1e-4 if column.startswith("cost") else 1.0)
        ax.set_xlabel(xlabel)
        ax.grid(True, alpha=0.3)
        shown = "; ".join(unknown[:8]) + (f"; +{len(unknown) - 8} more" if len(unknown) > 8 else "")
        ax.set_title(f"unknown (not drawn): {shown}" if unknown else "every row's cost is known", fontsize=8)
    axes[0].set_ylabel("field-macro Spearman (95% block CI)")
    if axes[0].get_legend_handles_labels()[0]:
        axes[0].legend(title="condition", fontsize=8)
    if title:
        fig.suptitle(title)
    if not len(rows):
        axes[0].text(0.5, 0.5, "no scored rows", ha="center", va="center", transform=axes[0].transAxes)
    return _save(fig, path)


def contrast_matrix(contrasts: pd.DataFrame, condition: str, metric: str = "spearman") -> pd.DataFrame:
    """Candidate (rows) minus reference (columns) for one condition: a frame of (estimate, lo, hi,
    excludes_zero) tuples, NaN on the diagonal and where two rows share no cell."""
    part = contrasts[(contrasts["condition"] == condition) & (contrasts["metric"] == metric)]
    models = sorted(set(part["candidate"]) | set(part["reference"]))
    cells = {(r.candidate, r.reference): r for r in part.itertuples(index=False)}
    data = {
        ref: [
            (c.estimate, c.lo, c.hi, bool(c.excludes_zero)) if (c := cells.get((cand, ref))) is not None else None
            for cand in models
        ]
        for ref in models
    }
    return pd.DataFrame(data, index=models)


def finite(value: object) -> bool:
    return isinstance(value, int | float) and math.isfinite(float(value))
