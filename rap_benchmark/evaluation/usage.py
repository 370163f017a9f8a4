"""What a submission spent: tokens, Search calls and price, per condition, as its metadata states.

The ``usage`` key of a submission's ``.meta.json``::

    "usage": {"source": "rap run store runs/gpt (backend openai)", "prices_as_of": "2024-12-01",
              "by_condition": {"A1": {"episodes": 40, "input_tokens": 812345, "output_tokens": 20411,
                                      "search_calls": 212, "cost_usd": 2.23}}}

``episodes`` counts the prediction rows of that condition (valid or not: an invalid answer cost
tokens too). A null is *unknown* (a harness that does not report tokens, a model missing from the
price table), never zero; a statistical baseline calls no model, so its zeros are known. The
numbers are written by whatever produced the predictions (``rap submit prepare`` from a run
store, the harness converters, ``rap submit split`` for baselines), and :func:`check_usage`
holds them against the rows: the episode counts must match, Search calls stay within the
budget, and when the rows carry their own
accounting columns (``prompt_tokens``, ``completion_tokens``, ``n_search_calls``, ``cost_usd``)
the totals must be their sums.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import pandas as pd

from rap_benchmark.core.records import Condition, is_count
from rap_benchmark.core.serial import Record

USAGE_KEYS = ("source", "prices_as_of", "by_condition")
COUNT_FIELDS = ("input_tokens", "output_tokens", "search_calls")
ENTRY_KEYS = ("episodes", *COUNT_FIELDS, "cost_usd")
ROW_COLUMNS = {"input_tokens": "prompt_tokens", "output_tokens": "completion_tokens", "search_calls": "n_search_calls"}
"""Usage field -> the prediction file's accounting column that sums to it."""
BOARD_COLUMNS = tuple(f"{name}{per}" for per in ("", "_per_episode") for name in (*COUNT_FIELDS, "cost_usd"))
"""The board's usage columns: each total, then each per-episode mean."""
UNKNOWN = "unknown"


class Prices(Protocol):
    """What pricing needs of ``rap_benchmark.llmclient.pricing.PriceTable``."""

    as_of: str | None

    def cost_usd(self, model: str, prompt_tokens: int, completion_tokens: int) -> float | None: ...


@dataclass(frozen=True, slots=True)
class ConditionUsage(Record):
    """One condition's totals; None is unknown."""

    episodes: int
    input_tokens: int | None
    output_tokens: int | None
    search_calls: int | None
    cost_usd: float | None

    def board_columns(self) -> dict[str, float]:
        """Totals and per-episode means as floats (NaN where unknown)."""
        out: dict[str, float] = {}
        for name in (*COUNT_FIELDS, "cost_usd"):
            value = getattr(self, name)
            out[name] = math.nan if value is None else float(value)
            out[f"{name}_per_episode"] = math.nan if value is None else float(value) / self.episodes
        return out


@dataclass(frozen=True, slots=True)
class Usage(Record):
    source: str
    prices_as_of: str | None
    by_condition: Mapping[Condition, ConditionUsage]  # in condition order


def _sum_or_none(rows: pd.DataFrame, column: str | None) -> float | None:
    if column is None or column not in rows:
        return None
    values = pd.to_numeric(rows[column], errors="coerce")
    if values.isna().any():
        return None
    return float(values.sum())


def usage_from_rows(
    frame: pd.DataFrame,
    *,
    source: str,
    prices: Prices | None = None,
    tokens_known: bool = True,
    no_model_calls: bool = False,
) -> dict[str, Any]:
    """The ``usage`` metadata of a prediction frame from its accounting columns.

    Tokens and Search calls are the sums of ``prompt_tokens``, ``completion_tokens`` and
    ``n_search_calls`` (unknown when a column is absent or has a null, or with ``tokens_known``
    False: a harness that does not report them). The cost is the sum of ``cost_usd`` when every
    row has one, else the price table's cost of the tokens (unknown for a model it does not
    list). ``no_model_calls``: a statistical baseline, whose zeros are known.
    """
    models = sorted(set(frame["model"].astype(str)))
    by_condition: dict[str, Any] = {}
    for cond, rows in frame.groupby("condition", sort=True):
        condition = Condition(str(cond))
        entry: dict[str, Any] = {"episodes": len(rows)}
        if no_model_calls:
            entry.update(input_tokens=0, output_tokens=0, search_calls=0, cost_usd=0.0)
            by_condition[condition.value] = entry
            continue
        for name, column in ROW_COLUMNS.items():
            known = tokens_known or name == "search_calls"
            total = _sum_or_none(rows, column) if known else None
            if name == "search_calls" and total is None and condition.regime is None:
                total = 0.0  # closed book: no Search tool was offered
            entry[name] = None if total is None else int(total)
        cost = _sum_or_none(rows, "cost_usd")
        if cost is None and prices is not None and entry["input_tokens"] is not None and len(models) == 1:
            if entry["output_tokens"] is not None:
                cost = prices.cost_usd(models[0], entry["input_tokens"], entry["output_tokens"])
        entry["cost_usd"] = None if cost is None else round(float(cost), 10)
        by_condition[condition.value] = entry
    return {
        "source": source,
        "prices_as_of": None if prices is None else prices.as_of,
        "by_condition": by_condition,
    }


def _money(value: Any) -> bool:
    if value is None:
        return True
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) and value >= 0


def check_usage(
    raw: Any,
    conditions: tuple[Condition, ...],
    frame: pd.DataFrame | None,
    *,
    max_search_calls: int | None = None,
) -> tuple[Usage | None, list[str]]:
    """Typed usage (None when absent or unusable) and the problems, fatal or warning.

    ``frame`` is the validator's usable rows (None: not read yet); ``max_search_calls`` the
    instance's Search budget per episode.
    """
    if raw is None:
        return None, [f"[warning] usage: none given; tokens, Search calls and cost are shown as {UNKNOWN}"]
    fatal: list[str] = []
    if not isinstance(raw, dict):
        return None, ["[fatal] usage must be an object with source and by_condition"]
    unknown = sorted(set(raw) - set(USAGE_KEYS))
    if unknown:
        fatal.append(f"unknown key(s) {', '.join(unknown)} (allowed: {', '.join(USAGE_KEYS)})")
    source = raw.get("source")
    if not isinstance(source, str) or not source.strip():
        fatal.append("source must say where the numbers come from (a run store, a harness log)")
    as_of = raw.get("prices_as_of")
    if as_of is not None and not isinstance(as_of, str):
        fatal.append("prices_as_of must be a date string or null")
    table = raw.get("by_condition")
    if not isinstance(table, dict) or not table:
        fatal.append('by_condition must map each condition to its totals, e.g. {"A1": {"episodes": 40, ...}}')
        table = {}
    warnings: list[str] = []
    by_condition: dict[Condition, ConditionUsage] = {}
    for key, entry in table.items():
        try:
            cond = Condition(key)
        except ValueError:
            fatal.append(f"unknown condition {key!r} in by_condition")
            continue
        if cond not in conditions:
            fatal.append(f"by_condition has {cond.value}, which the submission does not declare")
            continue
        if not isinstance(entry, dict) or sorted(set(entry) - set(ENTRY_KEYS)):
            fatal.append(f"{cond.value}: an entry holds only {', '.join(ENTRY_KEYS)}")
            continue
        eps = entry.get("episodes")
        if not (isinstance(eps, int) and not isinstance(eps, bool) and eps > 0):
            fatal.append(f"{cond.value}: episodes must be a positive integer")
            continue
        bad = [k for k in COUNT_FIELDS if entry.get(k) is not None and not is_count(entry[k])]
        if bad or not _money(entry.get("cost_usd")):
            fatal.append(
                f"{cond.value}: {', '.join(bad or ['cost_usd'])} must be a nonnegative "
                f"{'integer' if bad else 'finite number'} or null (unknown)"
            )
            continue
        by_condition[cond] = ConditionUsage(
            eps, entry.get("input_tokens"), entry.get("output_tokens"), entry.get("search_calls"), entry.get("cost_usd")
        )
    for cond in conditions:
        if cond not in by_condition and not any(f.startswith(f"{cond.value}:") for f in fatal):
            warnings.append(f"[warning] usage: nothing stated for {cond.value}; shown as {UNKNOWN}")
    for cond, u in by_condition.items():
        fatal += _implausible(cond, u, frame, max_search_calls)
    problems = [f"[fatal] usage: {m}" for m in fatal] + warnings
    if fatal:
        return None, problems
    return Usage(source, as_of, dict(sorted(by_condition.items()))), problems


def _implausible(
    cond: Condition, u: ConditionUsage, frame: pd.DataFrame | None, max_search_calls: int | None
) -> list[str]:
    out = []
    c = cond.value
    if max_search_calls is not None and u.search_calls is not None and u.search_calls > u.episodes * max_search_calls:
        out.append(
            f"{c}: {u.search_calls} Search calls over {u.episodes} episodes exceed the budget of "
            f"{max_search_calls} per episode"
        )
    if u.cost_usd and u.input_tokens == 0 and u.output_tokens == 0:
        out.append(f"{c}: a cost of {u.cost_usd} USD with no tokens")
    if frame is None or not len(frame):
        return out
    rows = frame[frame["condition"].astype(str) == c]
    if len(rows) != u.episodes:
        out.append(f"{c}: usage counts {u.episodes} episodes, the file has {len(rows)} rows of {c}")
        return out
    for name, column in (*ROW_COLUMNS.items(), ("cost_usd", "cost_usd")):
        stated = getattr(u, name)
        total = _sum_or_none(rows, column)
        if stated is None or total is None:
            continue
        if not math.isclose(float(stated), total, rel_tol=1e-9, abs_tol=1e-9):
            out.append(f"{c}: usage states {name} {stated}, the rows' {column} sum to {total:g}")
    return out


def unknown(value: Any) -> bool:
    """A board cell with no value: None, pandas' NA or NaT, NaN (unknown is never shown as 0)."""
    if value is None or value is pd.NA or value is pd.NaT:
        return True
    if isinstance(value, float | np.floating):
        return math.isnan(value)
    return isinstance(value, np.datetime64 | np.timedelta64) and bool(np.isnat(value))


def fmt_usage(value: Any, digits: int = 0) -> str:
    """A usage number for people: ``unknown`` for NaN/None, thousands separated."""
    if unknown(value):
        return UNKNOWN
    v = float(value)
    if digits:
        return f"{v:,.{digits}f}"
    return f"{v:,.0f}" if v >= 10 or v == int(v) else f"{v:,.1f}"


def fmt_cost(value: Any) -> str:
    """A price in USD for people: ``unknown`` for NaN/None; cents below a dollar keep 4 digits."""
    if unknown(value):
        return UNKNOWN
    v = float(value)
    if v == 0:
        return "$0"
    return f"${v:,.2f}" if v >= 1 else f"${v:.4f}"
