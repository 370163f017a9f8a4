"""Harvest parsing and paging on recorded real-format arXiv Atom and Semantic Scholar fixtures."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest

from rap_benchmark.citecast.harvest import (
    ArxivHarvester,
    HarvestError,
    HttpRequest,
    cohort_ids,
    day_slices,
    parse_atom,
    parse_s2_batch,
    s2_batch_request,
    snapshot_citations,
    submitted_date_query,
    v1_request,
)

FIX = Path(__file__).parent / "fixtures" / "citecast"
SNAP = dt.date(2026, 8, 23)


def read(name: str) -> bytes:
    return (FIX / name).read_bytes()


def test_day_slices_and_query_strings() -> None:
    days = day_slices(2026, 1)
    assert len(days) == 31 and days[0] == dt.date(2026, 1, 1) and days[-1] == dt.date(2026, 1, 31)
    assert day_slices(2026, 1, lead_days=2)[0] == dt.date(2025, 12, 30)
    assert submitted_date_query(dt.date(2026, 1, 5)) == "submittedDate:[202601050000 TO 202601052359]"
    assert submitted_date_query(dt.date(2026, 1, 5), "cs.CL").startswith("cat:cs.CL AND submittedDate:")
    req = v1_request(["2601.01234", "2601.05678"])
    assert dict(req.params)["id_list"] == "2601.01234v1,2601.05678v1"


def test_parse_listing_keeps_only_v1_safe_fields() -> None:
    page = parse_atom(read("arxiv_listing_p1.xml"))
    assert page.total_results == 3 and page.start_index == 0
    e = page.entries[0]
    assert e.meta.arxiv_id == "2601.01234" and e.version == 2
    assert e.meta.title == "Sparse Mixture Routing for Long-Context Language Models"  # whitespace folded
    assert e.meta.authors == ("Jane Doe", "Wei Zhang")
    assert e.meta.primary_category == "cs.CL"
    assert e.meta.date == dt.date(2026, 1, 5)
    assert not e.withdrawn
    blob = json.dumps(e.meta.to_dict())
    for mutable in ("ICML", "10.48550", "Proceedings", "14 pages"):
        assert mutable not in blob  # comments, journal ref and DOI never stored


def test_withdrawn_flag_and_error_feed() -> None:
    page = parse_atom(read("arxiv_listing_p2.xml"))
    assert page.entries[0].withdrawn
    with pytest.raises(HarvestError, match="incorrect id format"):
        parse_atom(read("arxiv_error.xml"))
    with pytest.raises(HarvestError):
        parse_atom(b"<html>rate limited</html>")


class Recorded:
    """A fetch answering recorded responses by request, logging every request."""

    def __init__(self) -> None:
        self.requests: list[HttpRequest] = []

    def __call__(self, req: HttpRequest) -> bytes:
        self.requests.append(req)
        params = dict(req.params)
        if "id_list" in params:
            return read("arxiv_v1.xml")
        if "202601050000" in params.get("search_query", ""):
            return read("arxiv_listing_p1.xml" if params["start"] == "0" else "arxiv_listing_p2.xml")
        return read("arxiv_empty_day.xml")


def test_month_listing_pages_politely_and_fetches_v1() -> None:
    fetch, sleeps = Recorded(), []
    h = ArxivHarvester(fetch, page_size=2, delay_s=3.0, sleep=sleeps.append)
    listing = h.list_month(2026, 1)
    assert [e.meta.arxiv_id for e in listing] == ["2512.30001", "2601.01234", "2601.05678"]
    day5 = [dict(r.params) for r in fetch.requests if "20260105" in dict(r.params)["search_query"]]
    assert [p["start"] for p in day5] == ["0", "2"]  # paged until totalResults
    assert len(fetch.requests) == 31 + 1  # one request per day, two on the 5th
    assert sleeps == [3.0] * (len(fetch.requests) - 1)  # a polite delay between every request
    ids = cohort_ids(listing)
    assert ids == ["2601.01234", "2601.05678"]  # 2512.* dropped
    v1 = h.fetch_v1(ids)
    assert v1["2601.01234"].title == "Sparse Routing for Long-Context Language Models"  # v1, not v2
    assert dict(fetch.requests[-1].params)["id_list"] == "2601.01234v1,2601.05678v1"


def test_s2_batch_parse_nulls_and_snapshot_date() -> None:
    ids = ["2601.01234", "2601.00002", "2601.09999", "2601.05678"]
    rows = parse_s2_batch(read("s2_batch.json"), ids, SNAP)
    assert [r.arxiv_id for r in rows] == ids
    assert rows[0].citation_count == 17 and not rows[0].missing
    assert rows[1].missing and rows[1].paper_id is None  # null entry
    assert rows[3].missing  # a record without a count is missing too
    assert all(r.snapshot_date == SNAP for r in rows)
    with pytest.raises(HarvestError, match="Unrecognized"):
        parse_s2_batch(read("s2_error.json"), ids, SNAP)
    with pytest.raises(HarvestError):
        parse_s2_batch(read("s2_batch.json"), ids[:2], SNAP)  # misaligned


@pytest.mark.parametrize("count", [True, 3.5, 3.0, "3", -1])
def test_s2_batch_refuses_a_count_that_is_not_a_nonnegative_integer(count: object) -> None:
    """Regression: the harvester cast citationCount with int(), so JSON true counted as 1 and 3.5 as
    3, before the record's own count check could see it."""
    payload = json.dumps([{"paperId": "p1", "title": "T", "citationCount": count}]).encode()
    with pytest.raises(HarvestError, match="not a nonnegative integer"):
        parse_s2_batch(payload, ["2601.01234"], SNAP)
    assert (
        parse_s2_batch(payload.replace(json.dumps(count).encode(), b"3"), ["2601.01234"], SNAP)[0].citation_count == 3
    )


def test_s2_request_format_and_batching() -> None:
    req = s2_batch_request(["2601.01234"], api_key="k")
    assert req.method == "POST" and req.url.endswith("/graph/v1/paper/batch")
    assert req.json_body == {"ids": ["ARXIV:2601.01234"]}
    assert ("fields", "paperId,title,citationCount") in req.params and ("x-api-key", "k") in req.headers
    seen: list[list[str]] = []

    def fetch(r: HttpRequest) -> bytes:
        seen.append(r.json_body["ids"])
        return json.dumps([{"paperId": i, "title": "t", "citationCount": 1} for i in r.json_body["ids"]]).encode()

    rows = snapshot_citations(fetch, [f"2601.{i:05d}" for i in range(5)], SNAP, batch=2, delay_s=0)
    assert [len(s) for s in seen] == [2, 2, 1] and len(rows) == 5


def test_build_from_recorded_harvest(tmp_path) -> None:
    """End to end on recorded responses: listing -> v1 -> S2 snapshot -> tasks -> corpus -> files."""
    from rap_benchmark.citecast.build import build_from_harvest
    from rap_benchmark.citecast.instance import load_instance

    arxiv = Recorded()

    def fetch(req: HttpRequest) -> bytes:
        if req.method == "POST":
            counts = {"2601.01234": 17, "2601.05678": 2}
            return json.dumps(
                [
                    {"paperId": f"s2-{i}", "title": "t", "citationCount": counts[i.removeprefix("ARXIV:")]}
                    for i in req.json_body["ids"]
                ]
            ).encode()
        return arxiv(req)

    out = build_from_harvest(
        tmp_path / "inst",
        [FIX / "corpus.jsonl", FIX / "crawl.warc.gz"],
        fetch=fetch,
        lead_days=0,
        n_total=10,
        arxiv_delay_s=0,
        sleep=lambda s: None,
    )
    inst = load_instance(out)
    assert [t.paper.arxiv_id for t in inst.tasks.values()] == ["2601.01234"]  # the withdrawn paper is excluded
    task = next(iter(inst.tasks.values()))
    assert task.target == 17 and task.band == "11-25" and task.paper.title.startswith("Sparse Routing")  # v1 title
    assert inst.manifest["provenance"]["n_cohort"] == 2 and len(inst.corpus) == 9


@pytest.mark.parametrize(
    ("answers", "outcome", "sleeps"),
    [
        (["200"], "ok:200", []),
        (["429", "503", "200"], "ok:200", [1.0, 2.0]),
        (["drop", "200"], "ok:200", [1.0]),
        (["404"], "ServiceError:HTTP 404", []),
        (["500", "500", "500"], "ServiceError:HTTP 500", [1.0, 2.0]),
        (["drop", "drop", "drop"], "ServiceError:after 3 attempts", [1.0, 2.0]),
        (["connect"], "ServiceError:cannot reach", []),
    ],
)
def test_httpx_fetch_retries_only_transient_failures(monkeypatch, answers, outcome, sleeps) -> None:
    """429, 5xx and dropped exchanges are retried with doubling pauses (two retries here); any other
    HTTP error, an unreachable host and the last failed attempt end in one ServiceError."""
    import httpx

    from rap_benchmark.citecast import harvest
    from rap_benchmark.core.errors import ServiceError

    queue = iter(answers)

    def answer(request: httpx.Request) -> httpx.Response:
        kind = next(queue)
        if kind == "drop":
            raise httpx.ReadTimeout("timed out", request=request)
        if kind == "connect":
            raise httpx.ConnectError("refused", request=request)
        return httpx.Response(int(kind), content=kind.encode())

    real_client = httpx.Client
    monkeypatch.setattr(httpx, "Client", lambda **kw: real_client(transport=httpx.MockTransport(answer), **kw))
    slept: list[float] = []
    monkeypatch.setattr(harvest.time, "sleep", slept.append)
    fetch = harvest.httpx_fetch(retries=2, backoff_s=1.0)
    kind, _, detail = outcome.partition(":")
    if kind == "ok":
        assert fetch(HttpRequest("GET", "https://example.org/x")) == detail.encode()
    else:
        with pytest.raises(ServiceError, match=detail):
            fetch(HttpRequest("GET", "https://example.org/x"))
    assert slept == sleeps and next(queue, None) is None


@pytest.mark.parametrize(
    ("payload", "says"), [(b"<html>busy</html>", "not JSON"), (b"null", "got NoneType"), (b"7", "got int")]
)
def test_s2_batch_refuses_a_reply_that_is_not_a_list_in_one_error(payload: bytes, says: str) -> None:
    """Regression: a non-JSON body was a bare JSONDecodeError, and JSON null or a number a TypeError
    from ``len(data)`` inside the message meant to refuse it."""
    with pytest.raises(HarvestError, match=says):
        parse_s2_batch(payload, ["2601.01234"], SNAP)
