"""The board for people: one string per cell, the same in ``leaderboard.md`` and ``index.html``.

Numbers stay raw in ``leaderboard.csv`` and the dataset; here a score carries its interval
("0.751 [0.648, 0.805]"), a rank its bootstrap interval ("2 (1-4)"), and every usage number that
is not known reads ``unknown``, never 0; what does not apply (a statistical baseline's knowledge
cutoff) reads ``n/a``.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from rap_benchmark.evaluation.report.tables import display, fmt, interval_cell
from rap_benchmark.evaluation.scoring import BASELINE_PREFIX
from rap_benchmark.evaluation.usage import fmt_cost, fmt_usage, unknown

NO_SUBMISSIONS = "No accepted submissions.\n"


def fmt_rank(row: dict[str, Any]) -> str:
    """``2 (1-4)``: the rank and its 95% bootstrap interval; blank for an unranked (partial) row."""
    rank = row.get("rank")
    if unknown(rank):
        return ""
    lo, hi = row.get("rank_lo"), row.get("rank_hi")
    if unknown(lo) or unknown(hi):
        return str(int(rank))
    return f"{int(rank)} ({int(lo)}-{int(hi)})" if int(lo) != int(hi) else f"{int(rank)} ({int(lo)})"


NOT_APPLICABLE = "n/a"
"""A statistical baseline's knowledge cutoff, and so its strict/exposed cells: it read no text."""


def no_model(row: dict[str, Any]) -> bool:
    """A statistical baseline: a forecast from the counts alone, no model and no knowledge cutoff."""
    return str(row.get("model") or "").startswith(BASELINE_PREFIX)


def fmt_cutoff(row: dict[str, Any]) -> str:
    """The stated knowledge cutoff; ``n/a`` for a statistical baseline, ``unknown`` when not stated."""
    if no_model(row):
        return NOT_APPLICABLE
    cutoff = row.get("knowledge_cutoff")
    return "unknown" if unknown(cutoff) or not cutoff else str(cutoff)


def fmt_stratum(row: dict[str, Any], stratum: str) -> str:
    """``0.712 (24 cells)`` on the strict or exposed cells; ``n/a`` for a statistical baseline,
    ``unknown cutoff`` for a model without a stated cutoff."""
    cells = row.get(f"{stratum}_cells")
    if unknown(cells):
        return NOT_APPLICABLE if no_model(row) else "unknown cutoff"
    if int(cells) == 0:
        return "no scored cell"
    return f"{fmt(row.get(f'spearman_{stratum}'))} ({int(cells)} cells)"


def fmt_condition(row: dict[str, Any]) -> str:
    """The condition, with its target when it is not the Forecast target y (``A2 (x)``)."""
    target = row.get("target")
    cond = str(row.get("condition", ""))
    return cond if unknown(target) or target in ("", "y") else f"{cond} ({target})"


def fmt_coverage(row: dict[str, Any]) -> str:
    """``40/40`` episodes covered, with the invalid answers among them when there are any."""
    cover, invalid = row.get("coverage"), row.get("n_invalid")
    text = "" if unknown(cover) else str(cover)
    if not unknown(invalid) and int(invalid) > 0:
        text += f" ({int(invalid)} invalid)"
    return text


def fmt_tokens(row: dict[str, Any], per: str = "episode") -> str:
    """Input + output tokens per episode (``1,204 + 310``; ``per="task"``: per CiteCast task);
    ``unknown`` when either is."""
    a, b = row.get(f"input_tokens_per_{per}"), row.get(f"output_tokens_per_{per}")
    if unknown(a) or unknown(b):
        return "unknown"
    return f"{fmt_usage(a)} + {fmt_usage(b)}"


DISPLAY: tuple[tuple[str, Any, str], ...] = (
    ("track", "track", "track"),
    ("rank (95% CI)", fmt_rank, "rank"),
    ("model", "model", "model"),
    ("cond.", fmt_condition, "condition"),
    ("coverage", fmt_coverage, "coverage"),
    ("Spearman [95% block CI]", interval_cell, "spearman"),
    ("TV", "tv", "tv"),
    ("JSD", "jsd", "jsd"),
    ("State as Forecast", "state_as_forecast", "state_as_forecast"),
    ("strict", lambda r: fmt_stratum(r, "strict"), "strict_cells"),
    ("exposed", lambda r: fmt_stratum(r, "exposed"), "exposed_cells"),
    ("tokens/ep. (in + out)", fmt_tokens, "input_tokens_per_episode"),
    ("Search calls/ep.", lambda r: fmt_usage(r.get("search_calls_per_episode")), "search_calls_per_episode"),
    ("USD/ep.", lambda r: fmt_cost(r.get("cost_usd_per_episode")), "cost_usd_per_episode"),
    ("cutoff", fmt_cutoff, "knowledge_cutoff"),
    ("origins", "origins", "origins"),
)
"""(header, board column or function of a row, the board column it needs): a column whose
source the board lacks is left out, and so are columns no row has a value for (State as
Forecast without State rows; strict/exposed when no model's cutoff is known) and the track
when the board holds one. The target joins the condition (``A2 (x)``), the invalid answers the
coverage (``40/40 (2 invalid)``); the totals stay in ``leaderboard.csv`` (and, on the page, in
the per-episode cells' tooltips), so the table fits a 1400 px page."""


def total_usage(row: dict[str, Any], calls: tuple[str, str] = ("search_calls", "searches")) -> str:
    """The totals behind a row's per-episode usage (the page's tooltip of its usage cells);
    ``calls``: the column of the row's tool calls and what to call them."""
    a, b = row.get("input_tokens"), row.get("output_tokens")
    tokens = (
        "unknown"
        if unknown(a) or unknown(b)
        else f"{fmt_usage(float(a) + float(b))} ({fmt_usage(a)} in + {fmt_usage(b)} out)"
    )
    return f"in total: {tokens} tokens, {fmt_usage(row.get(calls[0]))} {calls[1]}, {fmt_cost(row.get('cost_usd'))}"


def board_columns(board: pd.DataFrame) -> list[tuple[str, Any]]:
    """The (header, cell) pairs of ``DISPLAY`` this board can fill (see ``DISPLAY``)."""
    optional = ("state_as_forecast", "strict_cells", "exposed_cells")

    def shown(need: str) -> bool:
        if need not in board:
            return False
        if need in optional:
            return not board[need].isna().all()
        return need != "track" or board["track"].nunique() > 1

    return [(h, s) for h, s, need in DISPLAY if shown(need)]


def display_board(board: pd.DataFrame) -> pd.DataFrame:
    """Every board row as strings under human headers (intervals and units folded in)."""
    return pd.DataFrame() if board.empty else display(board, board_columns(board))
