"""``index.html``: the board as one self-contained, offline page.

Inline CSS and a few lines of inline JavaScript (sort by any column; filter by track, split and
condition), figures as data URIs, no network reference. Every decision (which columns, which
cells are numbers, what a cell sorts by, the wording) is made here; the jinja2 template
``rap_benchmark/templates/leaderboard.html.j2`` only lays it out.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from rap_benchmark.core.fsio import atomic_write_text
from rap_benchmark.evaluation.board.display import display_board, fmt_cutoff, total_usage
from rap_benchmark.evaluation.board.plots import contrast_matrix, finite, plot_cost_vs_score
from rap_benchmark.evaluation.report.html import data_uri, render_template
from rap_benchmark.evaluation.report.plots import plot_leaderboard
from rap_benchmark.evaluation.report.tables import display, fmt_interval
from rap_benchmark.evaluation.usage import unknown

TEMPLATE = "leaderboard.html.j2"
RETROSPECTIVE = "retrospective"


def _tokens_per_episode(row: pd.Series) -> Any:
    return row.get("input_tokens_per_episode", math.nan) + row.get("output_tokens_per_episode", math.nan)


SORT_KEY: dict[str, Any] = {
    "rank (95% CI)": "rank",
    "Spearman [95% block CI]": "spearman",
    "TV": "tv",
    "JSD": "jsd",
    "State as Forecast": "state_as_forecast",
    "strict": "spearman_strict",
    "exposed": "spearman_exposed",
    "tokens/ep. (in + out)": _tokens_per_episode,
    "Search calls/ep.": "search_calls_per_episode",
    "USD/ep.": "cost_usd_per_episode",
}
"""Header -> the raw board column (or function of a raw row) its cells sort by: numbers;
unknown sorts last."""

USAGE_HEADERS = ("tokens/ep. (in + out)", "Search calls/ep.", "USD/ep.")
"""Cells whose tooltip holds the row's usage totals (the table shows per-episode usage only)."""


def _unbroken_intervals(text: str) -> str:
    """``0.760 [0.687,\u00a00.803]``: a narrow column may wrap a cell between its estimate and its
    interval, never inside the interval (the page's cells wrap so that the table fits its page)."""
    return re.sub(r"\[[^\]]*\]", lambda m: m.group(0).replace(" ", "\u00a0"), text)


def header_lines(header: str, width: int = 10) -> list[str]:
    """A header longer than ``width`` characters on two lines, split at the space nearest its
    middle outside brackets (``Spearman`` / ``[95% block CI]``): a column is as wide as its widest
    line, and a one-line header would make it wider than its cells."""
    depth, spaces = 0, []
    for i, ch in enumerate(header):  # a space inside brackets keeps "[95% block CI]" whole
        depth += (ch in "([") - (ch in ")]")
        if ch == " " and depth == 0:
            spaces.append(i)
    if len(header) <= width or not spaces:
        return [header]
    cut = min(spaces, key=lambda i: (abs(len(header) - 2 * i), i))
    return [header[:cut], header[cut + 1 :]]


def table_rows(
    board: pd.DataFrame,
    columns: Sequence[tuple[str, Any]] | None = None,
    *,
    sort_keys: Mapping[str, Any] = SORT_KEY,
    usage_headers: Sequence[str] = USAGE_HEADERS,
    usage_totals: Callable[[dict[str, Any]], str] = total_usage,
) -> tuple[list[str], list[dict[str, Any]]]:
    """Headers and rows of the sortable table: each cell's text, sort key, tooltip and class (``num``
    for a number, ``name`` for a model name, which may wrap; ``date``, which may not).
    ``columns``: (header, cell) pairs (default: the retrospective board's); ``sort_keys``: header ->
    the raw column (or function of a raw row) its cells sort by; the cells under ``usage_headers``
    carry ``usage_totals`` of their row as tooltip."""
    shown = display_board(board) if columns is None else display(board, columns)
    if shown.empty:
        return [], []
    headers = list(shown.columns)
    rows = []
    for (_, raw), (_, cells) in zip(board.iterrows(), shown.iterrows(), strict=True):
        out = []
        totals = usage_totals(raw.to_dict())
        for h in headers:
            key = sort_keys.get(h)
            value = (key(raw) if callable(key) else raw.get(key)) if key else cells[h]
            sort = "" if key and unknown(value) else str(value)
            title = totals if h in usage_headers else ""
            cls = "num" if key is not None else "name" if h == "model" else "date" if h == "cutoff" else ""
            out.append({"text": _unbroken_intervals(str(cells[h])), "sort": sort, "cls": cls, "title": title})
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
                "cutoff": fmt_cutoff(meta),
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
            "caption": "Spearman against USD per episode (top) and input + output tokens per episode (bottom). "
            "Each axis starts at 0 and holds the known values (a known 0 at 0; symmetric-log past the smallest "
            "positive value when they span more than a decade); a row whose value is unknown is drawn hollow in "
            "the grey strip beside the panel, never at 0.",
        },
    ]
    html = render_page(
        table_rows(board),
        title=title,
        meta=meta,
        verdicts=verdicts,
        note=note,
        figures=figures,
        matrices=matrices(contrasts),
    )
    return [forest, cost, atomic_write_text(out / "index.html", html)]


def render_page(
    table: tuple[list[str], list[dict[str, Any]]],
    *,
    title: str,
    meta: dict[str, Any],
    verdicts: Sequence[dict[str, Any]],
    note: str,
    figures: Sequence[dict[str, str]] = (),
    matrices: list[dict[str, Any]] | None = None,
) -> str:
    """The board page's HTML: the sortable ``table`` (:func:`table_rows`), its filters (a filter
    with nothing to choose from is hidden), the ``figures``, the contrast ``matrices`` (None: no
    such section) and every submission's verdict."""
    headers, rows = table
    return render_template(
        TEMPLATE,
        title=title,
        meta=meta,
        headers=[{"text": h, "lines": header_lines(h)} for h in headers],
        rows=rows,
        tracks=sorted({r["track"] for r in rows}),
        splits=sorted({r["split"] for r in rows if r["split"]}),
        conditions=sorted({r["condition"] for r in rows if r["condition"]}),
        figures=list(figures),
        matrices=matrices,
        details=submission_details(verdicts),
        note=note,
    )
