"""The Search tool: one plain typed function whose docstring is its schema.

``make_search_tool(engine, field_id, origin, regime)`` binds an episode's universe and returns
``search(query, start_date=None, end_date=None) -> dict``. The agent runner, the lm-eval task
and the audit all call that same function; ``tool_schema(fn)`` derives the OpenAI ``tools``
entry from its signature and docstring, and ``observation_json`` is the one serialisation of
what the agent sees (sorted keys, fixed separators, UTF-8 kept)::

    {"results": [{"abstract": "...", "arxiv_id": "2401.00001", "date": "2023-12-30",
                  "title": "..."}], "total_hits": 123}

Abstracts are cut to ``spec.abstract_chars`` characters; scores are not shown to agents.
"""

from __future__ import annotations

import datetime as dt
import inspect
import json
import re
import types
import typing
from collections.abc import Callable
from typing import Any

from rap_benchmark.core.dates import parse_date
from rap_benchmark.core.records import Regime, SearchCall, SearchObservation
from rap_benchmark.search.engine import SearchEngine


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
        if not isinstance(query, str):
            raise ValueError(f"query must be a string, got {type(query).__name__}")
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


# -- schema ----------------------------------------------------------------------------------

_JSON_TYPES: dict[Any, str] = {str: "string", int: "integer", float: "number", bool: "boolean", dict: "object"}


def _json_type(annotation: Any) -> tuple[str, bool]:
    """JSON type name of a parameter annotation and whether it admits None."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) != 1:
            raise TypeError(f"unsupported union annotation {annotation!r}")
        return _json_type(args[0])[0], True
    if annotation in _JSON_TYPES:
        return _JSON_TYPES[annotation], False
    if origin is list:
        return "array", False
    raise TypeError(f"unsupported parameter annotation {annotation!r}")


def _parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """Description (text before ``Args:``) and per-argument descriptions (Google style)."""
    doc = inspect.cleandoc(doc)
    head, _, args_block = doc.partition("\nArgs:\n")
    description = re.sub(r"\s+", " ", head).strip()
    params: dict[str, str] = {}
    lines = [line for line in args_block.splitlines() if line.strip()]
    if not lines:
        return description, params
    indent = len(lines[0]) - len(lines[0].lstrip())
    current = None
    for line in lines:
        depth = len(line) - len(line.lstrip())
        m = re.match(r"^(\w+):\s*(.*)$", line.strip())
        if depth < indent:
            break  # a following section (Returns:, ...)
        if depth == indent and m:
            current = m.group(1)
            params[current] = m.group(2).strip()
        elif current is not None:
            params[current] += " " + line.strip()
    return description, params


def tool_schema(fn: Callable[..., Any]) -> dict[str, Any]:
    """The OpenAI ``tools`` entry of a plain typed function, from its signature and docstring.

    Every parameter must be documented in the docstring's ``Args:`` section; parameters without
    a default are required.
    """
    if not fn.__doc__:
        raise ValueError(f"{fn.__name__} has no docstring to derive a schema from")
    description, docs = _parse_docstring(fn.__doc__)
    hints = typing.get_type_hints(fn)
    properties: dict[str, Any] = {}
    required: list[str] = []
    for name, param in inspect.signature(fn).parameters.items():
        if name not in docs:
            raise ValueError(f"{fn.__name__}: parameter {name!r} is not documented under Args:")
        json_type, _nullable = _json_type(hints[name])
        properties[name] = {"type": json_type, "description": docs[name]}
        if param.default is inspect.Parameter.empty:
            required.append(name)
    return {
        "type": "function",
        "function": {
            "name": fn.__name__,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": properties,
                "required": required,
                "additionalProperties": False,
            },
        },
    }
