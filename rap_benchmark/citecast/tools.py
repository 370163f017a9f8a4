"""The agent's tools: plain typed functions whose signature and docstring are their schema.

:class:`SessionTools` holds one session's tools; its three public methods are exactly what an
agent may call. The cutoff lives in :class:`BackdatedWeb`, which the server builds; no tool takes
it as an argument, so an agent can neither see nor move it. :func:`tool_schemas` derives the
OpenAI function-calling schemas from the methods, and :func:`call_tool` validates an agent's
arguments against them (unknown, missing or mistyped arguments are refused with a clear error).
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any, get_type_hints

from rap_benchmark.citecast.records import WebDocument
from rap_benchmark.citecast.reward import PredictionError, validate_prediction
from rap_benchmark.citecast.webcorpus import CorpusView

MAX_FETCH_CHARS = 24_000
SEARCH_RESULTS = 8
MAX_QUERY_CHARS = 500  # longer queries are cut (search and snippets alike)
MAX_URL_CHARS = 2_048  # longer urls are refused (and never echoed back)
MAX_JUSTIFICATION_CHARS = 4_000
NOT_FOUND = "not found: this url is not in the archive as of the research cutoff"


class ToolArgumentError(ValueError):
    """A tool was called with unknown, missing or invalid arguments."""


@dataclass(frozen=True)
class BackdatedWeb:
    """Search and fetch over one cutoff view of the corpus (server-side; holds the cutoff)."""

    view: CorpusView  # or a MappedView: anything with cutoff, search_results(query, k) and fetch(url)
    k: int = SEARCH_RESULTS
    max_chars: int = MAX_FETCH_CHARS

    def search(self, query: str) -> list[dict[str, str]]:
        return self.view.search_results(query[:MAX_QUERY_CHARS], k=self.k)

    def fetch(self, url: str) -> dict[str, Any]:
        doc: WebDocument | None = self.view.fetch(url)
        if doc is None:  # never crawled, or crawled only after the cutoff: the same answer
            return {"url": url, "crawl_date": None, "text": "", "error": NOT_FOUND}
        text = doc.text if not doc.title else f"{doc.title}\n\n{doc.text}"
        return {"url": doc.url, "crawl_date": doc.crawl_date.isoformat(), "text": text[: self.max_chars]}


class SessionTools:
    """The tools of one task session. Every public method is one agent-callable tool."""

    def __init__(self, web: BackdatedWeb, submit: Callable[[int, str], dict[str, Any]]) -> None:
        self._web = web
        self._submit = submit

    def web_search(self, query: str) -> list[dict[str, str]]:
        """Search an archived snapshot of the web (arXiv, news and general web pages) as it stood at
        the research cutoff. Returns up to 8 results, each with a title, a url and a snippet.

        Args:
            query: keywords to search for, e.g. a paper title, an author name or a topic.
        """
        return self._web.search(query)

    def web_fetch(self, url: str) -> dict[str, Any]:
        """Fetch the text of a page from the archive, as last crawled on or before the research
        cutoff (text capped at 24,000 characters). Pages not in the archive return an error.

        Args:
            url: the page's url, e.g. one returned by web_search.
        """
        if len(url) > MAX_URL_CHARS:  # refused, and never echoed back
            raise ToolArgumentError(f"web_fetch: url has {len(url):,} characters; at most {MAX_URL_CHARS:,}")
        return self._web.fetch(url)

    def submit_prediction(self, prediction: int, justification: str) -> dict[str, Any]:
        """Submit your final forecast: the total number of citations the paper will have on
        Semantic Scholar on the target date. Call this exactly once; it ends the task.

        Args:
            prediction: the forecast citation count, a nonnegative integer.
            justification: a short explanation of the forecast (recorded, not graded).
        """
        return self._submit(prediction, justification)


TOOL_NAMES: tuple[str, ...] = ("web_search", "web_fetch", "submit_prediction")
_JSON_TYPES = {str: "string", int: "integer", float: "number", bool: "boolean"}


def _doc_parts(fn: Callable[..., Any]) -> tuple[str, dict[str, str]]:
    doc = inspect.getdoc(fn) or ""
    head, _, args = doc.partition("Args:")
    description = " ".join(head.split())
    params: dict[str, str] = {}
    last = None
    for line in args.splitlines():
        m = re.match(r"^\s*(\w+):\s*(.+)$", line)
        if m:
            last = m.group(1)
            params[last] = m.group(2).strip()
        elif last and line.strip():
            params[last] += " " + line.strip()
    return description, params


def tool_schemas() -> list[dict[str, Any]]:
    """OpenAI function-calling schemas of the three tools, derived from their signatures and
    docstrings (the functions are the single source of truth)."""
    out = []
    for name in TOOL_NAMES:
        fn = getattr(SessionTools, name)
        hints = get_type_hints(fn)
        description, arg_docs = _doc_parts(fn)
        props = {}
        for pname in list(inspect.signature(fn).parameters)[1:]:
            props[pname] = {"type": _JSON_TYPES[hints[pname]], "description": arg_docs.get(pname, "")}
        out.append(
            {
                "type": "function",
                "function": {
                    "name": name,
                    "description": description,
                    "parameters": {
                        "type": "object",
                        "properties": props,
                        "required": list(props),
                        "additionalProperties": False,
                    },
                },
            }
        )
    return out


@cache
def _signature(name: str) -> tuple[list[str], dict[str, Any]]:
    """A tool's parameter names and types (resolving string annotations costs ~0.4 ms: once)."""
    fn = getattr(SessionTools, name)
    return list(inspect.signature(fn).parameters)[1:], get_type_hints(fn)


def check_arguments(name: str, arguments: Any) -> dict[str, Any]:
    """Validate an agent's arguments for tool ``name``; return them coerced (prediction -> int)."""
    if name not in TOOL_NAMES:
        raise ToolArgumentError(f"unknown tool {name[:64]!r} (tools: {', '.join(TOOL_NAMES)})")
    if not isinstance(arguments, dict):
        raise ToolArgumentError(f"{name}: arguments must be a JSON object")
    params, hints = _signature(name)
    unknown = sorted(set(arguments) - set(params))
    if unknown:
        raise ToolArgumentError(f"{name}: unknown argument(s) {', '.join(unknown)} (expected {', '.join(params)})")
    missing = [p for p in params if p not in arguments]
    if missing:
        raise ToolArgumentError(f"{name}: missing argument(s) {', '.join(missing)}")
    out: dict[str, Any] = {}
    for p in params:
        value = arguments[p]
        if hints[p] is int:
            try:
                out[p] = validate_prediction(value)
            except PredictionError as exc:
                raise ToolArgumentError(f"{name}: {exc}") from exc
        elif hints[p] is str:
            if not isinstance(value, str):
                raise ToolArgumentError(f"{name}: {p} must be a string, got {type(value).__name__}")
            out[p] = value
        else:  # pragma: no cover - the tool signatures use only str and int
            out[p] = value
    if name == "web_search" and not out["query"].strip():
        raise ToolArgumentError("web_search: query is empty")
    if name == "web_fetch" and not out["url"].strip():
        raise ToolArgumentError("web_fetch: url is empty")
    if name == "submit_prediction":
        out["justification"] = out["justification"][:MAX_JUSTIFICATION_CHARS]
    return out


def call_tool(tools: SessionTools, name: str, arguments: Any) -> Any:
    """Validate and run one tool call."""
    args = check_arguments(name, arguments)
    return getattr(tools, name)(**args)
