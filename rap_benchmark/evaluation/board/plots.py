"""The board's figures (matplotlib, Agg canvas, no pyplot state): the forest plot is the report's
interval plot; the cost-versus-score plot puts each row's Spearman against what one episode cost,
in USD and in tokens, on axes from 0, and draws the rows whose cost is unknown apart, never at 0."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from rap_benchmark.evaluation.report.plots import SERIES_COLOURS, SERIES_MARKERS, _figure, _save

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure
    from matplotlib.text import Text


COST_PANELS: tuple[tuple[str, str], ...] = (
    ("cost_usd_per_episode", "USD per episode"),
    ("tokens_per_episode", "input + output tokens per episode"),
)
"""(board column, axis label) of each panel of the cost-versus-score figure."""

LABEL_STEP = 0.02
"""How far a point's name moves per try (a fraction of the axes' height) to clear another name
(down first, so names keep their points' order)."""
LABEL_TRIES = 30
"""Tries each way, up and down, before a name stays where it collides."""


def _usage_x(rows: pd.DataFrame, column: str) -> np.ndarray:
    """A panel's x per row (NaN: unknown); tokens are input + output, unknown if either is."""
    if not len(rows):
        return np.zeros(0)
    if column == "tokens_per_episode":
        return (rows["input_tokens_per_episode"] + rows["output_tokens_per_episode"]).to_numpy(float)
    return rows[column].to_numpy(float)


def _text_box(ann: Any, renderer: Any) -> Any:
    """Where an annotation's text (not its leader line) is drawn, in display units, padded 1 px."""
    from matplotlib.text import Text

    ann.update_positions(renderer)
    return Text.get_window_extent(ann, renderer).padded(1.0)


def _inside(box: Any, frame: Any) -> bool:
    return box.x0 >= frame.x0 and box.x1 <= frame.x1 and box.y0 >= frame.y0 and box.y1 <= frame.y1


def stack(targets: Sequence[float], gap: float) -> np.ndarray:
    """Heights as near ``targets`` as they can be while at least ``gap`` apart and in the same
    order: each run of names that would touch is centred on its points (the names of points that
    sit together, one under another)."""
    values = np.asarray(targets, float)
    order = np.argsort(values, kind="stable")
    runs: list[list[float]] = []
    start = lambda run: float(np.mean(run)) - gap * (len(run) - 1) / 2  # noqa: E731
    for t in values[order]:
        runs.append([float(t)])
        while len(runs) > 1 and start(runs[-2]) + gap * len(runs[-2]) > start(runs[-1]):
            runs[-2:] = [runs[-2] + runs[-1]]
    heights = np.concatenate([start(r) + gap * np.arange(len(r)) for r in runs]) if runs else values
    out = np.empty_like(values)
    out[order] = heights
    return out


def label_points(fig: Figure, points: Sequence[tuple[Axes, np.ndarray, np.ndarray, Sequence[str]]]) -> list[Text]:
    """Name every point beside it, no name over another, inside its axes: for each (axes, xs, ys,
    names), the names of points in one column are stacked in their points' order (:func:`stack`);
    a name that still meets one already placed moves to the nearest free height, or to the other
    side of its point; a name off its point's height gets a leader line."""
    fig.draw_without_rendering()  # the layout, so that names measure where they will be drawn
    renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]
    placed: list[Any] = []
    names: list[Text] = []
    offsets = [0.0] + [sign * k * LABEL_STEP for k in range(1, LABEL_TRIES + 1) for sign in (-1, 1)]
    for ax, xs, ys, texts in points:
        if not len(texts):
            continue
        frac = (ax.transData + ax.transAxes.inverted()).transform(np.column_stack([xs, ys]))
        anns = [
            ax.annotate(
                text,
                (x, y),
                xytext=tuple(f),
                textcoords="axes fraction",
                va="center",
                fontsize=7,
                annotation_clip=False,
                arrowprops={"arrowstyle": "-", "color": "#999999", "linewidth": 0.5},
            )
            for text, x, y, f in zip(texts, xs, ys, frac, strict=True)
        ]
        gap = 1.15 * max(_text_box(a, renderer).height for a in anns) / ax.bbox.height
        target = frac[:, 1].copy()
        columns = np.round(frac[:, 0] / 0.01)  # points within a hundredth of the width share a column
        for col in np.unique(columns):
            members = np.flatnonzero(columns == col)
            target[members] = stack(frac[members, 1], gap)
        for i in sorted(range(len(anns)), key=lambda i: (columns[i], -target[i])):
            ann, (fx, fy) = anns[i], frac[i]
            ann.set_in_layout(False)
            sides = (-1, 1) if fx > 0.6 else (1, -1)  # names of points on the right run leftwards
            tries = [(target[i] + dy, side) for dy in offsets for side in sides] + [(target[i], sides[0])]
            for y, side in tries:  # the last try, where nothing was free, is where it belongs
                ann.xyann = (fx + 0.03 * side, y)
                ann.set_horizontalalignment("right" if side < 0 else "left")
                box = _text_box(ann, renderer)
                if _inside(box, ax.bbox) and not any(box.overlaps(b) for b in placed):
                    break
            ann.arrow_patch.set_visible(abs(ann.xyann[1] - fy) > gap / 4)  # type: ignore[union-attr]
            placed.append(box)
            names.append(ann)
    return names


def _known_axis(ax: Axes, x: np.ndarray, label: str) -> None:
    """A non-negative x axis from 0: symmetric-log past the smallest positive value when the
    values span more than a decade (so a known 0 sits at 0), linear otherwise."""
    positive = x[np.isfinite(x) & (x > 0)]
    if positive.size == 0:
        ax.set_xlim(0.0, 1.0)
        ax.set_xticks([0.0], ["0"])
        ax.set_xlabel(f"{label} ({'every known value is 0' if np.isfinite(x).any() else 'no known value'})")
        return
    top = float(positive.max())
    if top / float(positive.min()) > 10:
        ax.set_xscale("symlog", linthresh=float(positive.min()))
        ax.set_xlim(0.0, top * 3)
        ax.set_xlabel(f"{label} (symlog: linear below {positive.min():.3g})")
    else:
        ax.set_xlim(0.0, top * 1.25)
        ax.set_xlabel(label)


def cost_figure(board: pd.DataFrame, *, title: str = "") -> Figure:
    """The cost-versus-score figure, not yet saved (see :func:`plot_cost_vs_score`)."""
    fig = _figure(11.0, 9.6)
    rows = board[board["target"] == "y"] if "target" in board and len(board) else board
    rows = rows[rows["spearman"].notna()] if len(rows) else rows  # a row without a score has no point
    conditions = sorted(set(rows["condition"].astype(str))) if len(rows) else []
    grid = fig.add_gridspec(len(COST_PANELS), 2, width_ratios=[3.2, 1.25])
    est = rows["spearman"].to_numpy(float) if len(rows) else np.zeros(0)
    lo = rows["spearman_lo"].to_numpy(float) if len(rows) else est
    hi = rows["spearman_hi"].to_numpy(float) if len(rows) else est
    bounds = np.concatenate([lo[np.isfinite(lo)], hi[np.isfinite(hi)], est[np.isfinite(est)], [0.0]])
    ylim = (max(-1.0, bounds.min() - 0.08), min(1.05, bounds.max() + 0.08))
    names = [f"{m} {c}" for m, c in zip(rows.get("model", []), rows.get("condition", []), strict=True)]
    points: list[tuple[Axes, np.ndarray, np.ndarray, list[str]]] = []
    for r, (column, label) in enumerate(COST_PANELS):
        ax, strip = fig.add_subplot(grid[r, 0]), fig.add_subplot(grid[r, 1])
        x = _usage_x(rows, column)
        known = np.isfinite(x)
        for k, cond in enumerate(conditions):
            style = {"color": SERIES_COLOURS[k % len(SERIES_COLOURS)], "capsize": 3, "clip_on": False}
            marker = SERIES_MARKERS[k % len(SERIES_MARKERS)]
            sel = (rows["condition"].astype(str) == cond).to_numpy()
            for target, where, xs, face in (
                (ax, sel & known, x, None),
                (strip, sel & ~known, np.full(x.shape, 0.15), "white"),
            ):
                if where.any():
                    err = np.vstack([est[where] - lo[where], hi[where] - est[where]])
                    target.errorbar(xs[where], est[where], yerr=err, fmt=marker, mfc=face, **style)
        for target in (ax, strip):
            target.set_ylim(*ylim)
            target.grid(True, alpha=0.3)
        _known_axis(ax, x, label)
        ax.set_ylabel("field-macro Spearman (95% block CI)")
        ax.set_title(f"{label}: known values (a known 0 at 0)", fontsize=9, loc="left")
        strip.set_xlim(0.0, 1.0)
        strip.set_xticks([])
        strip.set_facecolor("#f3f3f3")
        strip.tick_params(labelleft=False)
        strip.set_xlabel("unknown (not recorded)")
        strip.set_title("unknown: never drawn at 0" if (~known).any() else "unknown: none", fontsize=9, loc="left")
        points.append((ax, x[known], est[known], [n for n, k in zip(names, known, strict=True) if k]))
        gone = [n for n, k in zip(names, known, strict=True) if not k]
        points.append((strip, np.full(len(gone), 0.15), est[~known], gone))
        if not len(rows):
            ax.text(0.5, 0.5, "no scored rows", ha="center", va="center", transform=ax.transAxes)
    if conditions:
        from matplotlib.lines import Line2D

        handles = [
            Line2D(
                [],
                [],
                color=SERIES_COLOURS[k % len(SERIES_COLOURS)],
                marker=SERIES_MARKERS[k % len(SERIES_MARKERS)],
                label=c,
            )
            for k, c in enumerate(conditions)
        ]
        handles.append(
            Line2D([], [], color="#555555", marker="o", mfc="white", linestyle="", label="hollow: value unknown")
        )
        fig.legend(
            handles=handles, title="condition", loc="outside lower center", ncol=len(handles), fontsize=8, frameon=False
        )
    if title:
        fig.suptitle(title)
    label_points(fig, points)
    return fig


def plot_cost_vs_score(board: pd.DataFrame, path: str | Path, *, title: str = "") -> Path:
    """Field-macro Spearman (95% block interval) against what one episode cost: USD (top) and
    input + output tokens (bottom), one colour per condition. Each panel's axis starts at 0 and
    holds the known values, a known 0 at 0; the rows whose value is unknown are drawn apart, in
    the grey strip beside it, never at 0. Every point is named, no name over another."""
    return _save(cost_figure(board, title=title), path)


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
