"""The agent's tools: plain typed functions whose signature and docstring are their schema.

:class:`SessionTools`' three public methods are exactly what an agent may call. The cutoff lives
in the server-built :class:`BackdatedWeb`, never in a tool argument. Schemas and argument checks
follow the project's one rule (``rap_benchmark.tools``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rap_benchmark.citecast.records import WebDocument
from rap_benchmark.citecast.reward import PredictionError, validate_prediction
from rap_benchmark.citecast.webcorpus import CorpusView
from rap_benchmark.tools import ToolArgumentError, check_arguments, tool_schema

MAX_FETCH_CHARS = 24_000
SEARCH_RESULTS = 8
MAX_QUERY_CHARS = 500  # longer queries are cut (search and snippets alike)
MAX_URL_CHARS = 2_048  # longer urls are refused (and never echoed back)
MAX_JUSTIFICATION_CHARS = 4_000
NOT_FOUND = "not found: this url is not in the archive as of the research cutoff"


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
    """The tools of one task session. Every public method is one agent-callable tool; a search or
    fetch calls ``reserve`` (which takes a call from the session's budget or raises) once its
    arguments are checked."""

    def __init__(
        self,
        web: BackdatedWeb,
        submit: Callable[[int, str], dict[str, Any]],
        reserve: Callable[[], None] = lambda: None,
    ) -> None:
        self._web = web
        self._submit = submit
        self._reserve = reserve

    def web_search(self, query: str) -> list[dict[str, str]]:
        """Search an archived snapshot of the web (arXiv, news and general web pages) as it stood at
        the research cutoff. Returns up to 8 results, each with a title, a url and a snippet.

        Args:
            query: keywords to search for, e.g. a paper title, an author name or a topic.
        """
        if not query.strip():
            raise ToolArgumentError("web_search: query is empty")
        self._reserve()
        return self._web.search(query)

    def web_fetch(self, url: str) -> dict[str, Any]:
        """Fetch the text of a page from the archive, as last crawled on or before the research
        cutoff (text capped at 24,000 characters). Pages not in the archive return an error.

        Args:
            url: the page's url, e.g. one returned by web_search.
        """
        if not url.strip():
            raise ToolArgumentError("web_fetch: url is empty")
        if len(url) > MAX_URL_CHARS:  # refused, and never echoed back
            raise ToolArgumentError(f"web_fetch: url has {len(url):,} characters; at most {MAX_URL_CHARS:,}")
        self._reserve()
        return self._web.fetch(url)

    def submit_prediction(self, prediction: int, justification: str) -> dict[str, Any]:
        """Submit your final forecast: the total number of citations the paper will have on
        Semantic Scholar on the target date. Call this exactly once; it ends the task.

        Args:
            prediction: the forecast citation count, a nonnegative integer.
            justification: a short explanation of the forecast (recorded, not graded).
        """
        try:
            value = validate_prediction(prediction)
        except PredictionError as exc:
            raise ToolArgumentError(f"submit_prediction: {exc}") from exc
        return self._submit(value, justification[:MAX_JUSTIFICATION_CHARS])


TOOL_NAMES: tuple[str, ...] = ("web_search", "web_fetch", "submit_prediction")


def tool_schemas() -> list[dict[str, Any]]:
    """OpenAI function-calling schemas of the three tools, derived from their signatures and docstrings."""
    return [tool_schema(getattr(SessionTools, name)) for name in TOOL_NAMES]


def call_tool(tools: SessionTools, name: str, arguments: Any) -> Any:
    """Validate (names and types; the tool refuses values it cannot take) and run one tool call."""
    if name not in TOOL_NAMES:
        raise ToolArgumentError(f"unknown tool {name[:64]!r} (tools: {', '.join(TOOL_NAMES)})")
    fn = getattr(tools, name)
    return fn(**check_arguments(fn, arguments))
