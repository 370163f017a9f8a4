"""Harvest the cohort: arXiv API listings and v1 metadata, and the Semantic Scholar snapshot.

All network goes through one injectable :data:`Fetch` (``HttpRequest -> bytes``), so parsing and
paging are tested offline on recorded fixtures; :func:`httpx_fetch` is the real one.

arXiv (https://info.arxiv.org/help/api/user-manual.html): the month is listed by day-sliced
``submittedDate`` queries, paged politely; the listing gives each paper's latest version, where a
withdrawal shows (comment or abstract). Prompt metadata is then fetched as version 1
(``id_list=<id>v1``), since later revisions can carry post-cutoff information; only title,
abstract, authors, primary category and the v1 ``<published>`` day are kept.

Semantic Scholar: ``POST /graph/v1/paper/batch`` with ``{"ids": ["ARXIV:2601.01234", ...]}``
returns a list aligned with the ids, ``null`` for unknown papers.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import sys
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from rap_benchmark.citecast.records import ARXIV_2601, CitationRecord, PaperMeta
from rap_benchmark.core.records import is_count

ARXIV_API = "https://export.arxiv.org/api/query"
S2_BATCH_API = "https://api.semanticscholar.org/graph/v1/paper/batch"
S2_FIELDS = "paperId,title,citationCount"
S2_BATCH_MAX = 500  # the batch endpoint's documented maximum ids per request
ARXIV_DELAY_S = 3.0  # arXiv asks for no more than one request every three seconds

_NS = {
    "atom": "http://www.w3.org/2005/Atom",
    "arxiv": "http://arxiv.org/schemas/atom",
    "opensearch": "http://a9.com/-/spec/opensearch/1.1/",
}
_ABS_ID = re.compile(r"arxiv\.org/abs/(?P<id>[^\s]+?)(?:v(?P<v>\d+))?$")
_WITHDRAWN_COMMENT = re.compile(r"\bwithdraw(?:n|al)\b", re.I)
_WITHDRAWN_ABSTRACT = re.compile(
    r"\b(?:paper|submission|article|manuscript|work|preprint) (?:has been|is being|was|is) withdrawn\b"
    r"|\bwithdrawn by (?:the )?authors?\b",
    re.I,
)
_WS = re.compile(r"\s+")


class HarvestError(RuntimeError):
    """An API answered with an error feed, a malformed document or an unexpected shape."""


@dataclass(frozen=True)
class HttpRequest:
    """One HTTP request, as data (so tests can record and answer it)."""

    method: str
    url: str
    params: tuple[tuple[str, str], ...] = ()
    json_body: Any = None
    headers: tuple[tuple[str, str], ...] = ()


Fetch = Callable[[HttpRequest], bytes]
"""Performs a request and returns the response body; raises on transport/HTTP errors."""


def httpx_fetch(timeout_s: float = 60.0, retries: int = 4, backoff_s: float = 5.0) -> Fetch:
    """A real :data:`Fetch` over httpx, retrying 429/5xx and dropped connections with exponential
    backoff; an unreachable host fails at once; every failure is a one-line ``ServiceError``."""
    import httpx

    from rap_benchmark.core.errors import ServiceError

    client = httpx.Client(timeout=timeout_s, follow_redirects=True, headers={"User-Agent": "rap-benchmark-citecast"})

    def fetch(req: HttpRequest) -> bytes:
        for attempt in range(retries + 1):
            try:
                resp = client.request(
                    req.method, req.url, params=list(req.params), json=req.json_body, headers=dict(req.headers)
                )
            except (httpx.ConnectError, httpx.ConnectTimeout, httpx.UnsupportedProtocol) as exc:
                raise ServiceError(
                    f"cannot reach {httpx.URL(req.url).host} ({exc}); building the harvest instance needs network "
                    "access to the arXiv API and Semantic Scholar"
                ) from exc
            except httpx.TransportError as exc:  # a dropped or timed-out exchange: transient
                if attempt == retries:
                    raise ServiceError(f"{req.url}: {exc} (after {retries + 1} attempts)") from exc
            else:
                if not resp.is_error:
                    return resp.content
                if attempt == retries or not (resp.status_code == 429 or resp.status_code >= 500):
                    raise ServiceError(f"{req.url}: HTTP {resp.status_code} {resp.reason_phrase}")
            time.sleep(backoff_s * 2**attempt)
        raise HarvestError(f"{req.url}: gave up after {retries + 1} attempts")

    return fetch


def _text(el: ET.Element | None) -> str:
    return _WS.sub(" ", el.text or "").strip() if el is not None else ""


# -- arXiv ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ArxivEntry:
    """One parsed Atom entry: the prompt-safe metadata plus what exclusion needs to know."""

    meta: PaperMeta
    version: int
    withdrawn: bool


@dataclass(frozen=True)
class AtomPage:
    entries: tuple[ArxivEntry, ...]
    total_results: int
    start_index: int


def day_slices(year: int, month: int, lead_days: int = 0) -> list[dt.date]:
    """The days of a month (plus ``lead_days`` days before it, where late submissions of the
    previous month can still receive this month's ids)."""
    first = dt.date(year, month, 1)
    nxt = dt.date(year + month // 12, month % 12 + 1, 1)
    start = first - dt.timedelta(days=lead_days)
    return [start + dt.timedelta(days=i) for i in range((nxt - start).days)]


def submitted_date_query(day: dt.date, category: str | None = None) -> str:
    """``submittedDate:[YYYYMMDD0000 TO YYYYMMDD2359]`` for one day, optionally ANDed with a category."""
    stamp = day.strftime("%Y%m%d")
    q = f"submittedDate:[{stamp}0000 TO {stamp}2359]"
    return f"cat:{category} AND {q}" if category else q


def listing_request(day: dt.date, start: int, page_size: int, category: str | None = None) -> HttpRequest:
    return HttpRequest(
        "GET",
        ARXIV_API,
        params=(
            ("search_query", submitted_date_query(day, category)),
            ("start", str(start)),
            ("max_results", str(page_size)),
            ("sortBy", "submittedDate"),
            ("sortOrder", "ascending"),
        ),
    )


def v1_request(arxiv_ids: Sequence[str]) -> HttpRequest:
    """Explicit version-1 metadata for up to a page of ids (``id_list=<id>v1,...``)."""
    ids = ",".join(f"{a}v1" for a in arxiv_ids)
    return HttpRequest(
        "GET", ARXIV_API, params=(("id_list", ids), ("start", "0"), ("max_results", str(len(arxiv_ids))))
    )


def parse_atom(payload: bytes) -> AtomPage:
    """Parse an arXiv API Atom feed. Raises :class:`HarvestError` on an API error feed."""
    try:
        root = ET.fromstring(payload)
    except ET.ParseError as exc:
        raise HarvestError(f"not an Atom document: {exc}") from exc
    if root.tag != f"{{{_NS['atom']}}}feed":
        raise HarvestError(f"not an Atom feed (root {root.tag})")
    total = int(_text(root.find("opensearch:totalResults", _NS)) or 0)
    start = int(_text(root.find("opensearch:startIndex", _NS)) or 0)
    entries = []
    for el in root.findall("atom:entry", _NS):
        raw_id = _text(el.find("atom:id", _NS))
        if "api/errors" in raw_id:
            raise HarvestError(f"arXiv API error: {_text(el.find('atom:summary', _NS))}")
        m = _ABS_ID.search(raw_id)
        if not m:
            raise HarvestError(f"unexpected entry id {raw_id!r}")
        primary = el.find("arxiv:primary_category", _NS)
        cats = [c.get("term", "") for c in el.findall("atom:category", _NS)]
        abstract = _text(el.find("atom:summary", _NS))
        comment = _text(el.find("arxiv:comment", _NS))  # read for the withdrawal flag only
        published = _text(el.find("atom:published", _NS))
        meta = PaperMeta(
            arxiv_id=m.group("id"),
            title=_text(el.find("atom:title", _NS)),
            abstract=abstract,
            authors=tuple(_text(a.find("atom:name", _NS)) for a in el.findall("atom:author", _NS)),
            primary_category=primary.get("term", "") if primary is not None else (cats[0] if cats else ""),
            date=dt.date.fromisoformat(published[:10]),
        )
        withdrawn = bool(_WITHDRAWN_COMMENT.search(comment) or _WITHDRAWN_ABSTRACT.search(abstract))
        entries.append(ArxivEntry(meta, int(m.group("v") or 1), withdrawn))
    return AtomPage(tuple(entries), total, start)


@dataclass
class ArxivHarvester:
    """Lists a month day by day and fetches v1 metadata, politely, through ``fetch``."""

    fetch: Fetch
    page_size: int = 500
    delay_s: float = ARXIV_DELAY_S
    sleep: Callable[[float], None] = time.sleep
    _requests: int = field(default=0, init=False)

    def _get(self, req: HttpRequest) -> AtomPage:
        if self._requests and self.delay_s > 0:
            self.sleep(self.delay_s)
        self._requests += 1
        return parse_atom(self.fetch(req))

    def list_day(self, day: dt.date, category: str | None = None) -> Iterator[ArxivEntry]:
        """Every entry submitted on ``day``, following pages until the total is reached."""
        start = 0
        while True:
            page = self._get(listing_request(day, start, self.page_size, category))
            yield from page.entries
            start += len(page.entries)
            if not page.entries or start >= page.total_results:
                return

    def list_month(
        self, year: int, month: int, *, lead_days: int = 0, category: str | None = None, progress: bool = False
    ) -> list[ArxivEntry]:
        """The month's listing, 2601-style id filter applied by the caller (see :func:`cohort_ids`)."""
        from tqdm import tqdm

        days = tqdm(day_slices(year, month, lead_days), desc="arXiv days", file=sys.stderr, disable=not progress)
        out: dict[str, ArxivEntry] = {}
        for day in days:
            for entry in self.list_day(day, category):
                out.setdefault(entry.meta.arxiv_id, entry)
        return [out[k] for k in sorted(out)]

    def fetch_v1(self, arxiv_ids: Sequence[str], batch: int = 100) -> dict[str, PaperMeta]:
        """Version-1 metadata for each id (``id_list=<id>v1``); ids the API omits are absent."""
        out: dict[str, PaperMeta] = {}
        for i in range(0, len(arxiv_ids), batch):
            page = self._get(v1_request(arxiv_ids[i : i + batch]))
            for entry in page.entries:
                if entry.version != 1:
                    raise HarvestError(f"{entry.meta.arxiv_id}: asked for v1, got v{entry.version}")
                out[entry.meta.arxiv_id] = entry.meta
        return out


def cohort_ids(entries: Iterable[ArxivEntry], pattern: re.Pattern[str] = ARXIV_2601) -> list[str]:
    """Sorted ids matching the cohort pattern (2601.* by default)."""
    return sorted({e.meta.arxiv_id for e in entries if pattern.match(e.meta.arxiv_id)})


# -- Semantic Scholar ----------------------------------------------------------------------------
def s2_batch_request(arxiv_ids: Sequence[str], api_key: str | None = None) -> HttpRequest:
    if len(arxiv_ids) > S2_BATCH_MAX:
        raise ValueError(f"at most {S2_BATCH_MAX} ids per batch request, got {len(arxiv_ids)}")
    headers = (("x-api-key", api_key),) if api_key else ()
    return HttpRequest(
        "POST",
        S2_BATCH_API,
        params=(("fields", S2_FIELDS),),
        json_body={"ids": [f"ARXIV:{a}" for a in arxiv_ids]},
        headers=headers,
    )


def parse_s2_batch(payload: bytes, arxiv_ids: Sequence[str], snapshot_date: dt.date) -> list[CitationRecord]:
    """Parse a batch response aligned with ``arxiv_ids``; ``null`` entries become missing rows."""
    try:
        data = json.loads(payload)
    except ValueError as exc:  # a proxy's HTML page, a cut body
        raise HarvestError(f"not a Semantic Scholar batch reply (not JSON: {exc})") from exc
    if isinstance(data, dict):  # error bodies are objects: {"error": ...} or {"message": ...}
        raise HarvestError(f"Semantic Scholar error: {data.get('error') or data.get('message') or data}")
    if not isinstance(data, list) or len(data) != len(arxiv_ids):
        got = f"a list of {len(data)}" if isinstance(data, list) else type(data).__name__
        raise HarvestError(f"expected a list of {len(arxiv_ids)} entries, got {got}")
    rows = []
    for aid, item in zip(arxiv_ids, data, strict=True):
        if item is None:
            rows.append(
                CitationRecord(aid, paper_id=None, title=None, citation_count=None, snapshot_date=snapshot_date)
            )
            continue
        count = item.get("citationCount")
        if count is not None and not is_count(count):  # JSON true or 3.5 is no count, not 1 or 3
            raise HarvestError(f"{aid}: citationCount {count!r} is not a nonnegative integer")
        rows.append(
            CitationRecord(
                aid,
                paper_id=item.get("paperId"),
                title=item.get("title"),
                citation_count=count,
                snapshot_date=snapshot_date,
            )
        )
    return rows


def snapshot_citations(
    fetch: Fetch,
    arxiv_ids: Sequence[str],
    snapshot_date: dt.date,
    *,
    batch: int = S2_BATCH_MAX,
    api_key: str | None = None,
    delay_s: float = 1.0,
    sleep: Callable[[float], None] = time.sleep,
) -> list[CitationRecord]:
    """One batch pass over the cohort: a :class:`CitationRecord` per id, in input order."""
    out: list[CitationRecord] = []
    for i in range(0, len(arxiv_ids), batch):
        if i and delay_s > 0:
            sleep(delay_s)
        chunk = list(arxiv_ids[i : i + batch])
        out.extend(parse_s2_batch(fetch(s2_batch_request(chunk, api_key)), chunk, snapshot_date))
    return out
