"""How phrases and features are counted: the phrase table's integer-id counts agree with counting
each paper's set of phrases one by one, and chunked feature counts equal one-go counts."""

from __future__ import annotations

import math
import re
from collections import Counter

import numpy as np
import pandas as pd
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from phrase_oracle import extract_phrases

from rap_benchmark.pipeline import features as features_module
from rap_benchmark.pipeline.features import Features
from rap_benchmark.pipeline.fields import tokenize_papers
from rap_benchmark.pipeline.phrases import first_surface, phrase_keys, phrase_table, rank_phrases

WORDS = "Graph graph Neural neural networks Networks message passing of the x-ray X-Ray 42 Σύστημα ΟΔΟΣ İzmir a".split()
SEPS = [" ", " ", " ", "  ", ", ", ". ", "-", " (", ") "]


@st.composite
def texts(draw: st.DrawFn) -> list[str]:
    n = draw(st.integers(1, 12))
    out = []
    for _ in range(n):
        k = draw(st.integers(0, 14))
        parts = [draw(st.sampled_from(WORDS)) + draw(st.sampled_from(SEPS)) for _ in range(k)]
        out.append("".join(parts))
    return out


def _naive_rank(sets: list[set[str]], docs: list[int], rest: list[int], min_docs: int, top: int | None) -> list:
    n_c, n_r = max(len(docs), 1), max(len(rest), 1)
    in_c = Counter(k for d in docs for k in sets[d])
    in_r = Counter(k for d in rest for k in sets[d])
    scored = []
    for key, c in in_c.items():
        if c >= min_docs:
            p_c, p_r = c / n_c, in_r[key] / n_r
            scored.append((key, p_c * math.log1p(p_c / (p_r + 1.0 / n_r)), p_c))
    return sorted(scored, key=lambda t: (-t[1], t[0]))[:top]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(texts(), st.data())
def test_phrase_table_counts_as_the_per_paper_sets_do(corpus: list[str], data: st.DataObject) -> None:
    table = phrase_table(corpus)
    sets = [set(extract_phrases(t)) for t in corpus]
    rows = [table.ids[table.indptr[d] : table.indptr[d + 1]] for d in range(len(corpus))]
    assert [{table.vocab[i] for i in row.tolist()} for row in rows] == sets
    assert [phrase_keys(t) for t in corpus] == sets
    assert list(table.vocab) == sorted(set().union(*sets))
    docs = sorted(data.draw(st.sets(st.integers(0, len(corpus) - 1))))
    rest = [d for d in range(len(corpus)) if d not in docs]
    assert table.counts(docs) == Counter(k for d in docs for k in sets[d])
    for min_docs in (1, 2):
        assert rank_phrases(table, docs, rest, min_docs=min_docs, top=7) == _naive_rank(sets, docs, rest, min_docs, 7)
        # no rest given: every other text, counted from the table's totals
        assert rank_phrases(table, docs, min_docs=min_docs, top=None) == _naive_rank(sets, docs, rest, min_docs, None)
    assert table.key_totals.tolist() == [sum(k in t for t in sets) for k in table.vocab]
    for key in sorted(set().union(*sets))[:10]:
        assert table.users(key, docs[::-1]).tolist() == [d for d in docs[::-1] if key in sets[d]]
        for d in range(len(corpus)):
            assert bool(table.uses_mask(key, [d])[0]) == (key in sets[d])
            assert first_surface(corpus[d], key) == extract_phrases(corpus[d]).get(key)
    assert not table.uses_mask("no such phrase", [0]).any()


ASCII_WORDS = "Graph graph-based neural Networks message passing of the x-ray X-Ray 42 7-B a multi-agent Agent".split()
ASCII_SEPS = [" ", " ", " ", "  ", ", ", ". ", "-", "--", "_", " (", ") ", "-\n"]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(ASCII_WORDS), st.sampled_from(ASCII_SEPS)), max_size=16))
def test_first_surface_finds_what_reading_the_runs_finds(parts: list[tuple[str, str]]) -> None:
    """The ASCII search for a key agrees with reading the text phrase by phrase, for every key the
    text uses and for keys it only contains as a substring (across a hyphen, an underscore or a
    stop word), which are not phrases of it."""
    text = "".join(w + sep for w, sep in parts)
    found = extract_phrases(text)
    for key, form in found.items():
        assert first_surface(text, key) == form
    pieces = re.findall(r"[a-z0-9]+(?:-[a-z0-9]+)?", text.lower())  # word tails after a hyphen too
    near = {" ".join(pieces[i : i + n]) for n in (2, 3) for i in range(len(pieces))}
    for key in near - set(found):
        assert first_surface(text, key) is None


def test_chunked_feature_counts_equal_counting_in_one_go(monkeypatch) -> None:
    rng = np.random.default_rng(3)
    words = [f"w{i}" for i in range(40)]
    papers = pd.DataFrame(
        {
            "arxiv_id": [f"2401.{i:05d}" for i in range(57)],
            "title": [" ".join(rng.choice(words, 4)) for _ in range(57)],
            "abstract": [" ".join(rng.choice(words, int(rng.integers(0, 30)))) for _ in range(57)],
        }
    )
    corpus = tokenize_papers(papers)
    feats = Features.fit(corpus.select(np.arange(30)), min_df=2)
    whole, known = feats.counts(corpus)
    monkeypatch.setattr(features_module, "COUNT_CHUNK", 8)
    chunked, known_chunked = feats.counts(corpus)
    assert whole.dtype == chunked.dtype and whole.shape == chunked.shape
    for attr in ("indptr", "indices", "data"):
        a, b = getattr(whole, attr), getattr(chunked, attr)
        assert a.dtype == b.dtype and np.array_equal(a, b), attr
    assert np.array_equal(known, known_chunked)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.lists(st.sampled_from([*"ab Z9-é_.\nıİß", "the ", "of ", "x ", "Over "])).map("".join), max_size=9))
def test_token_ids_give_what_tokenize_gives_text_by_text(texts: list[str]) -> None:
    """Words hashed in C, stop words dropped by id, chunks of two texts: the same tokens, in order,
    numbered in sorted-vocabulary order, as tokenising each text alone."""
    from rap_benchmark.core import text

    expected = [text.tokenize(t) for t in texts]
    for chunk in (2, text.TOKEN_CHUNK):
        old, text.TOKEN_CHUNK = text.TOKEN_CHUNK, chunk
        try:
            vocab, lengths, ids = text.token_ids(iter(texts))
        finally:
            text.TOKEN_CHUNK = old
        assert vocab == sorted({t for d in expected for t in d})
        assert lengths.dtype == np.int64 and lengths.tolist() == [len(d) for d in expected]
        assert ids.dtype == np.int32 and [vocab[i] for i in ids.tolist()] == [t for d in expected for t in d]


def test_chunked_tokenisation_numbers_tokens_as_factorizing_all_at_once(monkeypatch) -> None:
    from rap_benchmark.core import text
    from rap_benchmark.pipeline import fields

    papers = pd.DataFrame(
        {
            "arxiv_id": ["a", "b", "c", "d", "e"],
            "title": ["Graph neural networks", "", "Ünïcödé Σύστημα graph", "x", "speech 42 graph"],
            "abstract": ["message passing networks", "", "Straße networks", "the of", "Speech recognition"],
        }
    )
    tokens = [text.tokenize(f"{t} {a}") for t, a in zip(papers["title"], papers["abstract"], strict=True)]
    codes, uniques = pd.factorize(pd.Series([t for d in tokens for t in d], dtype=object), sort=True)
    monkeypatch.setattr(text, "TOKEN_CHUNK", 2)
    monkeypatch.setattr(fields, "_TOKEN_CACHE", {})
    corpus = fields.tokenize_papers(papers)
    assert corpus.vocab == tuple(uniques)
    assert corpus.ids.dtype == np.int32 and corpus.ids.tolist() == codes.tolist()
    assert [corpus.tokens(i) for i in range(len(papers))] == tokens
