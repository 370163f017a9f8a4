"""``index.html``: the board as one self-contained, offline page.

Inline CSS and a few lines of inline JavaScript (sort by any column; filter by track, split and
condition), figures as data URIs, no network reference. Every decision (which columns, which
cells are numbers, what a cell sorts by, the wording) is made here; the jinja2 template
``rap_benchmark/templates/leaderboard.html.j2`` only lays it out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from rap_benchmark.core.fsio import atomic_write_text
from rap_benchmark.evaluation.board.display import display_board
from rap_benchmark.evaluation.board.plots import contrast_matrix, finite, plot_cost_vs_score
from rap_benchmark.evaluation.report.html import data_uri, render_template
from rap_benchmark.evaluation.report.plots import plot_leaderboard
from rap_benchmark.evaluation.report.tables import display, fmt_interval
from rap_benchmark.evaluation.usage import unknown

TEMPLATE = "leaderboard.html.j2"
RETROSPECTIVE = "retrospective"

SORT_COLUMN = {
    "rank (95% CI)": "rank",
    "Spearman [95% block CI]": "spearman",
    "TV": "tv",
    "JSD": "jsd",
    "State as Forecast": "state_as_forecast",
    "strict": "spearman_strict",
    "exposed": "spearman_exposed",
    "in tokens/ep.": "input_tokens_per_episode",
    "out tokens/ep.": "output_tokens_per_episode",
    "searches/ep.": "search_calls_per_episode",
    "USD/ep.": "cost_usd_per_episode",
    "USD total": "cost_usd",
    "invalid": "n_invalid",
}
"""Header -> the raw board column its cells sort by (numbers; unknown sorts last)."""


def table_rows(
    board: pd.DataFrame,
    columns: Sequence[tuple[str, Any]] | None = None,
    sort_columns: Mapping[str, str] = SORT_COLUMN,
) -> tuple[list[str], list[dict[str, Any]]]:
    """Headers and rows of the sortable table: each cell's text, sort key and whether it is a number.
    ``columns``: (header, cell) pairs (default: the retrospective board's); ``sort_columns``: header ->
    the raw column its cells sort by."""
    shown = display_board(board) if columns is None else display(board, columns)
    if shown.empty:
        return [], []
    headers = list(shown.columns)
    rows = []
    for (_, raw), (_, cells) in zip(board.iterrows(), shown.iterrows(), strict=True):
        out = []
        for h in headers:
            column = sort_columns.get(h)
            value = raw.get(column) if column else cells[h]
            sort = "" if column and unknown(value) else str(value)
            out.append({"text": str(cells[h]), "sort": sort, "num": column is not None})
        rows.append(
            {
                "cells": out,
                "track": str(raw.get("track", RETROSPECTIVE)),
                "split": str(raw.get("split", "")),
                "condition": str(raw.get("condition", "")),
            }
        )
    return headers, rows


def matrices(contrasts: pd.DataFrame) -> list[dict[str, Any]]:
    """One paired-contrast matrix per Forecast condition: Δ Spearman of the row's model minus the
    column's on the cells both cover, its 95% block interval in the cell's title, marked when the
    interval excludes zero."""
    if contrasts.empty:
        return []
    out = []
    for cond in sorted(set(contrasts["condition"])):
        m = contrast_matrix(contrasts, cond)
        shared = [x for x in m.index if any(c is not None and finite(c[0]) for c in m.loc[x])]
        m = m.loc[shared, shared]  # a model that shares no scored cell with any other has no contrast
        if len(shared) < 2:
            continue
        rows = []
        for cand in m.index:
            cells = []
            for ref in m.columns:
                c = m.loc[cand, ref]
                if cand == ref or c is None or not finite(c[0]):
                    cells.append({"text": "", "cls": "diag" if cand == ref else "", "title": ""})
                    continue
                est, lo, hi, real = c
                cls = ("pos" if est > 0 else "neg") + (" real" if real else "")
                cells.append(
                    {
                        "text": f"{est:+.3f}{' *' if real else ''}",
                        "cls": cls,
                        "title": f"{cand} minus {ref}: {fmt_interval(est, lo, hi, 4, signed=True)}",
                    }
                )
            rows.append({"model": cand, "cells": cells})
        out.append({"condition": cond, "models": list(m.columns), "rows": rows})
    return out


def submission_details(verdicts: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per submission: verdict, metadata and every validation problem, for the page's detail list."""
    out = []
    for v in verdicts:
        meta = v.get("meta") or {}
        usage = meta.get("usage") or {}
        out.append(
            {
                "name": Path(str(v.get("submission") or v.get("reveal") or "")).name,
                "accepted": bool(v.get("accepted")),
                "model": meta.get("model", ""),
                "conditions": ", ".join(meta.get("conditions") or []),
                "cutoff": meta.get("knowledge_cutoff") or "unknown",
                "tools": ", ".join(meta.get("tools") or []) or "none",
                "usage_source": usage.get("source") or "none stated (usage unknown)",
                "prices_as_of": usage.get("prices_as_of") or "",
                "problems": [str(p) for p in (v.get("problems") or ([v["message"]] if v.get("message") else []))],
            }
        )
    return out


def write_page(
    out: Path,
    board: pd.DataFrame,
    *,
    meta: dict[str, Any],
    verdicts: Sequence[dict[str, Any]],
    contrasts: pd.DataFrame,
    note: str,
    title: str,
) -> list[Path]:
    """Draw the forest and cost-versus-score figures into ``out`` and write ``out/index.html`` (UTF-8,
    no external references)."""
    scored = board[board["spearman"].notna()] if "spearman" in board else board  # no valid answer: no point
    forecast = scored[scored["target"] == "y"] if "target" in scored else scored
    forest = plot_leaderboard(forecast, out / "forest.png", title=f"{title}: Forecast Spearman")
    cost = plot_cost_vs_score(scored, out / "cost_vs_score.png", title="score against cost per episode")
    figures = [
        {
            "id": "forest",
            "src": data_uri(forest),
            "alt": "forest plot of field-macro Spearman with 95% block-bootstrap intervals",
            "caption": "Field-macro Forecast Spearman per model and condition with 95% block-bootstrap intervals "
            "(grey: statistical baselines); rows without a scored episode are in the table only.",
        },
        {
            "id": "cost",
            "src": data_uri(cost),
            "alt": "cost versus score: Spearman against USD and tokens per episode",
            "caption": "Spearman against USD per episode (left) and input + output tokens per episode (right), "
            "symmetric-log axes so a known zero sits at 0; rows whose cost is unknown are named above each "
            "panel and not drawn.",
        },
    ]
    headers, rows = table_rows(board)
    html = render_template(
        TEMPLATE,
        title=title,
        meta=meta,
        headers=headers,
        rows=rows,
        tracks=sorted({r["track"] for r in rows}),
        splits=sorted({r["split"] for r in rows if r["split"]}),
        conditions=sorted({r["condition"] for r in rows}),
        figures=figures,
        matrices=matrices(contrasts),
        details=submission_details(verdicts),
        note=note,
    )
    return [forest, cost, atomic_write_text(out / "index.html", html)]
