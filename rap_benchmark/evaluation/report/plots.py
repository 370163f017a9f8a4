"""The report's figures, drawn with matplotlib's object API on the Agg canvas (no pyplot state).

* ``plot_leaderboard``: field-macro Spearman per (model, condition) with block-bootstrap interval
  bars, the instance's reliability ceiling as a reference line;
* ``plot_field``: one field's realised composition y over origins, one panel per direction, with
  chosen models' predictions overlaid.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from rap_benchmark.core.fsio import atomic_path
from rap_benchmark.core.records import DIRECTION_KEYS, Split, parse_enum
from rap_benchmark.evaluation.scoring import BASELINE_PREFIX, episode_arrays, prediction_weights, rank_correlation

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from rap_benchmark.core.artifacts import Instance

BASELINE_COLOUR = "#8c8c8c"
MODEL_COLOUR = "#1f5fa8"
SERIES_COLOURS = ("#1f5fa8", "#d9822b", "#2e8b57", "#b03a48", "#7b52ab", "#8c6d31", "#17becf")
SERIES_MARKERS = ("o", "s", "^", "D", "v", "P", "X")


def _figure(width: float, height: float) -> Figure:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=110, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _save(fig: Figure, path: str | Path) -> Path:
    path = Path(path)
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", metadata={"Software": None})
    return path


def plot_leaderboard(board: pd.DataFrame, path: str | Path, *, ceiling: float | None = None, title: str = "") -> Path:
    """Horizontal interval plot of the leaderboard (best at the top). A board without a row (no
    submission accepted: it may have no columns at all) is a figure that says so."""
    if board.empty:
        fig = _figure(8.0, 1.6 + 0.36)
        ax = fig.add_subplot()
        ax.text(0.5, 0.5, "no scored predictions", ha="center", va="center", transform=ax.transAxes)
        return _save(fig, path)
    rows = board.sort_values("spearman", ascending=True, kind="stable").reset_index(drop=True)
    fig = _figure(8.0, 1.6 + 0.36 * len(rows))
    ax = fig.add_subplot()
    y = np.arange(len(rows))
    est = rows["spearman"].to_numpy(float)
    lo, hi = rows["spearman_lo"].to_numpy(float), rows["spearman_hi"].to_numpy(float)
    is_base = rows["model"].astype(str).str.startswith(BASELINE_PREFIX).to_numpy()
    for mask, colour, label in ((is_base, BASELINE_COLOUR, "statistical baseline"), (~is_base, MODEL_COLOUR, "model")):
        if mask.any():
            ax.errorbar(
                est[mask],
                y[mask],
                xerr=np.vstack([est[mask] - lo[mask], hi[mask] - est[mask]]),
                fmt="o",
                color=colour,
                ecolor=colour,
                elinewidth=2,
                capsize=3,
                label=label,
            )
    if ceiling is not None and math.isfinite(ceiling):
        ax.axvline(ceiling, color="#b03a48", linestyle="--", linewidth=1.2, label=f"reliability ceiling {ceiling:.3f}")
    ax.axvline(0.0, color="#444444", linewidth=0.8)
    ax.set_yticks(y, [f"{m}  {c}" for m, c in zip(rows["model"], rows["condition"], strict=True)])
    ax.set_xlabel("field-macro Forecast Spearman (95% block-bootstrap interval)")
    finite = np.concatenate([lo[np.isfinite(lo)], hi[np.isfinite(hi)], [0.0, 1.0]])
    ax.set_xlim(max(-1.0, finite.min() - 0.05), 1.02)
    ax.grid(axis="x", color="#dddddd", linewidth=0.6)
    ax.set_axisbelow(True)
    fig.legend(loc="outside lower center", ncol=3, fontsize=8, frameon=False)
    if title:
        ax.set_title(title, fontsize=11, loc="left")
    return _save(fig, path)


def choose_fields(inst: Instance, n: int = 3, *, split: Split | None = Split.TEST) -> list[str]:
    """Deterministic showcase fields: the most changing, the most stable and the median field.

    Fields are ranked by the mean rho(EWMA, y) of their episodes (truth and baselines only, never
    model outputs); ties break by field id.
    """
    eps = episode_arrays(inst)
    keep = np.ones(eps.field_id.size, bool) if split is None else eps.split == parse_enum(Split, split).value
    rho = rank_correlation(eps.ewma[keep], eps.y[keep])
    frame = pd.DataFrame({"field_id": eps.field_id[keep], "rho": rho}).dropna()
    if frame.empty:
        return []
    means = frame.groupby("field_id")["rho"].mean().reset_index().sort_values(["rho", "field_id"], kind="stable")
    ordered = means["field_id"].tolist()
    picks = [ordered[0], ordered[-1], ordered[len(ordered) // 2]]
    for f in ordered:  # fill up to n with the next most changing fields
        if len(dict.fromkeys(picks)) >= n:
            break
        picks.append(f)
    return list(dict.fromkeys(picks))[:n]


def overlay_units(board: pd.DataFrame, max_units: int = 5) -> list[tuple[str, str]]:
    """(model, condition) series to overlay: EWMA and Recent, then the best non-baseline units."""
    units: list[tuple[str, str]] = []
    if board.empty:
        return units
    ranked = board.sort_values("spearman", ascending=False, kind="stable")
    models = [(str(m), str(c)) for m, c in zip(ranked["model"], ranked["condition"], strict=True)]
    for name in ("ewma", "recent"):
        unit = (BASELINE_PREFIX + name, "A0")
        if unit in models:
            units.append(unit)
    units += [u for u in models if not u[0].startswith(BASELINE_PREFIX)]
    return units[:max_units]


PANEL_TITLE_CHARS = 32
"""A field panel's title wraps at this many characters (four panels a row at 11 inches), whole."""


def panel_title(key: str, name: str) -> str:
    """``D3 parameter-efficient fine-tuning`` wrapped onto lines of :data:`PANEL_TITLE_CHARS`
    characters, every word kept (a word longer than a line stays whole on its own line)."""
    return textwrap.fill(f"{key} {name}".strip(), PANEL_TITLE_CHARS, break_long_words=False, break_on_hyphens=False)


def plot_field(
    inst: Instance,
    preds: pd.DataFrame,
    field_id: str,
    path: str | Path,
    *,
    units: Sequence[tuple[str, str]] = (),
) -> Path:
    """One field's realised y per origin (black), one panel per direction, predictions overlaid."""
    return _save(field_figure(inst, preds, field_id, units=units), path)


def field_figure(
    inst: Instance, preds: pd.DataFrame, field_id: str, *, units: Sequence[tuple[str, str]] = ()
) -> Figure:
    """The figure of :func:`plot_field`, not yet saved."""
    eps = episode_arrays(inst)
    rows = np.flatnonzero(eps.field_id == field_id)
    origins = eps.origin[rows]
    labels = [o[:7] for o in origins]
    xs = np.arange(len(rows))
    codebook = inst.codebooks.get(field_id)
    fig = _figure(11.0, 5.6)
    axes = fig.subplots(2, 4, sharex=True, sharey=False)
    sub = preds[preds["field_id"].astype(str) == field_id]
    weights, valid = prediction_weights(sub)
    sub_origin = sub["origin"].astype(str).str[:10].to_numpy()
    unit_of = list(zip(sub["model"].astype(str), sub["condition"].astype(str), strict=True))
    for d, ax in enumerate(axes.ravel()):
        ax.plot(xs, eps.y[rows, d], color="black", linewidth=2.0, marker="o", markersize=4, label="realised y")
        for k, unit in enumerate(units):
            sel = np.array([u == unit for u in unit_of], bool) & valid
            if not sel.any():
                continue
            pos = {o: i for i, o in enumerate(origins)}
            px = np.array([pos[o] for o in sub_origin[sel] if o in pos])
            py = np.array([w for o, w in zip(sub_origin[sel], weights[sel, d], strict=True) if o in pos])
            order = np.argsort(px)
            ax.plot(
                px[order],
                py[order],
                color=SERIES_COLOURS[k % len(SERIES_COLOURS)],
                marker=SERIES_MARKERS[k % len(SERIES_MARKERS)],
                markersize=4,
                linewidth=1.0,
                linestyle="--",
                alpha=0.9,
                label=f"{unit[0]} {unit[1]}",
            )
        name = codebook.directions[d].name if codebook is not None else ""
        ax.set_title(panel_title(DIRECTION_KEYS[d], name), fontsize=9, loc="left")
        ax.set_xticks(xs, labels, fontsize=7, rotation=45)
        ax.tick_params(axis="y", labelsize=7)
        ax.grid(color="#eeeeee", linewidth=0.6)
        ax.set_ylim(bottom=0)
    handles, texts = axes.ravel()[0].get_legend_handles_labels()
    fig.legend(handles, texts, loc="outside lower center", ncol=min(len(texts), 4), fontsize=8, frameon=False)
    title = f"{field_id}: realised composition of the target window by origin"
    if codebook is not None:
        title = f"{field_id} ({codebook.name}): realised composition of the target window by origin"
    fig.suptitle(title, fontsize=11, x=0.01, ha="left")
    return fig
