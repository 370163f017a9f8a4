"""The two hot loops of search, each as a numba kernel and a pure-numpy fallback.

* ``build_postings``: turn a set of documents of a :class:`~rap_benchmark.bm25.tokens.TokenTable`
  (given in index order) into term-major postings whose documents ascend within each term.
* ``query_function``: the kernel that scores one query on the slice of documents whose day lies
  in ``[lo_day, hi_day)`` with that slice's own N, df and avgdl, and returns the top ``k`` by
  (score desc, id rank asc) and the number of documents matching at least one term.

Both backends perform the same floating-point operations in the same order (per-term IDF with
``math.log``; contributions ``idf * (tf / (k1 * ((1 - b) + b * dl / avgdl) + tf))`` added to a
zeroed float64 accumulator term by term in query order), so they return bit-identical scores.
That arithmetic is also the one ``bm25s`` (method ``lucene``) performs.
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np

Backend = Literal["auto", "numba", "numpy"]

try:  # numba is an optional accelerator ("fast" extra); the numpy path is the reference
    import numba as _numba

    HAVE_NUMBA = True
except ImportError:  # pragma: no cover - exercised only where numba is absent
    _numba = None
    HAVE_NUMBA = False


def resolve_backend(backend: Backend) -> Literal["numba", "numpy"]:
    """``auto`` picks numba when it is importable; asking for numba without it is an error."""
    if backend == "auto":
        return "numba" if HAVE_NUMBA else "numpy"
    if backend == "numba" and not HAVE_NUMBA:
        raise RuntimeError("backend='numba' requested but numba is not installed (pip install numba)")
    if backend not in ("numba", "numpy"):
        raise ValueError(f"unknown backend {backend!r} (expected auto, numba or numpy)")
    return backend


# -- build -----------------------------------------------------------------------------------


def doc_dtype(n_docs: int) -> np.dtype:
    """The narrowest unsigned type that holds index positions ``0..n_docs-1`` (postings are the
    bulk of an index, so 2 bytes instead of 4 per posting matters at paper scale)."""
    return np.dtype(np.uint16) if n_docs <= np.iinfo(np.uint16).max else np.dtype(np.int32)


def _build_numpy(doc_ptr, term, tf, rows, n_vocab, doc_proto):
    lens = doc_ptr[rows + 1] - doc_ptr[rows]
    total = int(lens.sum())
    first = np.cumsum(lens) - lens
    src = np.repeat(doc_ptr[rows] - first, lens) + np.arange(total, dtype=np.int64)
    order = np.argsort(term[src], kind="stable")
    terms, counts = np.unique(term[src][order], return_counts=True)
    indptr = np.zeros(len(terms) + 1, dtype=np.int64)
    np.cumsum(counts, out=indptr[1:])
    post_doc = np.repeat(np.arange(len(rows)).astype(doc_proto.dtype), lens)[order]
    return terms.astype(np.int32), indptr, post_doc, tf[src[order]]


def _build_numba_py(doc_ptr, term, tf, rows, n_vocab, doc_proto):  # compiled below; = _build_numpy
    counts = np.zeros(n_vocab, np.int64)
    for j in range(len(rows)):
        g = rows[j]
        for p in range(doc_ptr[g], doc_ptr[g + 1]):
            counts[term[p]] += 1
    n_terms = 0
    for v in range(n_vocab):
        if counts[v] > 0:
            n_terms += 1
    terms = np.empty(n_terms, np.int32)
    indptr = np.empty(n_terms + 1, np.int64)
    t = 0
    acc = 0
    for v in range(n_vocab):
        c = counts[v]
        if c > 0:
            terms[t] = v
            indptr[t] = acc
            counts[v] = acc  # from here on: the write cursor of term v
            acc += c
            t += 1
    indptr[n_terms] = acc
    post_doc = np.empty(acc, doc_proto.dtype)
    post_tf = np.empty(acc, tf.dtype)
    for j in range(len(rows)):
        g = rows[j]
        for p in range(doc_ptr[g], doc_ptr[g + 1]):
            v = term[p]
            q = counts[v]
            post_doc[q] = j
            post_tf[q] = tf[p]
            counts[v] = q + 1
    return terms, indptr, post_doc, post_tf


def build_postings(
    doc_ptr: np.ndarray, term: np.ndarray, tf: np.ndarray, rows: np.ndarray, n_vocab: int, backend: Backend = "auto"
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Postings of the documents ``rows`` (token-table rows, in index order).

    Returns ``(terms, indptr, post_doc, post_tf)``: the distinct term ids present (ascending),
    term ``terms[j]``'s postings ``[indptr[j], indptr[j+1])``, each posting's index position
    (ascending within a term; type :func:`doc_dtype`) and its term frequency (``tf``'s type).
    """
    rows = np.ascontiguousarray(rows, dtype=np.int64)
    proto = np.empty(0, dtype=doc_dtype(len(rows)))
    build = _build_numba if resolve_backend(backend) == "numba" else _build_numpy
    terms, indptr, post_doc, post_tf = build(doc_ptr, term, tf, rows, n_vocab, proto)
    if indptr[-1] <= np.iinfo(np.int32).max:  # half the bytes for a field's term table
        indptr = indptr.astype(np.int32)
    return terms, indptr, post_doc, post_tf


# -- query -----------------------------------------------------------------------------------


def _empty_result() -> tuple[np.ndarray, np.ndarray, int]:
    return np.zeros(0, np.int64), np.zeros(0, np.float64), 0


def _query_numpy(
    terms, indptr, post_doc, post_tf, doc_len, cum_len, day, id_rank, rows, norm, qterms, lo_day, hi_day, k1, b, k
):
    lo = int(np.searchsorted(day, lo_day, side="left"))
    hi = int(np.searchsorted(day, hi_day, side="left"))
    if hi <= lo:
        return _empty_result()
    n = hi - lo
    if len(norm) != n:
        norm = slice_norms(doc_len, lo, hi, k1, b, backend="numpy")
    scores = np.zeros(n, np.float64)
    for g in qterms:
        j = int(np.searchsorted(terms, g))
        if j >= len(terms) or terms[j] != g:
            continue
        s, e = int(indptr[j]), int(indptr[j + 1])
        seg = post_doc[s:e]
        a = s + int(np.searchsorted(seg, lo))
        c = s + int(np.searchsorted(seg, hi))
        df = c - a
        if df == 0:
            continue
        idf = math.log(1.0 + (n - df + 0.5) / (df + 0.5))
        rel = post_doc[a:c].astype(np.int64) - lo
        tf = post_tf[a:c].astype(np.float64)
        scores[rel] += idf * (tf / (norm[rel] + tf))
    hits = np.flatnonzero(scores > 0.0)
    total = len(hits)
    if total == 0 or k <= 0:
        return np.zeros(0, np.int64), np.zeros(0, np.float64), total
    hit_scores = scores[hits]
    if total > k:
        kth = -np.partition(-hit_scores, k - 1)[k - 1]
        keep = hit_scores >= kth
        hits, hit_scores = hits[keep], hit_scores[keep]
    order = np.lexsort((id_rank[hits + lo], -hit_scores))[:k]
    return rows[hits[order] + lo].astype(np.int64), hit_scores[order], total


def _query_numba_py(
    terms, indptr, post_doc, post_tf, doc_len, cum_len, day, id_rank, rows, norm, qterms, lo_day, hi_day, k1, b, k
):
    lo = np.searchsorted(day, lo_day)
    hi = np.searchsorted(day, hi_day)
    if hi <= lo:
        return np.zeros(0, np.int64), np.zeros(0, np.float64), 0
    n = hi - lo
    avgdl = (cum_len[hi] - cum_len[lo]) / n
    nq = len(qterms)
    starts = np.zeros(nq, np.int64)
    ends = np.zeros(nq, np.int64)
    idf = np.zeros(nq, np.float64)
    n_post = 0
    for i in range(nq):
        j = np.searchsorted(terms, qterms[i])
        if j >= len(terms) or terms[j] != qterms[i]:
            continue
        s = indptr[j]
        e = indptr[j + 1]
        a = s + np.searchsorted(post_doc[s:e], lo)
        c = s + np.searchsorted(post_doc[s:e], hi)
        df = c - a
        if df == 0:
            continue
        starts[i] = a
        ends[i] = c
        idf[i] = math.log(1.0 + (n - df + 0.5) / (df + 0.5))
        n_post += df
    if len(norm) != n:  # no precomputed slice norms: compute the ones this query touches
        norm = np.empty(n, np.float64)
        for i in range(nq):
            for p in range(starts[i], ends[i]):
                d = post_doc[p]
                norm[d - lo] = k1 * ((1.0 - b) + b * np.float64(doc_len[d]) / avgdl)
    scores = np.zeros(n, np.float64)
    touched = np.empty(min(n_post, n) + 1, np.int64)
    n_hit = 0
    for i in range(nq):
        w = idf[i]
        for p in range(starts[i], ends[i]):
            r = post_doc[p] - lo
            tf = np.float64(post_tf[p])
            touched[n_hit] = r  # branch-free append: kept only when r is new
            n_hit += scores[r] == 0.0
            scores[r] += w * (tf / (norm[r] + tf))
    m = min(k, n_hit)
    if m <= 0:
        return np.zeros(0, np.int64), np.zeros(0, np.float64), n_hit
    best = np.empty(m, np.int64)
    filled = 0
    for t in range(n_hit):
        r = touched[t]
        sc = scores[r]
        rank = id_rank[r + lo]
        if filled < m:
            pos = filled
            filled += 1
        else:
            last = best[m - 1]
            ls = scores[last]
            if sc > ls or (sc == ls and rank < id_rank[last + lo]):
                pos = m - 1
            else:
                continue
        while pos > 0:
            prev = best[pos - 1]
            ps = scores[prev]
            if sc > ps or (sc == ps and rank < id_rank[prev + lo]):
                best[pos] = prev
                pos -= 1
            else:
                break
        best[pos] = r
    out_rows = np.empty(m, np.int64)
    out_scores = np.empty(m, np.float64)
    for i in range(m):
        out_rows[i] = rows[best[i] + lo]
        out_scores[i] = scores[best[i]]
    return out_rows, out_scores, n_hit


def _slice_norms_numba_py(doc_len, lo, hi, k1, b):
    n = hi - lo
    out = np.empty(max(n, 0), np.float64)
    if n <= 0:
        return out
    total = 0
    for d in range(lo, hi):
        total += np.int64(doc_len[d])
    avgdl = total / n
    for d in range(lo, hi):
        out[d - lo] = k1 * ((1.0 - b) + b * np.float64(doc_len[d]) / avgdl)
    return out


def slice_norms(doc_len: np.ndarray, lo: int, hi: int, k1: float, b: float, backend: Backend = "auto") -> np.ndarray:
    """``k1 * ((1 - b) + b * dl / avgdl)`` for index positions ``[lo, hi)``, with that slice's
    avgdl: the length normalisation shared by every query on the slice."""
    if resolve_backend(backend) == "numba":
        return _slice_norms_numba(doc_len, np.int64(lo), np.int64(hi), float(k1), float(b))
    n = hi - lo
    if n <= 0:
        return np.zeros(0, np.float64)
    avgdl = int(doc_len[lo:hi].astype(np.int64).sum()) / n
    return k1 * ((1.0 - b) + b * doc_len[lo:hi].astype(np.float64) / avgdl)


if HAVE_NUMBA:
    _slice_norms_numba = _numba.njit(cache=True, nogil=True)(_slice_norms_numba_py)
    _build_numba = _numba.njit(cache=True, nogil=True)(_build_numba_py)
    _query_numba = _numba.njit(cache=True, nogil=True)(_query_numba_py)
else:  # pragma: no cover
    _slice_norms_numba = _slice_norms_numba_py
    _build_numba = _build_numba_py
    _query_numba = _query_numba_py


def query_function(backend: Backend = "auto"):
    """The query kernel of a backend; callers on a hot path bind it once instead of dispatching per call.

    Its arguments: ``(terms, indptr, post_doc, post_tf, doc_len, cum_len, day, id_rank, rows, norm,
    qterms, lo_day, hi_day, k1, b, k)``. It scores the distinct query terms ``qterms`` (global term
    ids) on days ``[lo_day, hi_day)``. ``norm`` holds :func:`slice_norms` of exactly the slice (it
    saves a division per posting); pass an empty array to have the kernel compute what it needs.
    Returns ``(rows, scores, total_hits)``: ``rows[position]`` of the top ``k`` documents by
    (score desc, ``id_rank`` asc), their float64 scores, and the number of documents in the slice
    that contain at least one query term.
    """
    return _query_numba if resolve_backend(backend) == "numba" else _query_numpy
