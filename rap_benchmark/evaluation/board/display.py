"""The board for people: one string per cell, the same in ``leaderboard.md`` and ``index.html``.

Numbers stay raw in ``leaderboard.csv`` and the dataset; here a score carries its interval
("0.751 [0.648, 0.805]"), a rank its bootstrap interval ("2 (1-4)"), and every usage number that
is not known reads ``unknown``, never 0.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from rap_benchmark.evaluation.report.tables import display, fmt, interval_cell
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


def fmt_stratum(row: dict[str, Any], stratum: str) -> str:
    """``0.712 (24 cells)`` on the strict or exposed cells; ``unknown cutoff`` without a cutoff."""
    cells = row.get(f"{stratum}_cells")
    if unknown(cells):
        return "unknown cutoff"
    if int(cells) == 0:
        return "no scored cell"
    return f"{fmt(row.get(f'spearman_{stratum}'))} ({int(cells)} cells)"


DISPLAY: tuple[tuple[str, Any, str], ...] = (
    ("track", "track", "track"),
    ("rank (95% CI)", fmt_rank, "rank"),
    ("model", "model", "model"),
    ("cond.", "condition", "condition"),
    ("target", "target", "target"),
    ("coverage", "coverage", "coverage"),
    ("Spearman [95% block CI]", interval_cell, "spearman"),
    ("TV", "tv", "tv"),
    ("JSD", "jsd", "jsd"),
    ("State as Forecast", "state_as_forecast", "state_as_forecast"),
    ("strict", lambda r: fmt_stratum(r, "strict"), "strict_cells"),
    ("exposed", lambda r: fmt_stratum(r, "exposed"), "exposed_cells"),
    ("in tokens/ep.", lambda r: fmt_usage(r.get("input_tokens_per_episode")), "input_tokens_per_episode"),
    ("out tokens/ep.", lambda r: fmt_usage(r.get("output_tokens_per_episode")), "output_tokens_per_episode"),
    ("searches/ep.", lambda r: fmt_usage(r.get("search_calls_per_episode")), "search_calls_per_episode"),
    ("USD/ep.", lambda r: fmt_cost(r.get("cost_usd_per_episode")), "cost_usd_per_episode"),
    ("USD total", lambda r: fmt_cost(r.get("cost_usd")), "cost_usd"),
    ("tokens total", lambda r: _total_tokens(r), "input_tokens"),
    ("cutoff", lambda r: r.get("knowledge_cutoff") or "unknown", "knowledge_cutoff"),
    ("invalid", "n_invalid", "n_invalid"),
    ("origins", "origins", "origins"),
)
"""(header, board column or function of a row, the board column it needs): a column whose
source the board lacks is left out, and so are columns no row has a value for (State as
Forecast without State rows; strict/exposed when no model's cutoff is known)."""


def _total_tokens(row: dict[str, Any]) -> str:
    a, b = row.get("input_tokens"), row.get("output_tokens")
    if unknown(a) or unknown(b):
        return "unknown"
    return fmt_usage(float(a) + float(b))


def board_columns(board: pd.DataFrame) -> list[tuple[str, Any]]:
    """The (header, cell) pairs of ``DISPLAY`` this board can fill (see ``DISPLAY``)."""
    optional = ("state_as_forecast", "strict_cells", "exposed_cells")
    return [(h, s) for h, s, need in DISPLAY if need in board and not (need in optional and board[need].isna().all())]


def display_board(board: pd.DataFrame) -> pd.DataFrame:
    """Every board row as strings under human headers (intervals and units folded in)."""
    return pd.DataFrame() if board.empty else display(board, board_columns(board))
