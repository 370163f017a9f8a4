"""Fields from real text: TF-IDF, seeded spherical k-means and multi-membership (the paper's codebook construction).

A field is a cluster of papers dated before ``spec.eligibility_end`` (the paper's retrospective
frame), found by seeded spherical k-means over the LSA of title + abstract TF-IDF; every paper
(any date) then joins each field whose frozen centroid it is close enough to (:class:`FieldModel`).
Fields are kept when they have ``spec.min_field_papers`` memberships before ``eligibility_end``
and enough papers before the codebook cutoff for eight directions, and are numbered ``f000``,
``f001``, ... in order of their name. The TF-IDF space here also serves codebooks and instrument.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import scipy.sparse as sp

from rap_benchmark.core.errors import InputError
from rap_benchmark.core.records import N_DIRECTIONS
from rap_benchmark.core.spec import BenchmarkSpec
from rap_benchmark.core.text import token_ids
from rap_benchmark.pipeline.clusters import l2_normalise_rows, normalise_dense, spherical_kmeans_dense

__all__ = [
    "FieldInfo",
    "FieldModel",
    "TfidfSpace",
    "TokenizedCorpus",
    "build_fields",
    "fit_fields",
    "lsa_axes",
    "smoothed_idf",
    "sublinear_tfidf",
    "terms_in_band",
    "tokenize_papers",
]


@dataclass(frozen=True)
class FieldInfo:
    """A field's identity and written description.

    ``cohesion``: the mean cosine of the field's eligible papers to its centroid in the clustering
    space (how much of one topic its papers share; NaN when not measured).
    """

    field_id: str
    name: str
    definition: str
    cohesion: float = float("nan")


# --------------------------------------------------------------------------------------------
# TF-IDF
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TokenizedCorpus:
    """Papers' tokens as integer ids into one corpus-wide vocabulary (CSR-like layout).

    ``vocab``: every distinct token, sorted; doc i's token ids are
    ``ids[indptr[i]:indptr[i + 1]]`` in text order.
    """

    vocab: tuple[str, ...]
    indptr: np.ndarray  # int64, n_docs + 1
    ids: np.ndarray  # int32 token ids

    @property
    def n_docs(self) -> int:
        return len(self.indptr) - 1

    @property
    def lengths(self) -> np.ndarray:
        return np.diff(self.indptr)

    def doc_index(self) -> np.ndarray:
        """The doc number of every token."""
        return np.repeat(np.arange(self.n_docs, dtype=np.int64), self.lengths)

    def select(self, rows: np.ndarray) -> TokenizedCorpus:
        """The sub-corpus of ``rows`` (in that order), sharing the vocabulary."""
        rows = np.asarray(rows, dtype=np.int64)
        lengths = self.lengths[rows]
        indptr = np.r_[0, np.cumsum(lengths)].astype(np.int64)
        if rows.size == 0:
            return TokenizedCorpus(self.vocab, indptr, np.zeros(0, np.int32))
        starts = np.repeat(self.indptr[rows] - indptr[:-1], lengths)
        return TokenizedCorpus(self.vocab, indptr, self.ids[np.arange(indptr[-1]) + starts])

    def tokens(self, i: int) -> list[str]:
        return [self.vocab[j] for j in self.ids[self.indptr[i] : self.indptr[i + 1]]]


_TOKEN_CACHE: dict[tuple[int, ...], TokenizedCorpus] = {}


def _text_key(columns: Sequence[list[str]]) -> tuple[int, ...]:
    """An in-process key of the papers' ids and text: their number and the hash of each column's
    strings in order. Python's string hash is kept in each string object, so asking again about
    the same papers (fields, codebooks and assignments all do) costs no pass over their text; the
    key lives only as long as the process, like the cache it indexes."""
    return (len(columns[0]), *(hash(tuple(column)) for column in columns))


def tokenize_papers(papers: pd.DataFrame) -> TokenizedCorpus:
    """Tokenise each paper's ``title + " " + abstract``. The last two results are cached by a hash
    of the papers' ids and text (fields, codebooks and assignments all need them)."""
    ids, titles, abstracts = (papers[c].tolist() for c in ("arxiv_id", "title", "abstract"))
    key = _text_key([ids, titles, abstracts])
    if key in _TOKEN_CACHE:
        return _TOKEN_CACHE[key]
    texts = (f"{t} {a}" for t, a in zip(titles, abstracts, strict=True))
    vocab, lengths, ids = token_ids(texts)
    indptr = np.zeros(len(papers) + 1, dtype=np.int64)
    np.cumsum(lengths, out=indptr[1:])
    corpus = TokenizedCorpus(vocab=tuple(vocab), indptr=indptr, ids=ids)
    while len(_TOKEN_CACHE) >= 2:
        _TOKEN_CACHE.pop(next(iter(_TOKEN_CACHE)))
    _TOKEN_CACHE[key] = corpus
    return corpus


def terms_in_band(df: np.ndarray, n: int, *, min_df: int, max_df_ratio: float) -> np.ndarray:
    """The terms (indices into ``df``, sorted) in at least ``min_df`` and at most ``max_df_ratio``
    of ``n`` docs: the vocabulary rule of every TF-IDF space here."""
    return np.flatnonzero((df >= min_df) & (df <= max_df_ratio * n))


def smoothed_idf(df: np.ndarray, n: int) -> np.ndarray:
    """``ln((1 + n) / (1 + df)) + 1`` of document frequencies ``df`` over ``n`` docs (scikit-learn's
    ``smooth_idf``)."""
    return np.log((1.0 + n) / (1.0 + df.astype(np.float64))) + 1.0


def sublinear_tfidf(counts: sp.csr_matrix, idf: np.ndarray) -> sp.csr_matrix:
    """Sublinear term frequency ``1 + ln(tf)`` of raw ``counts`` times ``idf``, rows L2-normalised
    (float64; ``counts`` is left as it is)."""
    mat = sp.csr_matrix(counts, dtype=np.float64, copy=True)
    mat.data = 1.0 + np.log(mat.data)
    mat = mat @ sp.diags(idf)
    return l2_normalise_rows(sp.csr_matrix(mat))


def lsa_axes(x: sp.csr_matrix, dims: int, seed: int, *, n_iter: int) -> np.ndarray:
    """The top ``dims`` SVD axes of ``x`` (dims x terms; seeded randomized SVD with ``n_iter``
    power iterations, each axis's largest-magnitude loading positive): latent semantic analysis."""
    from sklearn.utils.extmath import randomized_svd

    _, _, vt = randomized_svd(x, dims, n_iter=n_iter, random_state=seed)
    signs = np.sign(vt[np.arange(vt.shape[0]), np.abs(vt).argmax(axis=1)])
    return vt * signs[:, None]


@dataclass(frozen=True)
class TfidfSpace:
    """A frozen vocabulary with smoothed IDF: ``idf = ln((1 + n) / (1 + df)) + 1``.

    Document vectors use sublinear term frequency ``1 + ln(tf)`` times IDF, L2-normalised
    (scikit-learn's ``TfidfVectorizer(sublinear_tf=True)`` convention). Tokens outside the
    vocabulary are ignored (and counted as unknown).
    """

    terms: tuple[str, ...]
    idf: np.ndarray

    @classmethod
    def fit(
        cls,
        corpus: TokenizedCorpus,
        *,
        min_df: int = 2,
        max_df_ratio: float = 0.5,
        max_terms: int | None = None,
    ) -> TfidfSpace:
        """Vocabulary of terms in at least ``min_df`` and at most ``max_df_ratio`` of the docs (the
        ``max_terms`` most frequent, ties by term), sorted: the space depends only on the content."""
        n = corpus.n_docs
        if n == 0:
            raise ValueError("cannot fit a TF-IDF space on zero documents")
        v = len(corpus.vocab)
        # document frequency from a (docs x vocab) incidence matrix; np.unique on the ~30M
        # (doc, token) pairs is orders of magnitude slower on numpy 2.4
        incidence = sp.csr_matrix(
            (np.ones(corpus.ids.size, dtype=np.float64), (corpus.doc_index(), corpus.ids)), shape=(n, v)
        )
        incidence.sum_duplicates()
        df = np.bincount(incidence.indices, minlength=v)
        keep = terms_in_band(df, n, min_df=min_df, max_df_ratio=max_df_ratio)
        if max_terms is not None and keep.size > max_terms:
            # vocab ids are in sorted term order, so a stable sort by -df breaks ties by term
            keep = np.sort(keep[np.argsort(-df[keep], kind="stable")[:max_terms]])
        terms = tuple(corpus.vocab[i] for i in keep)
        return cls(terms=terms, idf=smoothed_idf(df[keep], n))

    @property
    def n_terms(self) -> int:
        return len(self.terms)

    def counts(self, corpus: TokenizedCorpus) -> tuple[sp.csr_matrix, np.ndarray]:
        """Raw term counts (docs x terms, CSR) and each doc's number of known tokens."""
        lookup = pd.Index(self.terms).get_indexer(pd.Index(corpus.vocab, dtype=object))
        cols = lookup[corpus.ids] if corpus.ids.size else np.zeros(0, np.int64)
        rows = corpus.doc_index()
        known = cols >= 0
        mat = sp.csr_matrix(
            (np.ones(int(known.sum()), dtype=np.float64), (rows[known], cols[known])),
            shape=(corpus.n_docs, self.n_terms),
        )
        mat.sum_duplicates()
        n_known = np.bincount(rows[known], minlength=corpus.n_docs).astype(np.int64)
        return mat, n_known

    def transform(self, corpus: TokenizedCorpus) -> tuple[sp.csr_matrix, np.ndarray]:
        """L2-normalised TF-IDF rows (all-zero rows for docs with no known token), known counts."""
        mat, n_known = self.counts(corpus)
        return self.weight(mat), n_known

    def weight(self, counts: sp.csr_matrix) -> sp.csr_matrix:
        """Sublinear TF times IDF, rows L2-normalised."""
        return sublinear_tfidf(counts, self.idf)


# --------------------------------------------------------------------------------------------
# Fields (real text)
# --------------------------------------------------------------------------------------------

MEMBERSHIP_RATIO = 0.90  # share of the best field's cosine a further field needs (see FieldModel)
MIN_MEMBERSHIP_COS = 0.30
SYNONYM_COS = 0.90  # two clusters whose centroids are at least this close are one field
MIN_PRECUTOFF_PER_DIRECTION = 5  # a kept field needs 8 x this many pre-cutoff papers (or extra["min_precutoff_papers"])
NAME_PHRASES = 4
FIELD_MIN_DF, FIELD_MAX_DF_RATIO = 3, 0.3  # the field space's vocabulary band (papers, share)


def _merge_synonyms(centres: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """Union clusters whose centroids have cosine >= SYNONYM_COS; return merged centroids
    (size-weighted means, normalised) in order of each group's lowest cluster index."""
    from scipy.sparse.csgraph import connected_components

    close = sp.csr_matrix(centres @ centres.T >= SYNONYM_COS)
    _, group = connected_components(close, directed=False)
    order = np.unique(group, return_index=True)[1]
    firsts = group[np.sort(order)]
    merged = np.stack([(centres[group == g] * sizes[group == g, None]).sum(axis=0) for g in firsts])
    return normalise_dense(merged)


@dataclass(frozen=True)
class FieldModel:
    """The frozen field-membership rule: everything needed to place a new paper in fields.

    ``projection``: LSA axes (dims x terms) applied after the TF-IDF space, or None;
    ``centres``: every cluster's centroid (kept or not: a paper's best cluster is taken over all);
    ``kept``: the cluster of ``f000``, ``f001``, ... A paper joins its best cluster (when
    positive) and every cluster whose cosine is at least ``membership_ratio`` times the best and
    at least ``min_membership_cos``: its memberships depend on its own text only.
    """

    space: TfidfSpace
    centres: np.ndarray
    kept: tuple[int, ...]
    projection: np.ndarray | None = None
    membership_ratio: float = MEMBERSHIP_RATIO
    min_membership_cos: float = MIN_MEMBERSHIP_COS
    groups: tuple[tuple[int, ...], ...] | None = (
        None  # when set, field j holds the papers of every cluster of groups[j]
    )

    def embed(self, x: sp.csr_matrix) -> sp.csr_matrix | np.ndarray:
        """TF-IDF rows in the clustering space."""
        if self.projection is None:
            return x
        return normalise_dense(np.asarray(x @ self.projection.T))

    def member(self, x: sp.csr_matrix) -> np.ndarray:
        """papers x clusters membership booleans of TF-IDF rows ``x``."""
        sims = np.asarray(self.embed(x) @ self.centres.T)
        best = sims.max(axis=1)
        member = (sims >= self.membership_ratio * best[:, None]) & (sims >= self.min_membership_cos)
        member[np.arange(sims.shape[0]), sims.argmax(axis=1)] |= best > 0
        return member

    def dropping(self, field_ids: Sequence[str]) -> FieldModel:
        """The same rule without the kept fields ``field_ids`` (the others renumbered in order). A
        dropped field's cluster stays among the centres, so no paper moves to another field."""
        gone = {int(f[1:]) for f in field_ids}
        kept = tuple(c for j, c in enumerate(self.kept) if j not in gone)
        return dataclasses.replace(self, kept=kept)

    def regrouped(self, units: Sequence[Sequence[str]]) -> FieldModel:
        """The rule whose field ``f{j:03d}`` is the union of the fields ``units[j]`` (ids of this
        rule's fields, e.g. candidates a construction merged); fields in no unit hold no paper."""
        groups = tuple(tuple(self._clusters(int(f[1:])) for f in unit) for unit in units)
        return dataclasses.replace(self, groups=tuple(tuple(c for g in unit for c in g) for unit in groups))

    def _clusters(self, j: int) -> tuple[int, ...]:
        return self.groups[j] if self.groups is not None else (self.kept[j],)

    def memberships(self, papers: pd.DataFrame) -> pd.DataFrame:
        """Columns arxiv_id, field_id of ``papers`` in the kept fields, sorted by (field_id, arxiv_id)."""
        x, _ = self.space.transform(tokenize_papers(papers))
        return self.membership_frame(papers["arxiv_id"].to_numpy(dtype=object), self.member(x))

    def membership_frame(self, ids: np.ndarray, member: np.ndarray) -> pd.DataFrame:
        """Columns arxiv_id, field_id: ``ids[i]`` in kept field ``f{j:03d}`` wherever
        ``member[i, kept[j]]`` (``member``: papers x clusters, from :meth:`member`), sorted by
        (field_id, arxiv_id). The one place the memberships table is made: the build's
        (:func:`fit_fields`) and a later paper's (:meth:`memberships`)."""
        groups = self.groups if self.groups is not None else tuple((c,) for c in self.kept)
        frames = [
            pd.DataFrame({"arxiv_id": ids[member[:, list(g)].any(axis=1)], "field_id": f"f{j:03d}"})
            for j, g in enumerate(groups)
        ]
        frame = (
            pd.concat(frames, ignore_index=True)
            if frames
            else pd.DataFrame({"arxiv_id": pd.Series(dtype=object), "field_id": pd.Series(dtype=object)})
        )
        return frame.sort_values(["field_id", "arxiv_id"], kind="stable").reset_index(drop=True)


FIELDS_BAR = "{desc}: {percentage:3.0f}%|{bar}| [{elapsed}<{remaining}]"


def build_fields(
    papers: pd.DataFrame, spec: BenchmarkSpec, *, progress: bool = False
) -> tuple[pd.DataFrame, dict[str, FieldInfo]]:
    """Fields from real text (see the module docstring). Returns (memberships, field_info)."""
    memberships, info, _ = fit_fields(papers, spec, progress=progress)
    return memberships, info


def fit_fields(
    papers: pd.DataFrame, spec: BenchmarkSpec, *, progress: bool = False
) -> tuple[pd.DataFrame, dict[str, FieldInfo], FieldModel]:
    """Fields from real text: (memberships of ALL papers sorted by (field_id, arxiv_id),
    field_info, the :class:`FieldModel` that gives any later paper its memberships the same way).

    ``spec.n_fields`` is the number of k-means clusters. ``spec.extra`` may set
    ``field_fit_sample`` (eligible papers, drawn with the seed, that fit the space and clusters;
    default 60,000), ``field_max_terms`` (40,000), ``field_lsa_dims`` (100) and
    ``min_precutoff_papers``.
    """
    from tqdm import tqdm

    # each stage's share of the time (arxiv-sample, 2 cores), so the bar's ETA is the remaining share
    shares = iter((27, 27, 10, 3, 33))
    steps = tqdm(total=100, desc="fields", unit="%", bar_format=FIELDS_BAR, disable=not progress)
    papers = papers.sort_values(["date", "arxiv_id"], kind="stable").reset_index(drop=True)
    dates = papers["date"].astype(str).to_numpy()
    eligible = np.flatnonzero(dates < spec.eligibility_end)
    k = spec.n_fields
    if eligible.size < max(k, 2):
        raise InputError(
            f"the corpus has {eligible.size} papers before eligibility_end {spec.eligibility_end}; "
            f"finding n_fields={k} fields needs at least {max(k, 2)}"
        )
    corpus = tokenize_papers(papers)
    steps.update(next(shares))
    space = TfidfSpace.fit(
        corpus.select(eligible),
        min_df=FIELD_MIN_DF,
        max_df_ratio=FIELD_MAX_DF_RATIO,
        max_terms=int(spec.extra.get("field_max_terms", 40_000)),
    )
    if space.n_terms < 2:
        raise InputError(
            f"{space.n_terms} term(s) occur in at least {FIELD_MIN_DF} and at most {FIELD_MAX_DF_RATIO:.0%} of the "
            f"{eligible.size} papers before "
            f"eligibility_end {spec.eligibility_end}; fields need two or more: the papers are too few or too alike"
        )
    x, _ = space.transform(corpus)
    rng = np.random.default_rng([spec.seed, 2])
    n_fit = min(eligible.size, int(spec.extra.get("field_fit_sample", 60_000)))
    fit_rows = np.sort(rng.choice(eligible, size=n_fit, replace=False))
    dims = min(int(spec.extra.get("field_lsa_dims", 100)), space.n_terms - 1, n_fit - 1)
    projection = lsa_axes(x[fit_rows], dims, spec.seed, n_iter=4)
    z = FieldModel(space=space, centres=np.zeros((0, dims)), kept=(), projection=projection).embed(x)
    steps.update(next(shares))
    labels, centres = spherical_kmeans_dense(z[fit_rows], k, rng)
    centres = _merge_synonyms(centres, np.bincount(labels, minlength=k).astype(np.float64))
    steps.update(next(shares))

    member = FieldModel(space=space, centres=centres, kept=(), projection=projection).member(x)
    pre_mask = dates < spec.codebook_cutoff
    n_elig = member[dates < spec.eligibility_end].sum(axis=0)
    n_pre = member[pre_mask].sum(axis=0)
    min_pre = max(N_DIRECTIONS * MIN_PRECUTOFF_PER_DIRECTION, int(spec.extra.get("min_precutoff_papers", 0)))
    keep = np.flatnonzero((n_elig >= spec.min_field_papers) & (n_pre >= min_pre))
    steps.update(next(shares))
    names, definitions = _field_names(papers, member, keep, pre_mask)
    kept = sorted(keep.tolist(), key=lambda c: (names[c].lower(), c))
    info: dict[str, FieldInfo] = {}
    elig_mask = dates < spec.eligibility_end
    for j, c in enumerate(kept):
        fid = f"f{j:03d}"
        rows = np.flatnonzero(member[:, c] & elig_mask)
        cohesion = float(np.mean(z[rows] @ centres[c])) if rows.size else float("nan")
        info[fid] = FieldInfo(field_id=fid, name=names[c], definition=definitions[c], cohesion=cohesion)
    model = FieldModel(space=space, centres=centres, kept=tuple(int(c) for c in kept), projection=projection)
    memberships = model.membership_frame(papers["arxiv_id"].to_numpy(dtype=object), member)
    steps.update(next(shares))
    steps.close()
    return memberships, info, model


def _field_names(
    papers: pd.DataFrame, member: np.ndarray, keep: np.ndarray, pre_mask: np.ndarray
) -> tuple[dict[int, str], dict[int, str]]:
    """A distinct verbatim phrase naming each kept field, and a one-sentence definition: its best
    completed noun phrase by class-based TF-IDF against all other pre-cutoff papers
    (:mod:`rap_benchmark.pipeline.phrases`) that no larger field took in any spelling.
    """

    from rap_benchmark.pipeline.phrases import listing, maximal_phrases, names_a_thing, phrase_table, rank_phrases

    pre_rows = np.flatnonzero(pre_mask)
    texts = (papers["title"].iloc[pre_rows] + ". " + papers["abstract"].iloc[pre_rows]).tolist()
    table = phrase_table(texts)
    taken: set[frozenset[str]] = set()
    names: dict[int, str] = {}
    definitions: dict[int, str] = {}
    for c in sorted(keep.tolist(), key=lambda c: (-int(member[pre_rows, c].sum()), c)):
        docs = np.flatnonzero(member[pre_rows, c])
        complete = maximal_phrases(table, docs)
        ranked: list[str] = []  # completed noun phrases, best first, until a name and its companions
        name_key = None
        for key, _, _ in rank_phrases(table, docs, min_docs=3, top=None):
            key = complete(key)
            if key in ranked or not names_a_thing(key):
                continue
            ranked.append(key)
            if name_key is None and not _spellings(key) & taken:
                name_key = key
            if name_key is not None and len(ranked) >= NAME_PHRASES:
                break
        if name_key is None:
            names[c] = f"field {c}"
            definitions[c] = "Papers of one text cluster with no distinctive phrase."
            continue
        taken |= _spellings(name_key)
        names[c] = table.surface(name_key, docs)
        others = [table.surface(key, docs) for key in [k for k in ranked if k != name_key][: NAME_PHRASES - 1]]
        definitions[c] = (
            f"Research on {names[c]}, including {listing(others)}." if others else f"Research on {names[c]}."
        )
    return names, definitions


def _spellings(key: str) -> set[frozenset[str]]:
    """The phrase's word sets in its singular spellings: phrases that share one name the same thing."""
    from rap_benchmark.pipeline.phrases import spellings

    return {frozenset(form.split(" ")) for form in spellings(key)}
