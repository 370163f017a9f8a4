"""The Search tool: one plain typed function whose docstring is its schema.

``make_search_tool(engine, field_id, origin, regime)`` binds an episode's universe and returns
``search(query, start_date=None, end_date=None) -> dict``. The agent runner, the lm-eval task
and the audit all call that same function; ``rap_benchmark.tools.tool_schema(fn)`` derives the
OpenAI ``tools`` entry from its signature and docstring, and ``observation_json`` is the one serialisation of
what the agent sees (sorted keys, fixed separators, UTF-8 kept)::

    {"results": [{"abstract": "...", "arxiv_id": "2401.00001", "date": "2023-12-30",
                  "title": "..."}], "total_hits": 123}

Abstracts are cut to ``spec.abstract_chars`` characters; scores are not shown to agents.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from typing import Any

from rap_benchmark.bm25.engine import SearchEngine
from rap_benchmark.core.dates import parse_date
from rap_benchmark.core.records import Regime, SearchCall, SearchObservation


def _scope(regime: Regime, window_months: int) -> str:
    if regime is Regime.FIXED:
        return f"the field's papers from the {window_months} months before the forecast origin"
    return "all of the field's papers dated before the forecast origin"


def observation_to_dict(obs: SearchObservation) -> dict[str, Any]:
    """The agent-visible observation: ``total_hits`` and results (id, title, date, abstract)."""
    return {
        "total_hits": int(obs.total_hits),
        "results": [
            {"arxiv_id": h.arxiv_id, "title": h.title, "date": h.date, "abstract": h.abstract} for h in obs.hits
        ],
    }


def observation_json(obs: SearchObservation | dict[str, Any]) -> str:
    """Stable JSON of an observation (or of the dict the tool returned): byte-identical for
    identical observations."""
    payload = observation_to_dict(obs) if isinstance(obs, SearchObservation) else obs
    return json.dumps(payload, sort_keys=True, separators=(", ", ": "), ensure_ascii=False)


def _date_or_none(value: str | None, name: str) -> dt.date | None:
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    try:
        return parse_date(value)
    except ValueError:
        raise ValueError(f"{name} must be a date as YYYY-MM-DD, got {value!r}") from None


def make_search_tool(
    engine: SearchEngine,
    field_id: str,
    origin: str | dt.date,
    regime: Regime | str,
    *,
    log: list[SearchCall] | None = None,
) -> Callable[..., dict[str, Any]]:
    """The Search tool bound to one episode universe. With ``log``, every call is appended to it
    as a :class:`SearchCall` (arguments and the exact ids and total returned)."""
    regime = Regime(regime)
    origin_date = parse_date(origin)
    engine.index(field_id)  # fail now on an unknown field, not at the first call
    k = engine.spec.top_k
    n_chars = engine.spec.abstract_chars

    def search(query: str, start_date: str | None = None, end_date: str | None = None) -> dict:
        if not isinstance(query, str) or not query.strip():
            raise ValueError("query must be a non-empty string")
        start = _date_or_none(start_date, "start_date")
        end = _date_or_none(end_date, "end_date")
        obs = engine.search(field_id, origin_date, regime, query, start=start, end=end)
        if log is not None:
            log.append(
                SearchCall(
                    field_id=field_id,
                    origin=origin_date,
                    regime=regime,
                    query=query,
                    start=start,
                    end=end,
                    result_ids=tuple(h.arxiv_id for h in obs.hits),
                    total_hits=obs.total_hits,
                )
            )
        return observation_to_dict(obs)

    search.__doc__ = f"""Search the field's arXiv papers (titles and abstracts) with BM25 keyword ranking.

    Searches {_scope(regime, engine.spec.window_months)}. A paper matches when it contains at least one query word.
    Returns at most {k} papers (arxiv_id, title, date, abstract cut to {n_chars} characters), best
    first, and total_hits: how many searchable papers match at least one query word. Papers dated
    on or after the forecast origin are never searchable.

    Args:
        query: Keywords to search for, e.g. "retrieval augmented generation".
        start_date: Optional earliest submission date to include, as YYYY-MM-DD. It can only narrow the searchable window.
        end_date: Optional latest submission date to include (inclusive), as YYYY-MM-DD. It can only narrow the searchable window.
    """
    return search
