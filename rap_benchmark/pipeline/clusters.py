"""Row normalisation and seeded spherical k-means on dense LSA rows (fields, directions, the
parallel instrument)."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp


def l2_normalise_rows(mat: sp.csr_matrix) -> sp.csr_matrix:
    norms = np.sqrt(np.asarray(mat.multiply(mat).sum(axis=1)).ravel())
    inv = np.divide(1.0, norms, out=np.zeros_like(norms), where=norms > 0)
    return sp.csr_matrix(sp.diags(inv) @ mat)


def normalise_dense(mat: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(mat, axis=1, keepdims=True)
    return np.divide(mat, norms, out=np.zeros_like(mat), where=norms > 0)


def _cluster_sums(labels: np.ndarray, y: np.ndarray, k: int) -> np.ndarray:
    """k x dims: row c the sum of the rows of ``y`` labelled c, added in row order from zero.

    The one-hot (k x n) CSR matrix times ``y``, as building it from (label, row) pairs gives, but
    with its rows' columns put in order by a stable radix sort of small integer labels, not by a
    conversion from COO form (the sums run through the same sparse product, so they are the same
    floats)."""
    n = y.shape[0]
    small = labels.astype(np.int16) if k <= np.iinfo(np.int16).max else labels
    order = np.argsort(small, kind="stable")  # radix sort for 16-bit keys: rows of each label ascending
    indptr = np.zeros(k + 1, dtype=np.int64)
    np.cumsum(np.bincount(labels, minlength=k), out=indptr[1:])
    return np.asarray(sp.csr_matrix((np.ones(n), order, indptr), shape=(k, n)) @ y)


def spherical_kmeans_dense(
    y: np.ndarray, k: int, rng: np.random.Generator, *, n_init: int = 1, n_iter: int = 50
) -> tuple[np.ndarray, np.ndarray]:
    """Spherical k-means of L2-normalised dense rows; returns (labels, k x dims centroids).

    Seeded k-means++ starts (cosine distance), Lloyd iterations until labels stop changing; the
    start with the largest objective (sum of cosines to the own centroid) wins, the first on
    ties. Argmax ties go to the lowest index; an emptied cluster takes the worst-fitted row.
    """
    n = y.shape[0]
    if n < k:
        raise ValueError(f"cannot form {k} clusters from {n} rows")
    best: tuple[float, np.ndarray, np.ndarray] | None = None
    for _ in range(max(1, n_init)):
        first = int(rng.integers(n))
        chosen = [first]
        near = y @ y[first]
        for _ in range(1, k):
            dist = np.clip(1.0 - near, 0.0, None)
            total = float(dist.sum())
            nxt = int(rng.choice(n, p=dist / total)) if total > 0 else int(rng.integers(n))
            chosen.append(nxt)
            near = np.maximum(near, y @ y[nxt])
        centres = y[chosen].copy()
        labels = np.full(n, -1, dtype=np.int64)
        for _ in range(n_iter):
            sims = y @ centres.T
            new = sims.argmax(axis=1)
            if np.array_equal(new, labels):
                break
            labels = new
            sums = _cluster_sums(labels, y, k)
            fit = sims[np.arange(n), labels]
            for empty in np.flatnonzero(np.bincount(labels, minlength=k) == 0):
                worst = int(np.argmin(fit))
                sums[empty] = y[worst]
                fit[worst] = np.inf
            centres = normalise_dense(sums)
        sims = y @ centres.T
        labels = sims.argmax(axis=1)
        objective = float(sims[np.arange(n), labels].sum())
        if best is None or objective > best[0]:
            best = (objective, labels, centres)
    assert best is not None
    return best[1], best[2]
