"""The crawl-dated corpus (JSONL, WARC), its cutoff views and the backdated tools."""

from __future__ import annotations

import datetime as dt
import gzip
import json
from collections.abc import Iterable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rap_benchmark.citecast.records import SubCorpus, WebDocument
from rap_benchmark.citecast.tools import (
    NOT_FOUND,
    BackdatedWeb,
    SessionTools,
    ToolArgumentError,
    call_tool,
    tool_schemas,
)
from rap_benchmark.citecast.warc import WarcPage, iter_pages
from rap_benchmark.citecast.webcorpus import WebCorpus, flatten, normalise_url, snippet_of_flat
from rap_benchmark.core.fsio import atomic_open
from rap_benchmark.core.text import query_terms

FIX = Path(__file__).parent / "fixtures" / "citecast"
CUTOFF = dt.date(2026, 1, 31)


def write_warc(path: str | Path, pages: Iterable[WarcPage], *, gzipped: bool = False) -> None:
    """Write pages as WARC/1.0 ``response`` records holding HTML (one gzip member per record
    when ``gzipped``), so corpora round-trip through :func:`iter_pages`."""
    import hashlib
    import html as html_mod

    with atomic_open(path, "wb") as out:
        for page in pages:
            body = (
                f"<!DOCTYPE html><html><head><title>{html_mod.escape(page.title)}</title></head>"
                f"<body><p>{html_mod.escape(page.text)}</p></body></html>"
            ).encode()
            http = (
                b"HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\n"
                + f"Content-Length: {len(body)}\r\n\r\n".encode()
                + body
            )
            rid = hashlib.sha256(f"{page.url}\n{page.date}".encode()).hexdigest()
            head = (
                "WARC/1.0\r\n"
                "WARC-Type: response\r\n"
                f"WARC-Record-ID: <urn:sha256:{rid}>\r\n"
                f"WARC-Date: {page.date.isoformat()}T00:00:00Z\r\n"
                f"WARC-Target-URI: {page.url}\r\n"
                "Content-Type: application/http; msgtype=response\r\n"
                f"Content-Length: {len(http)}\r\n\r\n"
            ).encode()
            record = head + http + b"\r\n\r\n"
            out.write(gzip.compress(record, mtime=0) if gzipped else record)


def tools_for(corpus: WebCorpus, cutoff: dt.date = CUTOFF, **kw) -> SessionTools:
    return SessionTools(BackdatedWeb(corpus.view(cutoff), **kw), lambda p, j: {"prediction": p})


def test_jsonl_corpus_latest_crawl_on_or_before_cutoff() -> None:
    corpus = WebCorpus.from_jsonl(FIX / "corpus.jsonl")
    assert len(corpus) == 5
    t = tools_for(corpus)
    page = t.web_fetch("https://news.example.com/2026/01/sparse-routing")
    assert page["crawl_date"] == "2026-01-20" and "cited by 3 papers" in page["text"]
    assert "41" not in page["text"]  # the June re-crawl is never served
    tracker = t.web_fetch("https://citations.example.org/arxiv/2601.01234")  # crawled only after the cutoff
    never = t.web_fetch("https://nowhere.example.com/x")
    assert tracker["error"] == never["error"] == NOT_FOUND and tracker["text"] == "" and tracker["crawl_date"] is None
    hits = t.web_search("sparse routing citations")
    urls = [h["url"] for h in hits]
    assert "https://citations.example.org/arxiv/2601.01234" not in urls
    assert set(hits[0]) == {"title", "url", "snippet"}
    # after the June crawl date, a later cutoff serves the later page (the view is per cutoff)
    assert (
        "41"
        in tools_for(corpus, dt.date(2026, 7, 1)).web_fetch("https://news.example.com/2026/01/sparse-routing")["text"]
    )


def test_fetch_caps_text_and_normalises_urls() -> None:
    doc = WebDocument("https://Example.org/long/", CUTOFF, SubCorpus.WEB, "Long", "word " * 10_000)
    t = tools_for(WebCorpus([doc]))
    page = t.web_fetch("http://www.example.org/long")
    assert len(page["text"]) == 24_000 and page["crawl_date"] == CUTOFF.isoformat()
    assert normalise_url("https://arxiv.org/abs/2601.01234/") == normalise_url("http://www.ArXiv.org/abs/2601.01234#x")


@pytest.mark.parametrize("name", ["crawl.warc", "crawl.warc.gz"])
def test_warc_fixture_loads(name: str) -> None:
    corpus = WebCorpus.load([FIX / name])
    urls = sorted({d.url for d in corpus.documents})
    assert urls == [
        "https://blog.example.net/notes/routing.txt",
        "https://blog.example.net/posts/long-context-routing",
        "https://news.example.com/2026/01/routing-reactions",
    ]  # the 404, request, warcinfo and revisit records are skipped
    t = tools_for(corpus)
    blog = t.web_fetch("https://blog.example.net/posts/long-context-routing")
    assert blog["crawl_date"] == "2026-01-22" and "cited by 3 papers" in blog["text"]
    assert "999" not in blog["text"] and "color" not in blog["text"]  # script and style dropped
    assert "&" in blog["text"]  # entities decoded
    assert t.web_fetch("https://news.example.com/2026/01/routing-reactions")["text"].startswith(
        "Early reactions"
    )  # de-chunked
    assert all(d.sub_corpus is SubCorpus.WEB for d in corpus.documents)


def test_warc_round_trip(tmp_path) -> None:
    pages = [WarcPage("https://arxiv.org/abs/2601.00001", dt.date(2026, 1, 2), "A <title>", "Body & text")]
    for gz in (False, True):
        path = tmp_path / f"x.warc{'.gz' if gz else ''}"
        write_warc(path, pages, gzipped=gz)
        back = list(iter_pages(path))
        assert back == pages
        corpus = WebCorpus.load([path])
        assert corpus.documents[0].sub_corpus is SubCorpus.ARXIV


def test_tool_schemas_come_from_the_functions() -> None:
    schemas = {s["function"]["name"]: s["function"] for s in tool_schemas()}
    assert list(schemas) == ["web_search", "web_fetch", "submit_prediction"]
    assert schemas["submit_prediction"]["parameters"]["properties"]["prediction"]["type"] == "integer"
    assert schemas["web_search"]["parameters"]["required"] == ["query"]
    assert "cutoff" not in json.dumps(schemas["web_search"]["parameters"])  # not an agent-visible parameter
    t = tools_for(WebCorpus([]))
    with pytest.raises(ToolArgumentError, match="unknown argument"):
        call_tool(t, "web_search", {"query": "x", "cutoff": "2026-12-31"})
    with pytest.raises(ToolArgumentError, match="missing"):
        call_tool(t, "submit_prediction", {"prediction": 3})
    with pytest.raises(ToolArgumentError, match="nonnegative integer"):
        call_tool(t, "submit_prediction", {"prediction": -2, "justification": ""})


def test_snippet_window() -> None:
    text = "alpha " * 100 + "needle in the text " + "omega " * 100
    s = snippet_of_flat(flatten(text), query_terms("needle"))
    assert "needle" in s and s.startswith("...") and len(s) <= 286


WORDS = ["routing", "sparse", "language", "model", "graph", "protein", "citations", "vision", "speech", "robot"]
day = st.dates(dt.date(2025, 10, 1), dt.date(2026, 6, 30))


@st.composite
def corpora(draw: st.DrawFn) -> list[WebDocument]:
    n_urls = draw(st.integers(1, 12))
    docs = []
    for u in range(n_urls):
        for d in draw(st.lists(day, min_size=1, max_size=3, unique=True)):
            words = draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=12))
            marker = " zzfuture" if d > CUTOFF else " pastpage"
            docs.append(
                WebDocument(
                    f"https://site{u % 3}.example.com/p{u}", d, SubCorpus.WEB, f"page {u}", " ".join(words) + marker
                )
            )
    return docs


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(corpora(), st.lists(st.sampled_from([*WORDS, "zzfuture", "pastpage"]), min_size=1, max_size=4))
def test_no_tool_ever_returns_a_post_cutoff_crawl(docs: list[WebDocument], query: list[str]) -> None:
    corpus = WebCorpus(docs)
    t = tools_for(corpus)
    q = " ".join(query)
    hits = t.web_search(q)
    assert "zzfuture" not in json.dumps(hits)
    for url in sorted({d.url for d in docs}):
        page = t.web_fetch(url)
        assert "zzfuture" not in json.dumps(page)
        pre = [d for d in docs if d.url == url and d.crawl_date <= CUTOFF]
        if pre:
            latest = max(pre, key=lambda d: d.crawl_date)
            assert page["crawl_date"] == latest.crawl_date.isoformat() and latest.text in page["text"]
        else:
            assert page["error"] == NOT_FOUND and page["crawl_date"] is None
    for h in hits:
        served = t.web_fetch(h["url"])
        assert served["crawl_date"] is not None and dt.date.fromisoformat(served["crawl_date"]) <= CUTOFF
