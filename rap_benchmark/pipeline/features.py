"""Text features of the real-text instrument: unigram + bigram counts and field-local LSA.

A paper's features are its tokens (:func:`rap_benchmark.core.text.tokenize`) and its adjacent
token pairs ("retrieval augmented", "augmented generation"). The feature set is fitted on the
rows it is given (the codebook's pre-cutoff papers), so papers outside them never shape it.

:class:`LocalSpace` is a field's own coordinate system: TF-IDF over the features its pre-cutoff
papers use, then a truncated SVD (latent semantic analysis) to a few dimensions. Few dimensions
keep only the field's main axes of variation, which different text representations agree on;
the directions are clusters along them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import scipy.sparse as sp

from rap_benchmark.pipeline.clusters import normalise_dense
from rap_benchmark.pipeline.fields import TokenizedCorpus, lsa_axes, smoothed_idf, sublinear_tfidf, terms_in_band

__all__ = ["Features", "LocalSpace"]

COUNT_CHUNK = 20_000
"""Docs counted at a time by :meth:`Features.counts`."""


def _bigram_codes(corpus: TokenizedCorpus) -> tuple[np.ndarray, np.ndarray]:
    """(doc index, pair code ``a * len(vocab) + b``) of every adjacent token pair inside one doc."""
    ids = corpus.ids.astype(np.int64)
    doc = corpus.doc_index()
    if ids.size < 2:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    same = doc[1:] == doc[:-1]
    return doc[:-1][same], ids[:-1][same] * len(corpus.vocab) + ids[1:][same]


@dataclass(frozen=True)
class Features:
    """A fitted feature set: unigrams, then bigrams, as strings (so any tokenised corpus maps in)."""

    unigrams: tuple[str, ...]
    bigrams: tuple[tuple[str, str], ...]

    @classmethod
    def fit(cls, corpus: TokenizedCorpus, *, min_df: int = 2) -> Features:
        """The unigrams and adjacent bigrams that occur in at least ``min_df`` docs of ``corpus``."""
        v = len(corpus.vocab)
        doc = corpus.doc_index()
        # the distinct (doc, term) pairs by hashing (pd.unique): only their number per term is
        # used, so their order does not matter, and np.unique is several times slower here
        uni = pd.unique(doc * v + corpus.ids) % v if corpus.ids.size else np.zeros(0, np.int64)
        uni_keep = np.flatnonzero(np.bincount(uni, minlength=v) >= min_df)
        bdoc, bcode = _bigram_codes(corpus)
        codes, df = np.unique(pd.unique(bdoc * (v * v) + bcode) % (v * v), return_counts=True)
        bi_keep = codes[df >= min_df]
        return cls(
            unigrams=tuple(corpus.vocab[i] for i in uni_keep),
            bigrams=tuple((corpus.vocab[c // v], corpus.vocab[c % v]) for c in bi_keep),
        )

    @property
    def names(self) -> tuple[str, ...]:
        return self.unigrams + tuple(f"{a} {b}" for a, b in self.bigrams)

    def counts(self, corpus: TokenizedCorpus) -> tuple[sp.csr_matrix, np.ndarray]:
        """Feature counts of every doc of ``corpus`` (CSR, float32) and its known-unigram counts.

        Docs are counted COUNT_CHUNK at a time, so the per-token work arrays stay small however
        large the corpus (the rows are the same as counted in one go)."""
        v = len(corpus.vocab)
        vocab = pd.Index(corpus.vocab, dtype=object)
        uni_col = pd.Index(self.unigrams, dtype=object).get_indexer(vocab)
        if self.bigrams:
            a = vocab.get_indexer(pd.Index([x for x, _ in self.bigrams], dtype=object)).astype(np.int64)
            b = vocab.get_indexer(pd.Index([y for _, y in self.bigrams], dtype=object)).astype(np.int64)
            ok = (a >= 0) & (b >= 0)
            pair_codes = pd.Index(a[ok] * v + b[ok])  # distinct: the bigrams are, and so their codes
            pair_cols = np.flatnonzero(ok)
        else:
            pair_codes, pair_cols = pd.Index(np.zeros(0, np.int64)), np.zeros(0, np.int64)
        if corpus.n_docs <= COUNT_CHUNK:
            return self._counts(corpus, uni_col, pair_codes, pair_cols)
        parts = [
            self._counts(
                corpus.select(np.arange(lo, min(lo + COUNT_CHUNK, corpus.n_docs))), uni_col, pair_codes, pair_cols
            )
            for lo in range(0, corpus.n_docs, COUNT_CHUNK)
        ]
        mat = sp.vstack([m for m, _ in parts], format="csr", dtype=np.float32)
        mat.has_canonical_format = True  # each part is, and they stack by rows
        return mat, np.concatenate([k for _, k in parts])

    def _counts(
        self, corpus: TokenizedCorpus, uni_col: np.ndarray, pair_codes: pd.Index, pair_cols: np.ndarray
    ) -> tuple[sp.csr_matrix, np.ndarray]:
        """Counts of ``corpus``: ``uni_col`` is each vocab id's unigram column (-1: none),
        ``pair_codes`` the fitted bigrams' codes (``a * len(vocab) + b``) whose columns are
        ``pair_cols``, looked up by hash."""
        doc = corpus.doc_index()
        cols_u = uni_col[corpus.ids] if corpus.ids.size else np.zeros(0, np.int64)
        known = cols_u >= 0
        n_known = np.bincount(doc[known], minlength=corpus.n_docs).astype(np.int64)
        bdoc, bcode = _bigram_codes(corpus)
        pos = pair_codes.get_indexer(bcode) if pair_codes.size else np.full(bcode.size, -1, dtype=np.intp)
        hit = pos >= 0
        rows = np.r_[doc[known], bdoc[hit]]
        cols = np.r_[cols_u[known], len(self.unigrams) + pair_cols[pos[hit]]]
        shape = (corpus.n_docs, len(self.unigrams) + len(self.bigrams))
        mat = sp.csr_matrix((np.ones(rows.size, dtype=np.float32), (rows, cols)), shape=shape)
        mat.sum_duplicates()
        return mat, n_known


@dataclass(frozen=True)
class LocalSpace:
    """A field's TF-IDF + LSA space: ``columns`` of the feature matrix, their IDF, SVD axes."""

    columns: np.ndarray  # int64 columns of FeatureCounts.counts
    idf: np.ndarray  # float64, one per column
    axes: np.ndarray  # dims x len(columns)

    @classmethod
    def fit(
        cls, counts: sp.csr_matrix, *, dims: int, seed: int, min_df: int = 2, max_df_ratio: float = 0.5
    ) -> LocalSpace:
        """Fit on ``counts`` (the field's pre-cutoff rows): columns in ``min_df`` .. ``max_df_ratio``
        of the rows, smoothed IDF, then a seeded randomized truncated SVD of the TF-IDF rows (the
        field space's rules, :mod:`rap_benchmark.pipeline.fields`, on this field's rows)."""
        n = counts.shape[0]
        df = np.bincount(counts.indices, minlength=counts.shape[1])
        columns = terms_in_band(df, n, min_df=min_df, max_df_ratio=max_df_ratio)
        idf = smoothed_idf(df[columns], n)
        space = cls(columns=columns, idf=idf, axes=np.zeros((0, columns.size)))
        x = space.tfidf(counts)
        dims = max(1, min(dims, min(x.shape) - 1))
        return cls(columns=columns, idf=idf, axes=lsa_axes(x, dims, seed, n_iter=7))

    def tfidf(self, counts: sp.csr_matrix) -> sp.csr_matrix:
        """Sublinear TF times IDF over this space's columns, rows L2-normalised."""
        return sublinear_tfidf(counts[:, self.columns], self.idf)

    def embed(self, counts: sp.csr_matrix) -> np.ndarray:
        """Rows projected on the SVD axes, L2-normalised (zero rows stay zero)."""
        return normalise_dense(np.asarray(self.tfidf(counts) @ self.axes.T))
