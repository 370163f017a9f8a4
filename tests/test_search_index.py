"""BM25Index and SearchEngine invariants: backends agree bit for bit, universes never leak."""

from __future__ import annotations

import datetime as dt
import functools

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from search_synthetic import synthetic_instance, zipf_corpus

from rap_benchmark.bm25 import BM25Index, SearchEngine, kernels
from rap_benchmark.bm25.tokens import CACHE_NAME, cached_table, load_table, table_from_token_ids, tokenize_texts
from rap_benchmark.core.dates import add_months, parse_date
from rap_benchmark.core.records import Regime
from rap_benchmark.core.text import tokenize


def doc_terms(table, i: int) -> dict[str, int]:
    """Document ``i``'s terms with their frequencies, read from the token table."""
    lo, hi = int(table.doc_ptr[i]), int(table.doc_ptr[i + 1])
    return {table.vocab[int(t)]: int(f) for t, f in zip(table.term[lo:hi], table.tf[lo:hi], strict=True)}


@functools.cache
def _instance():
    return synthetic_instance(1_500, 3, seed=5)


@functools.cache
def _engine(backend: str) -> SearchEngine:
    return SearchEngine.from_instance(_instance(), backend=backend)


@functools.cache
def _words() -> list[str]:
    papers = _instance().papers
    return sorted({t for text in papers["title"].head(300) for t in tokenize(text)})


def test_generic_index_sorts_by_date_then_id_and_narrows():
    ids = ["b", "a", "c", "d"]
    texts = ["graph network", "graph model", "vision model", "graph graph network"]
    dates = ["2024-01-02", "2024-01-02", "2023-12-01", "2024-03-05T10:00:00"]
    index = BM25Index.build(ids, texts, dates)
    assert [index.ids[r] for r in index.rows] == ["c", "a", "b", "d"]
    full = index.search("graph")
    assert full.total_hits == 3 and set(full.ids) == {"a", "b", "d"}
    # a, b have equal length and tf: the tie breaks by id
    assert full.ids.index("a") < full.ids.index("b")
    assert index.search("graph", lo_date="2024-01-03").ids == ["d"]
    assert index.search("graph", hi_date="2024-01-02").total_hits == 0
    assert index.search("graph", lo_date="2024-02-01", hi_date="2024-01-01").total_hits == 0
    assert index.search("", k=8).total_hits == 0
    assert index.search("unknownword other").ids == []
    assert index.search("graph graph GRAPH,") == full  # duplicate query terms count once
    assert index.search("graph", k=1).ids == [full.ids[0]] and index.search("graph", k=0).ids == []


def test_generic_index_rejects_bad_input():
    with pytest.raises(ValueError):
        BM25Index.build(["a", "a"], ["x y", "y z"], ["2024-01-01", "2024-01-01"])
    with pytest.raises(ValueError):
        BM25Index.build(["a"], ["x"], ["2024-01-01", "2024-01-02"])
    with pytest.raises(ValueError):
        BM25Index.build(["a"], ["text"], ["not a date"])


def test_token_table_matches_counter_and_roundtrips(tmp_path):
    texts = ["Graph neural networks on graphs", "", "Vision: vision vision transformers!", "graph"]
    table = tokenize_texts(texts)
    assert list(table.vocab) == sorted(table.vocab)
    for i, text in enumerate(texts):
        toks = tokenize(text)
        assert table.doc_len[i] == len(toks)
        assert doc_terms(table, i) == {t: toks.count(t) for t in set(toks)}
    calls = []

    def texts_fn():
        calls.append(1)
        return iter(texts)

    first = cached_table(tmp_path, "digest-1", len(texts), texts_fn)
    second = cached_table(tmp_path, "digest-1", len(texts), texts_fn)
    assert len(calls) == 1  # the second build read the cache
    for name in ("doc_ptr", "term", "tf", "doc_len"):
        np.testing.assert_array_equal(getattr(first, name), getattr(second, name))
    assert second.vocab == first.vocab
    assert load_table(tmp_path / CACHE_NAME, "another key") is None
    cached_table(tmp_path, "digest-2", len(texts), texts_fn)
    assert len(calls) == 2  # a different corpus digest never reads a stale cache


def test_token_table_widens_tf_beyond_uint16():
    table = table_from_token_ids(["a", "b"], [np.zeros(70_000, dtype=np.int64), np.array([1, 0])])
    assert table.tf.dtype == np.int32 and doc_terms(table, 0) == {"a": 70_000}


@pytest.mark.skipif(not kernels.HAVE_NUMBA, reason="numba not installed")
def test_numba_and_numpy_build_identical_postings():
    inst = _instance()
    a, b = _engine("numba"), _engine("numpy")
    assert a.field_ids == b.field_ids == sorted(inst.assignments["field_id"].unique())
    for field_id in a.field_ids:
        ia, ib = a.index(field_id), b.index(field_id)
        for name in ("rows", "day", "id_rank", "doc_len", "cum_len", "terms", "indptr", "post_doc", "post_tf"):
            np.testing.assert_array_equal(getattr(ia, name), getattr(ib, name), err_msg=name)
            assert getattr(ia, name).dtype == getattr(ib, name).dtype, name


@pytest.mark.skipif(not kernels.HAVE_NUMBA, reason="numba not installed")
def test_numba_and_numpy_queries_are_bit_identical():
    a, b = _engine("numba"), _engine("numpy")
    rng = np.random.default_rng(7)
    words = _words()
    for i in range(300):
        field_id = a.field_ids[i % len(a.field_ids)]
        origin = a.spec.origins[i % len(a.spec.origins)]
        regime = Regime.FIXED if i % 2 else Regime.EXPANDING
        query = " ".join(rng.choice(words, size=int(rng.integers(1, 7))))
        narrow = {"start": "2023-03-01", "end": "2024-10-31"} if i % 3 == 0 else {}
        ra, rb = (
            a.ranked(field_id, origin, regime, query, **narrow),
            b.ranked(field_id, origin, regime, query, **narrow),
        )
        assert ra.ids == rb.ids and ra.total_hits == rb.total_hits
        assert ra.scores == rb.scores  # exact float equality, not a tolerance


def test_results_are_deterministic_across_rebuilds():
    fresh = SearchEngine.from_instance(_instance())
    cached = _engine("numba" if kernels.HAVE_NUMBA else "numpy")
    for q in _words()[:40]:
        for regime in Regime:
            assert fresh.ranked("F001", "2025-01-01", regime, q) == cached.ranked("F001", "2025-01-01", regime, q)


def test_fixed_universe_is_the_window_and_expanding_is_everything_before_t():
    engine = _engine("numpy")
    inst = _instance()
    members = set(inst.assignments.loc[inst.assignments.field_id == "F000", "arxiv_id"])
    dates = dict(zip(inst.papers.arxiv_id, inst.papers.date, strict=True))
    for origin in engine.spec.origins:
        fixed = engine.universe_ids("F000", origin, "fixed")
        expanding = engine.universe_ids("F000", origin, "expanding")
        lo = add_months(parse_date(origin), -6).isoformat()
        assert fixed == sorted((p for p in members if lo <= dates[p] < origin), key=lambda p: (dates[p], p))
        assert expanding == sorted((p for p in members if dates[p] < origin), key=lambda p: (dates[p], p))


def test_unknown_field_and_bad_regime_are_errors():
    engine = _engine("numpy")
    with pytest.raises(ValueError, match="unknown field"):
        engine.search("nope", "2025-01-01", "fixed", "graph")
    with pytest.raises(ValueError):
        engine.search("F000", "2025-01-01", "sideways", "graph")
    with pytest.raises(ValueError):
        engine.search("F000", "2025-01-01", "fixed", "graph", start="yesterday")


_dates = st.dates(min_value=dt.date(2021, 6, 1), max_value=dt.date(2027, 3, 28))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    field_i=st.integers(0, 2),
    origin=st.dates(min_value=dt.date(2022, 1, 1), max_value=dt.date(2026, 12, 28)).filter(lambda d: d.day <= 28),
    regime=st.sampled_from(list(Regime)),
    words=st.lists(st.integers(0, 10_000), min_size=0, max_size=8),
    noise=st.text(max_size=20),
    start=st.none() | _dates,
    end=st.none() | _dates,
    backend=st.sampled_from(["numba", "numpy"] if kernels.HAVE_NUMBA else ["numpy"]),
)
def test_no_result_ever_leaves_the_universe_or_the_window(field_i, origin, regime, words, noise, start, end, backend):
    engine = _engine(backend)
    vocab = _words()
    query = " ".join(vocab[w % len(vocab)] for w in words) + " " + noise
    field_id = engine.field_ids[field_i]
    obs = engine.search(field_id, origin, regime, query, start=start, end=end)
    lo = add_months(origin, -6) if regime is Regime.FIXED else dt.date.min
    if start is not None:
        lo = max(lo, start)
    visible = engine.universe_ids(field_id, origin, regime, start=start, end=end)
    assert len(obs.hits) <= engine.spec.top_k and len(obs.hits) <= obs.total_hits <= len(visible)
    for hit in obs.hits:
        day = parse_date(hit.date)
        assert day < origin  # never on or after T, whatever the arguments
        assert lo <= day and (end is None or day <= end)
        assert hit.arxiv_id in visible
    keys = [(-h.score, h.arxiv_id) for h in obs.hits]
    assert keys == sorted(keys)
    assert engine.search(field_id, origin, regime, query, start=start, end=end) == obs


def test_synthetic_corpus_is_seeded_and_sorted():
    a_papers, a_assign = zipf_corpus(300, 4, seed=3, vocab_size=2_000)
    b_papers, b_assign = zipf_corpus(300, 4, seed=3, vocab_size=2_000)
    assert a_papers.equals(b_papers) and a_assign.equals(b_assign)
    keys = list(zip(a_papers.date, a_papers.arxiv_id, strict=True))
    assert keys == sorted(keys) and a_papers.arxiv_id.is_unique
    assert list(a_assign.columns) == ["arxiv_id", "field_id", "date", "primary", "secondary", "type"]
    c_papers, _ = zipf_corpus(300, 4, seed=4, vocab_size=2_000)
    assert not a_papers.equals(c_papers)
