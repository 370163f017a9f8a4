"""The frozen crawl-dated web corpus and its point-in-time views.

A corpus is a set of :class:`WebDocument` crawls (a url may have several), loaded from JSON lines
or WARC files (:mod:`rap_benchmark.citecast.warc`). :meth:`WebCorpus.view` is the corpus on a
cutoff day: each url's latest crawl on or before it, with a BM25 index built over that view only,
so not even corpus statistics (IDF, average length) depend on later crawls.
"""

from __future__ import annotations

import datetime as dt
import re
import threading
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from urllib.parse import urlsplit

from rap_benchmark.citecast.records import SubCorpus, WebDocument
from rap_benchmark.core.dates import parse_date
from rap_benchmark.core.serial import read_jsonl, write_jsonl
from rap_benchmark.core.text import query_terms

BM25_K1 = 1.5
BM25_B = 0.75
SNIPPET_CHARS = 280


def normalise_url(url: str) -> str:
    """The lookup key of a url: scheme-less, host lower-cased, default port, fragment and a
    trailing slash dropped (``http://ArXiv.org/abs/x/`` and ``https://arxiv.org/abs/x`` match)."""
    parts = urlsplit(url.strip())
    if not parts.netloc:  # "arxiv.org/abs/x" without a scheme
        parts = urlsplit("https://" + url.strip())
    host = parts.hostname or ""
    if host.startswith("www."):
        host = host[4:]
    port = f":{parts.port}" if parts.port and parts.port not in (80, 443) else ""
    path = parts.path.rstrip("/") or "/"
    query = f"?{parts.query}" if parts.query else ""
    return f"{host}{port}{path}{query}"


def classify_url(url: str, default: SubCorpus = SubCorpus.WEB) -> SubCorpus:
    """arXiv hosts go to the arxiv sub-corpus; everything else to ``default``."""
    host = (urlsplit(url if "//" in url else "https://" + url).hostname or "").lower()
    return SubCorpus.ARXIV if host == "arxiv.org" or host.endswith(".arxiv.org") else default


class CorpusView:
    """The corpus on one cutoff day: latest crawl per url on or before it, and its BM25 index."""

    def __init__(self, documents: Sequence[WebDocument], cutoff: dt.date) -> None:
        latest: dict[str, WebDocument] = {}
        for doc in documents:
            if doc.crawl_date > cutoff:
                continue
            key = normalise_url(doc.url)
            cur = latest.get(key)
            if cur is None or doc.crawl_date >= cur.crawl_date:
                latest[key] = doc
        self.cutoff = cutoff
        self._by_key = latest
        self.keys: tuple[str, ...] = tuple(sorted(latest))
        self.documents: tuple[WebDocument, ...] = tuple(latest[k] for k in self.keys)
        self._index = None
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self.documents)

    def bm25_index(self):  # -> rap_benchmark.bm25.BM25Index
        """The view's BM25 index (built on first use), keyed by position in :attr:`keys`."""
        with self._lock:
            if self._index is None:
                from rap_benchmark.bm25 import BM25Index

                docs = self.documents
                self._index = BM25Index.build(
                    list(self.keys),
                    [f"{d.title}\n{d.text}" for d in docs],
                    [d.crawl_date.isoformat() for d in docs],
                    k1=BM25_K1,
                    b=BM25_B,
                )
            return self._index

    def build_index(self) -> None:
        """Build the BM25 index now (otherwise on the first search)."""
        self.bm25_index()

    def search_results(self, query: str, k: int = 8) -> list[dict[str, str]]:
        """What ``web_search`` shows for the top ``k`` documents by BM25 (ties by url order): title,
        url and a snippet around the query's first term."""
        terms = query_terms(query)
        if not terms or not self.documents:
            return []
        docs = [self._by_key[key] for key in self.bm25_index().search(query, k=k).ids]
        return [search_result(d.title, d.url, flatten(d.text), terms) for d in docs]

    def fetch(self, url: str) -> WebDocument | None:
        """The latest crawl of ``url`` on or before the cutoff, or None."""
        return self._by_key.get(normalise_url(url))


class WebCorpus:
    """Every crawl of every url; views per cutoff are built once and cached."""

    def __init__(self, documents: Iterable[WebDocument]) -> None:
        # one crawl per (url, day): a later duplicate in input order replaces an earlier one
        dedup: dict[tuple[str, dt.date], WebDocument] = {}
        for doc in documents:
            dedup[(normalise_url(doc.url), doc.crawl_date)] = doc
        self.documents: tuple[WebDocument, ...] = tuple(dedup[k] for k in sorted(dedup))
        self._views: dict[dt.date, CorpusView] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self.documents)

    def view(self, cutoff: dt.date | str) -> CorpusView:
        cutoff = parse_date(cutoff)
        with self._lock:
            if cutoff not in self._views:
                self._views[cutoff] = CorpusView(self.documents, cutoff)
            return self._views[cutoff]

    def sub_corpus_counts(self) -> dict[str, int]:
        out = {s.value: 0 for s in SubCorpus}
        for d in self.documents:
            out[d.sub_corpus.value] += 1
        return out

    # -- loading and saving ----------------------------------------------------------------
    @classmethod
    def from_jsonl(cls, path: str | Path) -> WebCorpus:
        return cls(read_jsonl(path, WebDocument.from_dict))

    @classmethod
    def load(cls, paths: Iterable[str | Path], classify: Callable[[str], SubCorpus] = classify_url) -> WebCorpus:
        """JSON lines (``*.jsonl``/``*.json``) and WARC (``*.warc``, ``*.warc.gz``) files, by suffix."""
        from rap_benchmark.citecast.warc import iter_pages

        docs: list[WebDocument] = []
        for p in paths:
            name = str(p)
            if re.search(r"\.warc(\.gz)?$", name):
                docs.extend(WebDocument(w.url, w.date, classify(w.url), w.title, w.text) for w in iter_pages(p))
            elif re.search(r"\.jsonl?$", name):
                docs.extend(read_jsonl(p, WebDocument.from_dict))
            else:
                raise ValueError(f"{p}: expected .jsonl, .warc or .warc.gz")
        return cls(docs)

    def to_jsonl(self, path: str | Path) -> None:
        write_jsonl(path, self.documents)


_SPACE = re.compile(r"\s+")


def flatten(text: str) -> str:
    """``text`` with every run of whitespace made one space, stripped (what snippets cut from)."""
    return _SPACE.sub(" ", text).strip()


def _is_word(c: str) -> bool:
    return c.isalnum() or c == "_"


def first_term(flat: str, terms: Sequence[str]) -> int | None:
    """Where the first whole-word, case-insensitive occurrence of any of ``terms`` (lower-case
    ASCII tokens, as :func:`~rap_benchmark.core.text.query_terms` gives) starts in ``flat``.

    The same position as ``re.search(r"\b(?:t1|t2|...)\b", flat, re.I)``, found with ``str.find``
    (compiling that pattern for every query cost more than the search itself)."""
    low = flat.lower()
    if len(low) != len(flat):  # a character whose lower case is longer: positions would shift
        m = re.search(r"\b(?:" + "|".join(map(re.escape, terms)) + r")\b", flat, re.I) if terms else None
        return m.start() if m else None
    best: int | None = None
    n = len(low)
    for t in terms:
        i = low.find(t, 0, n if best is None else best + len(t))
        while i >= 0 and (best is None or i < best):
            j = i + len(t)
            if (i == 0 or not _is_word(low[i - 1])) and (j == n or not _is_word(low[j])):
                best = i
                break
            i = low.find(t, i + 1, n if best is None else best + len(t))
    return best


def search_result(title: str, url: str, flat: str, terms: Sequence[str]) -> dict[str, str]:
    """One ``web_search`` result: the title (the url when there is none), the url, and a snippet."""
    return {"title": title or url, "url": url, "snippet": snippet_of_flat(flat, terms)}


def snippet_of_flat(flat: str, terms: Sequence[str], width: int = SNIPPET_CHARS) -> str:
    """A window of already-flattened text (:func:`flatten`) around the first whole-word occurrence of a term."""
    best = first_term(flat, terms)
    start = 0 if best is None else max(0, best - width // 4)
    if start > 0:  # begin on a word boundary
        space = flat.find(" ", start, best)
        start = space + 1 if space >= 0 else start
    piece = flat[start : start + width]
    return ("..." if start > 0 else "") + piece + ("..." if start + width < len(flat) else "")
