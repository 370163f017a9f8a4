"""BM25Index: exact BM25 (Lucene variant) over any date-restricted slice of a document set.

Documents are kept sorted by (date, id), so every universe "documents dated in
[lo_date, hi_date)" is a contiguous slice of index positions. Postings are term-major with
positions ascending, so a term's document frequency inside a slice is a difference of two
binary searches, and the slice's N and total length come from prefix sums. Scoring a query on a
slice therefore gives exactly what a BM25 index built on only that slice's documents would give:

    score(d, q) = sum over distinct query terms t in d of
                  IDF(t) * tf / (k1 * (1 - b + b * |d| / avgdl) + tf),
    IDF(t) = ln(1 + (N - df + 0.5) / (df + 0.5)),

with N, df and avgdl those of the slice, in float64. Results are ordered by (score desc,
document id asc); ``total_hits`` is the number of slice documents containing any query term.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from rap_benchmark.bm25 import kernels
from rap_benchmark.bm25.kernels import Backend
from rap_benchmark.bm25.tokens import TokenTable, tokenize_texts
from rap_benchmark.core.dates import parse_date, to_days
from rap_benchmark.core.text import query_terms

DAY_MIN = -(2**31)
DAY_MAX = 2**31 - 1
MAX_CACHED_SLICES = 32
_NO_NORMS = np.zeros(0, dtype=np.float64)


class RankedResult(NamedTuple):
    """Top documents of one query: ids and float64 scores in rank order, and the hit count."""

    ids: list[str]
    scores: list[float]
    total_hits: int


def days_of(dates: Sequence[str] | np.ndarray) -> np.ndarray:
    """``YYYY-MM-DD`` strings (longer ISO timestamps are cut to the day) -> int32 days since 1970."""
    arr = np.asarray([str(d)[:10] for d in dates], dtype="datetime64[D]")
    return arr.astype(np.int64).astype(np.int32)


def day_bound(value: object | None, default: int) -> int:
    """A date argument as an int day, or ``default`` when it is None."""
    return default if value is None else to_days(parse_date(value))  # type: ignore[arg-type]


@dataclass(slots=True, eq=False, repr=False, kw_only=True)
class BM25Index:
    """An exact BM25 index over documents sorted by (date, id); see the module docstring.

    Build one with :meth:`build` (from raw texts) or :meth:`from_token_table` (from tokens
    already in a :class:`TokenTable`, sharing its vocabulary). Query with :meth:`search`.
    """

    k1: float
    b: float
    backend: Backend
    term_index: Mapping[str, int]
    ids: Sequence[str]  # shared id column; position i of this index is document ids[rows[i]]
    rows: np.ndarray
    day: np.ndarray
    id_rank: np.ndarray
    doc_len: np.ndarray
    terms: np.ndarray
    indptr: np.ndarray
    post_doc: np.ndarray
    post_tf: np.ndarray
    cum_len: np.ndarray = field(init=False)
    _norms: dict[tuple[int, int], np.ndarray] = field(init=False)
    _query: Any = field(init=False)

    def __post_init__(self) -> None:
        self.k1, self.b = float(self.k1), float(self.b)
        self.backend = kernels.resolve_backend(self.backend)
        self.cum_len = np.zeros(len(self.doc_len) + 1, dtype=np.int64)
        np.cumsum(self.doc_len, out=self.cum_len[1:])
        self._norms = {}
        self._query = kernels.query_function(self.backend)

    # -- construction ----------------------------------------------------------------------
    @classmethod
    def build(
        cls,
        doc_ids: Sequence[str],
        texts: Sequence[str],
        dates: Sequence[str],
        *,
        k1: float = 1.5,
        b: float = 0.75,
        backend: Backend = "auto",
    ) -> BM25Index:
        """Index arbitrary documents (tokenised with :func:`rap_benchmark.core.text.tokenize`).

        ``dates`` are ``YYYY-MM-DD`` (longer ISO timestamps are cut to the day); ids must be
        unique. Documents are sorted internally by (date, id).
        """
        if not len(doc_ids) == len(texts) == len(dates):
            raise ValueError("doc_ids, texts and dates must have the same length")
        ids = [str(i) for i in doc_ids]
        if len(set(ids)) != len(ids):
            raise ValueError("doc_ids must be unique")
        table = tokenize_texts(texts)
        days = days_of(dates)
        id_rank = id_ranks(ids)
        order = np.lexsort((id_rank, days))
        return cls.from_token_table(table, order, ids=ids, days=days, id_rank=id_rank, k1=k1, b=b, backend=backend)

    @classmethod
    def from_token_table(
        cls,
        table: TokenTable,
        rows: np.ndarray,
        *,
        ids: Sequence[str],
        days: np.ndarray,
        id_rank: np.ndarray,
        k1: float,
        b: float,
        backend: Backend = "auto",
        term_index: Mapping[str, int] | None = None,
    ) -> BM25Index:
        """Index the token-table rows ``rows``, which must already be in (date, id) order.

        ``ids``, ``days`` and ``id_rank`` are per token-table row (shared, not copied);
        ``id_rank`` orders rows by id. ``term_index`` (term -> id in ``table.vocab``) may be
        passed to share one dictionary among many indexes.
        """
        rows = np.ascontiguousarray(rows, dtype=np.int64)
        day = np.ascontiguousarray(days[rows], dtype=np.int32)
        rank = np.ascontiguousarray(id_rank[rows], dtype=np.int64)
        if len(rows) > 1:
            d = np.diff(day.astype(np.int64))
            if (d < 0).any() or ((d == 0) & (np.diff(rank) <= 0)).any():
                raise ValueError("rows must be in strictly increasing (date, id) order")
        terms, indptr, post_doc, post_tf = kernels.build_postings(
            table.doc_ptr, table.term, table.tf, rows, len(table.vocab), backend
        )
        return cls(
            k1=k1,
            b=b,
            backend=backend,
            term_index=table.term_index() if term_index is None else term_index,
            ids=ids,
            rows=rows,
            day=day,
            id_rank=rank,
            doc_len=np.ascontiguousarray(table.doc_len[rows], dtype=np.int32),
            terms=terms,
            indptr=indptr,
            post_doc=post_doc,
            post_tf=post_tf,
        )

    # -- queries ---------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.rows)

    @property
    def nbytes(self) -> int:
        """Bytes held by this index's own arrays (the shared vocabulary and ids excluded)."""
        arrays = (self.rows, self.day, self.id_rank, self.doc_len, self.cum_len, self.terms, self.indptr)
        return sum(a.nbytes for a in arrays) + self.post_doc.nbytes + self.post_tf.nbytes

    def term_ids(self, query: str) -> np.ndarray:
        """Distinct known query terms (first-seen order) as vocabulary ids."""
        index = self.term_index
        return np.array([index[t] for t in query_terms(query) if t in index], dtype=np.int64)

    def slice_bounds(self, lo_day: int, hi_day: int) -> tuple[int, int]:
        """Index positions ``[lo, hi)`` of the documents dated in ``[lo_day, hi_day)``."""
        lo = int(np.searchsorted(self.day, lo_day, side="left"))
        hi = int(np.searchsorted(self.day, hi_day, side="left"))
        return lo, max(lo, hi)

    def slice_norms(self, lo_day: int, hi_day: int) -> np.ndarray:
        """The length normalisations of the slice ``[lo_day, hi_day)``, computed once per slice
        (about 8 bytes per document of the slice; at most ``MAX_CACHED_SLICES`` per index)."""
        key = (lo_day, hi_day)
        norm = self._norms.get(key)
        if norm is None:
            lo, hi = self.slice_bounds(lo_day, hi_day)
            norm = kernels.slice_norms(self.doc_len, lo, hi, self.k1, self.b, self.backend)
            if len(self._norms) >= MAX_CACHED_SLICES:
                try:  # evict the oldest slice; another thread may be doing the same
                    del self._norms[next(iter(self._norms))]
                except (RuntimeError, StopIteration, KeyError):
                    pass
            self._norms[key] = norm
        return norm

    def ranked_positions(
        self, qterms: np.ndarray, lo_day: int, hi_day: int, k: int, *, cache_slice: bool = True
    ) -> tuple[np.ndarray, np.ndarray, int]:
        """Low-level query on days ``[lo_day, hi_day)``: the top documents' ``rows`` (positions in
        the shared id column), their scores, and the total hits.

        With ``cache_slice`` the slice's length normalisations are kept for later queries on the
        same slice (worth it for slices queried repeatedly, such as episode universes)."""
        norm = self.slice_norms(lo_day, hi_day) if cache_slice else _NO_NORMS
        return self._query(
            self.terms,
            self.indptr,
            self.post_doc,
            self.post_tf,
            self.doc_len,
            self.cum_len,
            self.day,
            self.id_rank,
            self.rows,
            norm,
            qterms,
            lo_day,
            hi_day,
            self.k1,
            self.b,
            k,
        )

    def search(self, query: str, *, lo_date: str | None = None, hi_date: str | None = None, k: int = 8) -> RankedResult:
        """BM25-OR search over the documents with ``lo_date <= date < hi_date``.

        N, df and avgdl are those of exactly that set of documents. ``None`` leaves a side open.
        """
        lo_day = day_bound(lo_date, DAY_MIN)
        hi_day = day_bound(hi_date, DAY_MAX)
        rows, scores, total = self.ranked_positions(self.term_ids(query), lo_day, hi_day, k)
        ids = self.ids
        return RankedResult([ids[r] for r in rows.tolist()], scores.tolist(), int(total))


def id_ranks(ids: Sequence[str]) -> np.ndarray:
    """Each id's rank in sorted code-point order (Python's ``sorted``); ids must be unique.

    Arrow sorts UTF-8 bytes, and UTF-8 byte order is code-point order."""
    import pyarrow as pa
    import pyarrow.compute as pc

    order = pc.sort_indices(pa.array(list(ids), type=pa.large_string())).to_numpy().astype(np.int64)
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order), dtype=np.int64)
    return rank
