"""Exactness of restricted-universe search against a freshly built float64 bm25s index.

For each universe, an independent oracle selects the universe's papers with pandas (string date
comparisons on the artifact tables), tokenises them with the shared tokenizer, builds
``bm25s.BM25(method="lucene", k1=1.5, b=0.75, dtype="float64")`` on exactly those papers via its
(ids, vocab) API, and ranks by (score desc, arxiv_id asc). The engine must return the same top-k
ids in the same order, the same total_hits, and scores equal to 1e-9.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from functools import lru_cache

import bm25s
import numpy as np
import pandas as pd
import pytest
from search_synthetic import manifest_problems, synthetic_instance

from rap_benchmark.bm25 import SearchEngine
from rap_benchmark.core.dates import add_months, parse_date
from rap_benchmark.core.records import Regime
from rap_benchmark.core.text import query_terms, tokenize

QUERIES_PER_UNIVERSE = 20


@dataclass
class Oracle:
    ids: list[str]
    dates: list[str]
    token_sets: list[set[str]]
    model: bm25s.BM25 | None
    vocab: dict[str, int]
    id_rank: np.ndarray

    @classmethod
    def build(cls, ids: list[str], dates: list[str], tokens: list[list[str]]) -> Oracle:
        """The oracle over documents already split by the shared tokenizer (:func:`doc_tokens`)."""
        vocab = {t: i for i, t in enumerate(sorted({t for doc in tokens for t in doc}))}
        model = None
        if ids:
            model = bm25s.BM25(method="lucene", k1=1.5, b=0.75, dtype="float64")
            model.index(([[vocab[t] for t in doc] for doc in tokens], dict(vocab)), show_progress=False)
            assert model.scores["data"].dtype == np.float64
        rank = np.empty(len(ids), dtype=np.int64)
        rank[np.argsort(np.asarray(ids, dtype=object), kind="stable")] = np.arange(len(ids))
        return cls(ids, dates, [set(doc) for doc in tokens], model, vocab, rank)

    def search(self, query: str, k: int) -> tuple[list[str], list[float], int]:
        terms = [t for t in query_terms(query) if t in self.vocab]
        total = sum(1 for s in self.token_sets if s.intersection(terms))
        if not terms or self.model is None:
            return [], [], total
        scores = np.asarray(self.model.get_scores(terms), dtype=np.float64)
        assert int(np.count_nonzero(scores > 0)) == total
        order = np.lexsort((self.id_rank, -scores))[: min(k, total)]
        return [self.ids[i] for i in order], scores[order].tolist(), total


_COLUMNS: dict[int, tuple[pd.DataFrame, pd.Series, pd.Series, dict[str, set[str]]]] = {}


def _paper_columns(inst) -> tuple[pd.Series, pd.Series, dict[str, set[str]]]:
    """The papers' ids and days as strings and each field's member ids, once per papers table
    (every universe of an instance reads them; the table is kept so its id stays its own)."""
    papers = inst.papers
    got = _COLUMNS.get(id(papers))
    if got is None or got[0] is not papers:
        members = inst.assignments.groupby("field_id", sort=False)["arxiv_id"]
        got = (
            papers,
            papers["arxiv_id"].astype(str),
            papers["date"].astype(str).str.slice(0, 10),
            {str(f): set(ids.astype(str)) for f, ids in members},
        )
        _COLUMNS[id(papers)] = got
    return got[1:]


@lru_cache(maxsize=1 << 18)
def doc_tokens(text: str) -> tuple[str, ...]:
    """``tokenize(text)``, once per text: a paper is in many universes."""
    return tuple(tokenize(text))


def universe_frame(inst, field_id: str, origin: str, regime: Regime, start=None, end=None) -> pd.DataFrame:
    """The universe's papers selected independently of the engine (string date comparisons)."""
    ids, dates, members = _paper_columns(inst)
    keep = ids.isin(members.get(str(field_id), set())) & (dates < origin)
    if regime is Regime.FIXED:
        keep &= dates >= add_months(parse_date(origin), -inst.spec.window_months).isoformat()
    if start is not None:
        keep &= dates >= start
    if end is not None:
        keep &= dates <= end
    return inst.papers[keep]


def sample_queries(rng: np.random.Generator, token_lists: list[list[str]], extra_words: list[str], n: int) -> list[str]:
    """Real-word queries: 1-5 words of a random universe paper, sometimes with words from outside
    the universe, unknown words, stop words, punctuation, case and duplicates."""
    queries = []
    nonempty = [toks for toks in token_lists if toks]
    for i in range(n):
        words: list[str] = []
        if nonempty:
            doc = nonempty[int(rng.integers(len(nonempty)))]
            words += [doc[int(j)] for j in rng.integers(len(doc), size=int(rng.integers(1, 6)))]
        if extra_words and i % 3 == 0:
            words.append(extra_words[int(rng.integers(len(extra_words)))])
        if i % 5 == 1:
            words += ["the", "of", "zzqqxx"]
        if i % 7 == 2 and words:
            words.append(words[0].upper() + ",")
        rng.shuffle(words)
        queries.append(" ".join(words))
    return queries


def check_universe(engine: SearchEngine, inst, field_id, origin, regime, rng, *, start=None, end=None, n_queries=20):
    frame = universe_frame(inst, field_id, origin, regime, start, end)
    ids = frame["arxiv_id"].astype(str).tolist()
    texts = [f"{t}\n{a}" for t, a in zip(frame["title"], frame["abstract"], strict=True)]
    tokens = [doc_tokens(t) for t in texts]
    oracle = Oracle.build(ids, frame["date"].astype(str).tolist(), tokens)
    assert sorted(engine.universe_ids(field_id, origin, regime, start=start, end=end)) == sorted(ids)
    field_words = sorted(set(tokenize(" ".join(inst.papers["title"].head(200)))))
    queries = sample_queries(rng, tokens, field_words, n_queries)
    for q in queries:
        got = engine.ranked(field_id, origin, regime, q, start=start, end=end)
        want_ids, want_scores, want_total = oracle.search(q, engine.spec.top_k)
        assert got.total_hits == want_total, (field_id, origin, regime, q)
        assert got.ids == want_ids, (field_id, origin, regime, q)
        np.testing.assert_allclose(got.scores, want_scores, rtol=0, atol=1e-9)
    return len(queries)


@pytest.fixture(scope="module")
def synth():
    return synthetic_instance(2_500, 3, seed=11)


@pytest.mark.parametrize("backend", ["numba", "numpy"])
def test_every_universe_of_a_generated_instance_matches_bm25s(synth, backend):
    engine = SearchEngine.from_instance(synth, backend=backend)
    rng = np.random.default_rng(0)
    n_universes = 0
    for field_id, origin, regime in engine.universes():
        assert check_universe(engine, synth, field_id, origin, regime, rng) >= QUERIES_PER_UNIVERSE
        n_universes += 1
    assert n_universes == 3 * len(synth.spec.origins) * 2


def test_narrowed_universes_match_bm25s_on_the_narrowed_papers(synth):
    engine = SearchEngine.from_instance(synth)
    rng = np.random.default_rng(1)
    base = dt.date(2022, 1, 1)
    for field_id, origin, regime in list(engine.universes())[::3]:
        start = (base + dt.timedelta(days=int(rng.integers(0, 1500)))).isoformat()
        end = (parse_date(start) + dt.timedelta(days=int(rng.integers(0, 600)))).isoformat()
        check_universe(engine, synth, field_id, origin, regime, rng, start=start, end=end, n_queries=8)


def test_every_universe_of_mini_matches_bm25s(request):
    pytest.importorskip("rap_benchmark.pipeline.build")
    mini = request.getfixturevalue("mini")
    engine = SearchEngine.from_instance(mini)
    rng = np.random.default_rng(2)
    universes = list(engine.universes())
    assert len(universes) == len(mini.field_ids) * len(mini.spec.origins) * 2
    for field_id, origin, regime in universes:
        assert check_universe(engine, mini, field_id, origin, regime, rng) >= QUERIES_PER_UNIVERSE
    assert manifest_problems(engine, mini.search_manifest) == []


@pytest.mark.slow
@pytest.mark.shared_data
def test_sampled_universes_of_arxiv_sample_match_bm25s(request):
    pytest.importorskip("rap_benchmark.pipeline.build")
    inst = request.getfixturevalue("arxiv_sample")
    engine = SearchEngine.from_instance(inst)
    rng = np.random.default_rng(3)
    universes = list(engine.universes())
    picked = rng.choice(len(universes), size=min(24, len(universes)), replace=False)
    for i in sorted(picked.tolist()):
        field_id, origin, regime = universes[i]
        assert check_universe(engine, inst, field_id, origin, regime, rng) >= QUERIES_PER_UNIVERSE
    assert manifest_problems(engine, inst.search_manifest) == []
