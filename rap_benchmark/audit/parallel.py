"""Parallel-instrument agreement (the paper's parallel instruments: "independently drafted Opus instrument").

The second instrument never reads the frozen codebook or labels: its own text representation
(scikit-learn's tokenizer, English stop words, unigram TF-IDF), its own seed, its own eight
directions per field (spherical k-means in the field's pre-cutoff LSA space), each membership at
its nearest one. Its slots are aligned to the frozen directions by the Hungarian fit on a
hash-chosen half of the pre-cutoff papers, so both periods are scored out of sample.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from rap_benchmark.audit.align import cross_fit, direction_index, fit_half
from rap_benchmark.audit.intervals import Estimate, field_resampled, finite_mean
from rap_benchmark.core.records import DIRECTION_KEYS, N_DIRECTIONS

SECOND_DIMS = 8
SECOND_INITS = 10
SECOND_SEED_SALT = 977


REPRESENTATIONS = ("unigram", "bigram")


def second_instrument(
    papers: pd.DataFrame, assignments: pd.DataFrame, cutoff: str, *, seed: int, representation: str = "unigram"
) -> pd.DataFrame:
    """Columns arxiv_id, field_id, slot (0..7, arbitrary order): every membership's slot.
    ``representation``: ``unigram`` (the audit's) or ``bigram`` (sublinear, no stop words: a third
    instrument, to measure how far two independent text instruments can agree at all)."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.utils.extmath import randomized_svd

    from rap_benchmark.pipeline.clusters import normalise_dense, spherical_kmeans_dense

    text = (papers["title"].astype(str) + " " + papers["abstract"].astype(str)).to_numpy(dtype=object)
    row_of = pd.Series(np.arange(len(papers)), index=papers["arxiv_id"].to_numpy())
    out = []
    for n, (field_id, rows) in enumerate(assignments.groupby("field_id", sort=True)):
        rows = rows.sort_values(["date", "arxiv_id"])
        pos = row_of.loc[rows["arxiv_id"].to_numpy()].to_numpy()
        pre = rows["date"].to_numpy().astype(str) < cutoff
        if representation == "unigram":
            vec = TfidfVectorizer(stop_words="english", min_df=2, max_df=0.5, dtype=np.float64)
        elif representation == "bigram":
            vec = TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True, min_df=2, max_df=0.5, dtype=np.float64)
        else:
            raise ValueError(f"representation must be one of {', '.join(REPRESENTATIONS)}, not {representation!r}")
        if pre.sum() < N_DIRECTIONS:
            continue
        x_pre = vec.fit_transform(text[pos[pre]])
        dims = max(1, min(SECOND_DIMS, min(x_pre.shape) - 1))
        _, _, vt = randomized_svd(x_pre, dims, n_iter=7, random_state=SECOND_SEED_SALT + seed + n)
        y_pre = normalise_dense(np.asarray(x_pre @ vt.T))
        rng = np.random.default_rng([SECOND_SEED_SALT, seed, n])
        _, centres = spherical_kmeans_dense(y_pre, N_DIRECTIONS, rng, n_init=SECOND_INITS)
        y_all = normalise_dense(np.asarray(vec.transform(text[pos]) @ vt.T))
        slot = (y_all @ centres.T).argmax(axis=1)
        out.append(pd.DataFrame({"arxiv_id": rows["arxiv_id"].to_numpy(), "field_id": field_id, "slot": slot}))
    return pd.concat(out, ignore_index=True)


PARALLEL_DRAFT = "the independent second draft of the compact construction, labelled by its own distilled labeller"
PARALLEL_OFFLINE = "a second offline text instrument (its own TF-IDF, seed and eight clusters per field)"


def parallel_instrument(inst, *, seed: int) -> tuple[pd.DataFrame, str]:
    """The second instrument an instance is audited against, and what it is: the recorded
    second draft (``parallel.parquet``: a capable model drafted every such field twice, from
    differently drawn samples, as the paper's parallel instrument) when the instance has one,
    else :func:`second_instrument`."""
    if "parallel" in inst.extras:
        return inst.extras["parallel"], PARALLEL_DRAFT
    return second_instrument(inst.papers, inst.assignments, inst.spec.codebook_cutoff, seed=seed), PARALLEL_OFFLINE


def model_label_agreement(model_labels: pd.DataFrame, *, n_resamples: int, seed: int) -> tuple[pd.DataFrame, Estimate]:
    """The two drafts as the model itself applied them: per field with a second draft, on the
    papers the model labelled under both (each in a direction), draft B's labels aligned to draft
    A's by the Hungarian algorithm fitted on a hash-chosen half and scored on the other half, both
    ways; the field-resampled mean. Columns: field_id, n_shared, agree."""
    keys = {k: i for i, k in enumerate(DIRECTION_KEYS)}
    rows = []
    for field_id, g in model_labels.groupby("field_id", sort=True):
        a = g.loc[g["draft"] == "A"].set_index("arxiv_id")["primary"]
        b = g.loc[g["draft"] == "B"].set_index("arxiv_id")["primary"]
        if b.empty:
            continue
        shared = sorted(set(a.index) & set(b.index))
        ia = np.array([keys.get(str(a[p]), -1) for p in shared], dtype=np.int64)
        ib = np.array([keys.get(str(b[p]), -1) for p in shared], dtype=np.int64)
        both = (ia >= 0) & (ib >= 0)
        ids = np.asarray(shared, dtype=object)[both]
        ia, ib = ia[both], ib[both]
        half = fit_half(ids)
        scored = [cross_fit(ia, ib, fit).agree for fit in (half, ~half) if fit.any() and (~fit).any()]
        agree = np.concatenate(scored) if scored else np.zeros(0)
        rows.append((field_id, int(both.sum()), finite_mean(agree)))
    table = pd.DataFrame(rows, columns=["field_id", "n_shared", "agree"])
    return table, field_resampled(table["agree"].to_numpy(dtype=float), n_resamples=n_resamples, seed=seed)


def slots_as_primary(assignments: pd.DataFrame, second: pd.DataFrame) -> pd.DataFrame:
    """``assignments`` with ``primary`` replaced by another instrument's slots (D0..D7; slot -1, a
    paper it places in none of the eight, becomes ``other``), so that two independent instruments
    can be compared with :func:`parallel_agreement` as if one were frozen."""
    keys = np.asarray([*DIRECTION_KEYS, "other"], dtype=object)
    out = assignments.drop(columns=["primary"]).merge(second, on=["arxiv_id", "field_id"], how="inner")
    out["primary"] = keys[out.pop("slot").to_numpy().astype(np.int64)]  # -1 indexes "other"
    return out


def parallel_agreement(
    papers: pd.DataFrame,
    assignments: pd.DataFrame,
    second: pd.DataFrame,
    cutoff: str,
    *,
    n_resamples: int,
    seed: int,
) -> tuple[pd.DataFrame, dict[str, Estimate]]:
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
        scored = int(np.isfinite(a).sum())
        rows.append((field_id, res.n_fit, scored, finite_mean(a[pre]), finite_mean(a[~pre]), finite_mean(a)))
    table = pd.DataFrame(rows, columns=["field_id", "n_fit", "n_scored", "agree_pre", "agree_post", "agree_all"])
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


def instrument_audit_table(inst, *, seed: int = 0, n_resamples: int = 2000) -> pd.DataFrame:
    """The report's instrument-audit rows: parallel-instrument agreement and (mini) latent truth.

    Columns: measure, estimate, lo, hi (95% field-resampled percentile interval), n_fields.
    """
    cutoff = inst.spec.codebook_cutoff
    second, _ = parallel_instrument(inst, seed=seed)
    table, summary = parallel_agreement(
        inst.papers, inst.assignments, second, cutoff, n_resamples=n_resamples, seed=seed
    )
    labels = {
        "overall": "parallel instrument: out-of-sample agreement",
        "pre": f"parallel instrument: agreement before {cutoff}",
        "post": f"parallel instrument: agreement from {cutoff}",
        "change": "parallel instrument: paired change (from - before)",
    }
    columns = {"overall": "agree_all", "pre": "agree_pre", "post": "agree_post", "change": "change"}
    rows = [
        {**vars(summary[k]), "measure": labels[k], "n_fields": int(np.isfinite(table[columns[k]]).sum())}
        for k in labels
    ]
    if "truth" in inst.extras:
        truth = truth_agreement(inst.assignments, inst.extras["truth"])
        for col, label in (
            ("exact", "frozen instrument vs latent truth: exact"),
            ("within_pair", "frozen instrument vs latent truth: within declared pair"),
        ):
            iv = field_resampled(truth[col].to_numpy(dtype=float), n_resamples=n_resamples, seed=seed)
            rows.append({**vars(iv), "measure": label, "n_fields": len(truth)})
    return pd.DataFrame(rows, columns=["measure", "estimate", "lo", "hi", "n_fields"])
