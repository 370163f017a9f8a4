"""Rows of strings as integer ids in CSR form, numbered in sorted-vocabulary order.

The phrase table (:mod:`rap_benchmark.pipeline.phrases`) holds a row of phrases per paper: as
int32 ids they take a fraction of the memory of strings, and sorted numbering keeps every count
and tie-break what sorting the strings would give.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable

import numpy as np


def intern_rows(rows: Iterable[Iterable[str]], n_rows: int) -> tuple[tuple[str, ...], np.ndarray, np.ndarray]:
    """(vocab, indptr, ids) of ``n_rows`` rows: row ``d`` is ``vocab[ids[indptr[d]:indptr[d + 1]]]``.

    ``rows`` is read once (a generator keeps only its current rows' strings alive); ``vocab`` is
    sorted and ids index it.
    """
    index: dict[str, int] = {}
    ids = array("i")
    indptr = np.zeros(n_rows + 1, dtype=np.int64)
    d = -1
    for d, row in enumerate(rows):
        ids.extend([index.setdefault(s, len(index)) for s in row])
        indptr[d + 1] = len(ids)
    if d + 1 != n_rows:
        raise ValueError(f"expected {n_rows} rows, read {d + 1}")
    vocab = sorted(index)
    for new, s in enumerate(vocab):
        index[s] = new  # values only: the dict keeps first-read order, the old ids' order
    remap = np.fromiter(index.values(), dtype=np.int32, count=len(index))
    del index
    out = remap[np.frombuffer(ids, dtype=np.int32)] if len(ids) else np.zeros(0, np.int32)
    return tuple(vocab), indptr, out
