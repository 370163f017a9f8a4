"""The offline fit's fast paths give what the plain readings they replace give, exactly."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pandas as pd
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from phrase_oracle import extract_phrases

from rap_benchmark.pipeline.clusters import _cluster_sums
from rap_benchmark.pipeline.features import Features
from rap_benchmark.pipeline.fields import tokenize_papers
from rap_benchmark.pipeline.phrases import phrase_keys, phrase_table

ASCII_WORDS = (
    "Graph graph-based neural Networks message passing of the x-ray X-Ray 42 7-B a multi-agent Agent study".split()
)
ASCII_SEPS = [" ", " ", " ", "  ", ", ", ". ", "-", "--", "_", " (", ") ", "-\n", "\t", "'"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(ASCII_WORDS), st.sampled_from(ASCII_SEPS)), max_size=24), st.booleans())
def test_ascii_phrase_keys_are_the_runs_phrases(parts: list[tuple[str, str]], lead: bool) -> None:
    """ASCII text is split into words and separators in one call; its keys are still every phrase
    of every run, as reading the runs span by span finds them."""
    text = (" " if lead else "") + "".join(w + sep for w, sep in parts)
    assert text.isascii()
    assert phrase_keys(text) == set(extract_phrases(text))


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.lists(st.sampled_from("alpha beta gamma delta eps zeta eta theta".split()), max_size=12), max_size=15)
)
def test_features_fit_keeps_the_terms_and_pairs_enough_docs_use(docs: list[list[str]]) -> None:
    """Document frequencies counted over hashed (doc, term) pairs equal counting each doc's set."""
    papers = pd.DataFrame(
        {
            "arxiv_id": [f"2401.{i:05d}" for i in range(len(docs))],
            "title": ["" for _ in docs],
            "abstract": [" ".join(d) for d in docs],
        }
    )
    corpus = tokenize_papers(papers)
    for min_df in (1, 2, 3):
        feats = Features.fit(corpus, min_df=min_df)
        uni = Counter(w for d in docs for w in set(d))
        bi = Counter(p for d in docs for p in set(zip(d, d[1:], strict=False)))
        assert feats.unigrams == tuple(sorted(w for w, n in uni.items() if n >= min_df))
        assert feats.bigrams == tuple(sorted(p for p, n in bi.items() if n >= min_df))


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.lists(st.tuples(st.sampled_from(ASCII_WORDS), st.sampled_from(ASCII_SEPS)), max_size=10), max_size=10),
    st.data(),
)
def test_key_counts_look_up_what_counts_holds(parts: list[list[tuple[str, str]]], data: st.DataObject) -> None:
    """A key looked up in :meth:`PhraseTable.key_counts` counts what :meth:`PhraseTable.counts` says."""
    table = phrase_table(["".join(w + sep for w, sep in text) for text in parts])
    docs = data.draw(st.lists(st.integers(0, max(len(parts) - 1, 0)), max_size=12)) if parts else []
    counts, looked_up = table.counts(docs), table.key_counts(docs)
    for key in list(table.vocab) + ["no such phrase", "", "zzz zzz"]:
        assert looked_up[key] == counts[key]


@settings(max_examples=80, deadline=None)
@given(st.integers(1, 60), st.integers(1, 9), st.integers(1, 5), st.integers(0, 2**32 - 1))
def test_cluster_sums_are_the_one_hot_products_bytes(n: int, k: int, dims: int, seed: int) -> None:
    """k-means' cluster sums: the same floats (signed zeros included) as the one-hot COO product."""
    rng = np.random.default_rng(seed)
    y = rng.standard_normal((n, dims))
    y[rng.random((n, dims)) < 0.3] = -0.0
    labels = rng.integers(0, k, n)
    onehot = sp.csr_matrix((np.ones(n), (labels, np.arange(n))), shape=(k, n))
    assert _cluster_sums(labels, y, k).tobytes() == np.asarray(onehot @ y).tobytes()


def test_tokenized_papers_are_reused_only_for_the_same_ids_and_text() -> None:
    """The tokenisation cache answers a copy of the same papers from memory, and any change to an
    id, a title or an abstract (or to their order) with a fresh tokenisation."""
    papers = pd.DataFrame(
        {"arxiv_id": ["a", "b"], "title": ["Graph networks", "Speech"], "abstract": ["message passing", "audio"]}
    )
    first = tokenize_papers(papers)
    assert tokenize_papers(papers.copy(deep=True)) is first
    for column, value in (("arxiv_id", "c"), ("title", "Graph network"), ("abstract", "message passing.")):
        changed = papers.copy()
        changed.loc[0, column] = value
        assert tokenize_papers(changed) is not first
    swapped = tokenize_papers(papers.iloc[::-1].reset_index(drop=True))
    assert swapped is not first and swapped.tokens(0) == first.tokens(1)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.lists(st.sampled_from("alpha beta gamma delta eps zeta eta theta".split()), max_size=12), max_size=15),
    st.lists(st.lists(st.sampled_from("alpha beta gamma iota kappa".split()), max_size=12), max_size=8),
)
def test_feature_counts_count_each_fitted_term_and_pair(fit_docs: list[list[str]], docs: list[list[str]]) -> None:
    """Counts of papers the features were not fitted on (pairs looked up by hash) are what counting
    each paper's fitted unigrams and adjacent pairs gives; unknown words count as unknown."""

    def frame(rows: list[list[str]]) -> pd.DataFrame:
        ids = [f"2401.{i:05d}" for i in range(len(rows))]
        return pd.DataFrame({"arxiv_id": ids, "title": ["" for _ in rows], "abstract": [" ".join(r) for r in rows]})

    feats = Features.fit(tokenize_papers(frame(fit_docs)), min_df=1)
    mat, known = feats.counts(tokenize_papers(frame(docs)))
    column = {name: j for j, name in enumerate(feats.names)}
    for i, d in enumerate(docs):
        want = Counter(w for w in d if w in column) + Counter(f"{a} {b}" for a, b in zip(d, d[1:], strict=False))
        want = Counter({name: n for name, n in want.items() if name in column})
        row = mat.getrow(i)
        assert {feats.names[j]: int(v) for j, v in zip(row.indices, row.data, strict=True)} == dict(want)
        assert known[i] == sum(w in feats.unigrams for w in d)


def test_remembered_spellings_are_the_spellings() -> None:
    """spellings and word_set are remembered per phrase; a remembered answer is the computed one."""
    from rap_benchmark.pipeline.phrases import spellings, word_set

    for key in ("multi-modal models", "large language models", "processes", "analysis"):
        assert spellings(key) == spellings.__wrapped__(key) and spellings(key) is spellings(key)
        assert word_set(key) == word_set.__wrapped__(key)
    assert spellings("multi-modal models") == ("multi modal model", "multimodal model")
