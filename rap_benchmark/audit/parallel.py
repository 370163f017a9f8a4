"""Parallel-instrument agreement (SPEC 3.3, seed: "independently drafted Opus instrument").

The second instrument here is an independent offline method: per field, spherical k-means with
eight clusters over binary bag-of-words vectors of the field's pre-cutoff papers (a different
representation, initialisation and decision rule from the frozen prototype instrument), then
every membership goes to its nearest centroid. Its slots are aligned to the frozen directions
with the Hungarian algorithm fitted on a hash-chosen half of the pre-cutoff papers, so both
periods are scored out of sample.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import scipy.sparse as sp

from rap_benchmark.audit.align import cross_fit, direction_index, fit_half
from rap_benchmark.records import N_DIRECTIONS
from rap_benchmark.text import tokenize


def _binary_bow(texts: list[str], vocab: dict[str, int] | None = None) -> tuple[sp.csr_matrix, dict[str, int]]:
    docs = [sorted(set(tokenize(t))) for t in texts]
    if vocab is None:
        vocab = {w: i for i, w in enumerate(sorted({w for d in docs for w in d}))}
    rows, cols = [], []
    for r, d in enumerate(docs):
        idx = [vocab[w] for w in d if w in vocab]
        rows.extend([r] * len(idx))
        cols.extend(idx)
    m = sp.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(len(docs), len(vocab)))
    norms = np.sqrt(np.asarray(m.sum(axis=1)).ravel())
    norms[norms == 0] = 1.0
    return sp.csr_matrix(sp.diags(1.0 / norms) @ m), vocab


def spherical_kmeans(x: sp.csr_matrix, k: int, rng: np.random.Generator, n_iter: int = 30) -> np.ndarray:
    """Centroids (k x d, unit rows) by k-means++ seeding and cosine Lloyd iterations."""
    n = x.shape[0]
    if n < k:
        raise ValueError(f"need at least {k} documents to draw {k} directions, got {n}")
    first = int(rng.integers(n))
    centres = [x[first].toarray().ravel()]
    best = np.asarray(x @ centres[0]).ravel()
    for _ in range(1, k):
        dist = np.clip(1.0 - best, 0.0, None) + 1e-12
        nxt = int(rng.choice(n, p=dist / dist.sum()))
        centres.append(x[nxt].toarray().ravel())
        best = np.maximum(best, np.asarray(x @ centres[-1]).ravel())
    c = np.vstack(centres)
    labels = np.full(n, -1)
    for _ in range(n_iter):
        new = np.asarray(x @ c.T).argmax(axis=1)
        if np.array_equal(new, labels):
            break
        labels = new
        for j in range(k):
            members = labels == j
            v = np.asarray(x[members].sum(axis=0)).ravel() if members.any() else c[j]
            norm = np.linalg.norm(v)
            c[j] = v / norm if norm > 0 else c[j]
    return c


def second_instrument(papers: pd.DataFrame, assignments: pd.DataFrame, cutoff: str, *, seed: int) -> pd.DataFrame:
    """Label every membership with a second-instrument slot (``S0``..``S7``) per field."""
    text = dict(zip(papers["arxiv_id"], papers["title"] + ". " + papers["abstract"], strict=True))
    out = []
    for n, (field_id, rows) in enumerate(assignments.groupby("field_id", sort=True)):
        rows = rows.sort_values(["date", "arxiv_id"])
        pre = rows["date"].to_numpy() < cutoff
        texts = [text[a] for a in rows["arxiv_id"]]
        x_pre, vocab = _binary_bow([t for t, p in zip(texts, pre, strict=True) if p])
        x_all, _ = _binary_bow(texts, vocab)
        centres = spherical_kmeans(x_pre, N_DIRECTIONS, np.random.default_rng([seed, n]))
        slot = np.asarray(x_all @ centres.T).argmax(axis=1)
        out.append(pd.DataFrame({"arxiv_id": rows["arxiv_id"].to_numpy(), "field_id": field_id, "slot": slot}))
    return pd.concat(out, ignore_index=True)


@dataclass(frozen=True)
class Interval:
    estimate: float
    lo: float
    hi: float


def field_resampled(values: np.ndarray, *, n_resamples: int, seed: int) -> Interval:
    """Percentile interval of the mean over fields, resampling fields with replacement."""
    values = values[np.isfinite(values)]
    if values.size == 0:
        return Interval(float("nan"), float("nan"), float("nan"))
    rng = np.random.default_rng(seed)
    stats = values[rng.integers(0, values.size, size=(n_resamples, values.size))].mean(axis=1)
    lo, hi = np.percentile(stats, [2.5, 97.5])
    return Interval(float(values.mean()), float(lo), float(hi))


def parallel_agreement(
    papers: pd.DataFrame,
    assignments: pd.DataFrame,
    second: pd.DataFrame,
    cutoff: str,
    *,
    n_resamples: int,
    seed: int,
) -> tuple[pd.DataFrame, dict[str, Interval]]:
    """Per-field out-of-sample agreement before vs from the cutoff, and field-resampled summaries.

    ``second`` has columns arxiv_id, field_id, slot (0..7). Returns the per-field table and the
    intervals for ``overall``, ``pre``, ``post`` and the paired ``change`` (post - pre).
    """
    merged = assignments.merge(second, on=["arxiv_id", "field_id"], how="inner", validate="one_to_one")
    rows = []
    for field_id, g in merged.groupby("field_id", sort=True):
        frozen = direction_index(g["primary"].to_numpy())
        slots = g["slot"].to_numpy().astype(np.int64)
        pre = g["date"].to_numpy() < cutoff
        fit = pre & fit_half(g["arxiv_id"].to_numpy())
        res = cross_fit(frozen, slots, fit)
        a = res.agree
        rows.append(
            {
                "field_id": field_id,
                "n_fit": res.n_fit,
                "n_scored": int(np.isfinite(a).sum()),
                "agree_pre": float(np.nanmean(a[pre])) if np.isfinite(a[pre]).any() else np.nan,
                "agree_post": float(np.nanmean(a[~pre])) if np.isfinite(a[~pre]).any() else np.nan,
                "agree_all": float(np.nanmean(a)) if np.isfinite(a).any() else np.nan,
            }
        )
    table = pd.DataFrame(rows)
    table["change"] = table["agree_post"] - table["agree_pre"]
    summary = {
        name: field_resampled(table[col].to_numpy(dtype=float), n_resamples=n_resamples, seed=seed)
        for name, col in (("overall", "agree_all"), ("pre", "agree_pre"), ("post", "agree_post"), ("change", "change"))
    }
    return table, summary


def truth_agreement(assignments: pd.DataFrame, truth: pd.DataFrame) -> pd.DataFrame:
    """Mini only: per-field share of memberships whose frozen primary equals the latent truth."""
    merged = assignments.merge(truth, on=["arxiv_id", "field_id"], how="inner")
    merged["match"] = (merged["primary"] == merged["true_direction"]).astype(float)
    merged["in_pair"] = (merged["match"] > 0) | (merged["secondary"] == merged["true_direction"])
    return (
        merged.groupby("field_id", sort=True)
        .agg(n=("match", "size"), exact=("match", "mean"), within_pair=("in_pair", "mean"))
        .reset_index()
    )
