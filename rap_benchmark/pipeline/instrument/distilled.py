"""A labeller distilled from a capable model's labels: the compact construction's offline half.

The model labels a sample of each field's papers against the eight directions it wrote; every
membership is then labelled here, offline, with the offline instrument's prototype and tie
machinery (:mod:`.offline`) fed the model's labels instead of clusters. Per field:

* the space is the field's own TF-IDF (unigrams and adjacent bigrams of the feature set fitted on
  the papers dated before the spec's ``eligibility_end``; sublinear TF, smoothed IDF, the field's
  terms in 2 docs .. 50% of its papers);
* direction k's prototype starts as the sum of the L2-normalised rows of the papers the model
  labelled primary k (a boundary or bridge paper adds half a row to its secondary), plus the
  direction's own text (name, definition, inclusion) at weight ``TEXT_WEIGHT`` (three papers'
  worth; the weights and the floor below were chosen by the held-out agreement on arxiv-sample's
  labels: 0.737 without self-training, 0.751 with the text at 3 and the pool at 0.5, 0.759 with
  the pool at 1 and the floor);
* ``SELF_TRAINING_ROUNDS`` times, the field's unlabelled papers dated before ``eligibility_end``
  join the prototype of the direction they are nearest, at weight ``UNLABELLED_WEIGHT`` (the
  labelled papers keep weight 1): the prototypes follow the field's own vocabulary beyond the
  sample, still anchored by the model's labels;
* a direction whose share of the field's papers dated before the codebook cutoff (their nearest
  prototype; outside papers count in the whole and in no direction) is under ``FLOOR_SHARE`` has
  its similarities scaled up, step by step, until it reaches it: the model wrote every direction
  as the primary of at least 3% of its sample, and the paper's codebooks give every direction at
  least 3% of the field's pre-cutoff papers (the floor is a point above, for the papers the margin
  rules later make ``other``: on arxiv-sample a floor of 3.5% left one direction of a field that
  is two-thirds outside at 2.96%);
* the papers the model placed in none of the eight (``not_in_field``: the clustering pulled them
  in by a shared word; ``other``: in the field, in no direction) form a ninth prototype, the
  field's *outside*, when there are at least ``MIN_OUTSIDE`` of them; it takes part in the
  self-training like a direction. A paper is outside when its cosine to the outside prototype
  exceeds ``ratio`` times its best cosine to a direction, the ratio calibrated per field so that
  the share of the pool (the field's papers before ``eligibility_end``) placed outside is the
  share the model placed outside among the papers it labelled (drawn from that pool): the model
  says how much of the cluster is not the field, the labeller says which papers. An outside
  paper has no direction close enough: its cosines are zero, and the margin rules make it
  ``other`` (it stays a member of the field and never counts toward D0..D7);
* a paper's similarities are its (scaled) cosines to the eight prototypes, and the offline
  margin rules (calibrated tie share, bridge strength, ``other`` level) turn them into primary,
  secondary and type.

:func:`fit_field` reports, per field, how often the labeller fitted WITHOUT a paper's label gives
it the model's primary (``FOLDS``-fold, folds by a hash of the id), on the labelled papers the
model placed in a direction (a paper it places outside counts as a miss), and how often it places
outside the papers the model placed in none of the eight.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import pandas as pd
import scipy.sparse as sp

from rap_benchmark.core.records import DIRECTION_KEYS, N_DIRECTIONS
from rap_benchmark.pipeline.clusters import normalise_dense
from rap_benchmark.pipeline.features import Features
from rap_benchmark.pipeline.fields import smoothed_idf, sublinear_tfidf, terms_in_band, tokenize_papers

TEXT_WEIGHT = 3.0
SECONDARY_WEIGHT = 0.5
UNLABELLED_WEIGHT = 1.0
SELF_TRAINING_ROUNDS = 2
FOLDS = 5
MIN_DF = 2
MAX_DF_RATIO = 0.5
FLOOR_SHARE = 0.04
FLOOR_STEP = 1.02
FLOOR_STEPS = 300
MIN_OUTSIDE = 3
MAX_RATIO = 1e6  # an outside ratio where a paper's best direction cosine is 0


@dataclass(frozen=True)
class FieldSpace:
    """A field's TF-IDF space: feature ``columns`` and their ``idf``."""

    columns: np.ndarray
    idf: np.ndarray

    def rows(self, counts: sp.csr_matrix) -> sp.csr_matrix:
        return sublinear_tfidf(counts[:, self.columns], self.idf)


@dataclass(frozen=True)
class DistilledLabeller:
    """The distilled labeller of every field (see the module docstring): the feature set, each
    field's space and its eight prototypes (``centroids``: field id -> 8 x columns, L2-normalised),
    the interface of the offline instrument's prototypes."""

    features: Features
    spaces: dict[str, FieldSpace]
    centroids: dict[str, np.ndarray]
    scales: dict[str, np.ndarray]  # field id -> each direction's similarity scale (the share floor)
    outside: dict[str, np.ndarray]  # field id -> its outside prototype (1 x columns; 0 x columns: none)
    outside_ratio: dict[str, float]  # field id -> the calibrated ratio (module docstring)

    def prepare(self, papers: pd.DataFrame) -> tuple[sp.csr_matrix, np.ndarray]:
        """Feature counts of ``papers`` and their known-token counts."""
        return self.features.counts(tokenize_papers(papers))

    def similarities(self, prepared: tuple[sp.csr_matrix, np.ndarray], field_id: str, rows: np.ndarray) -> np.ndarray:
        """Scaled cosine of ``rows`` (positions in the prepared papers) to the field's eight
        prototypes; all zero for a paper nearer the field's outside prototype."""
        x = self.spaces[field_id].rows(prepared[0][rows])
        cos = np.asarray(x @ self.centroids[field_id].T)
        away = outside_ratios(x, cos, self.outside[field_id]) > self.outside_ratio[field_id]
        sims = cos * self.scales[field_id]
        sims[away] = 0.0
        return sims


def outside_ratios(x: sp.csr_matrix, cos: np.ndarray, outside: np.ndarray) -> np.ndarray:
    """Per row of ``x``: its cosine to the ``outside`` prototype over its best direction cosine
    (``cos``, unscaled), at most ``MAX_RATIO``; 0 where there is no outside prototype (0 x columns)
    or the paper is not near it."""
    if not len(outside):
        return np.zeros(x.shape[0])
    near = np.asarray(x @ outside.T)[:, 0]
    best = cos.max(axis=1, initial=0.0)
    ratio = np.divide(near, best, out=np.full(len(near), MAX_RATIO), where=best > 0)
    return np.where(near > 0, np.minimum(ratio, MAX_RATIO), 0.0)


def calibrated_ratio(ratios: np.ndarray, share: float) -> float:
    """The ratio above which ``share`` of ``ratios`` lie (``MAX_RATIO``: none outside)."""
    if share <= 0 or not len(ratios):
        return MAX_RATIO
    return float(np.quantile(ratios, 1.0 - share))


@dataclass(frozen=True)
class Labelled:
    """The model's labels of one field: paper ids, primary index (0..7, -1 for other / not in
    field), secondary index (-1: none), and the directions' texts."""

    ids: tuple[str, ...]
    primary: np.ndarray
    secondary: np.ndarray
    texts: tuple[str, ...]

    @classmethod
    def from_labels(cls, labels: pd.DataFrame, directions: Sequence[dict[str, Any]]) -> Labelled:
        """``labels``: columns arxiv_id, primary, secondary (the model's); ``directions``: D0..D7."""
        index = {k: i for i, k in enumerate(DIRECTION_KEYS)}
        prim = np.array([index.get(str(p), -1) for p in labels["primary"]], dtype=np.int64)
        sec = np.array([index.get(str(s), -1) if s is not None else -1 for s in labels["secondary"]], dtype=np.int64)
        texts = tuple(f"{d['name']}. {d['definition']} {d['inclusion']}" for d in directions)
        return cls(tuple(labels["arxiv_id"].astype(str)), prim, sec, texts)


def fit_space(counts: sp.csr_matrix) -> FieldSpace:
    n = counts.shape[0]
    df = np.bincount(counts.indices, minlength=counts.shape[1])
    columns = terms_in_band(df, n, min_df=MIN_DF, max_df_ratio=MAX_DF_RATIO)
    return FieldSpace(columns, smoothed_idf(df[columns], n))


def prototypes(
    x_lab: sp.csr_matrix, lab: Labelled, x_text: sp.csr_matrix, x_pool: sp.csr_matrix, keep: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The eight prototypes (8 x columns, L2-normalised) from the labelled rows ``x_lab`` (only
    those where ``keep``), the directions' text rows and the unlabelled pool, and the outside
    prototype (1 x columns, or 0 x columns with fewer than ``MIN_OUTSIDE`` papers outside; module
    docstring)."""
    weights = np.zeros((N_DIRECTIONS + 1, x_lab.shape[0]))
    for i in np.flatnonzero(keep):
        if lab.primary[i] < 0:
            weights[N_DIRECTIONS, i] = 1.0
            continue
        weights[lab.primary[i], i] += 1.0
        if lab.secondary[i] >= 0 and lab.secondary[i] != lab.primary[i]:
            weights[lab.secondary[i], i] += SECONDARY_WEIGHT
    classes = N_DIRECTIONS + int(weights[N_DIRECTIONS].sum() >= MIN_OUTSIDE)
    text = np.vstack([x_text.toarray(), np.zeros((1, x_lab.shape[1]))])
    base = ((sp.csr_matrix(weights) @ x_lab).toarray() + TEXT_WEIGHT * text)[:classes]
    cents = normalise_dense(base)
    for _ in range(SELF_TRAINING_ROUNDS if x_pool.shape[0] else 0):
        nearest = np.asarray(x_pool @ cents.T).argmax(axis=1)
        onehot = sp.csr_matrix(
            (np.full(nearest.size, UNLABELLED_WEIGHT), (nearest, np.arange(nearest.size))),
            shape=(classes, x_pool.shape[0]),
        )
        cents = normalise_dense(base + (onehot @ x_pool).toarray())
    return cents[:N_DIRECTIONS], cents[N_DIRECTIONS:]


def floor_scales(sims: np.ndarray, total: int | None = None) -> np.ndarray:
    """Each direction's similarity scale: 1, raised by ``FLOOR_STEP`` at a time (at most
    ``FLOOR_STEPS`` times) while the direction is the nearest of fewer than ``FLOOR_SHARE`` of the
    field's papers before the codebook cutoff: ``total`` of them (``len(sims)`` when None), of
    which ``sims`` (papers x 8) are the ones not outside."""
    scale = np.ones(N_DIRECTIONS)
    if not len(sims):
        return scale
    total = len(sims) if total is None else total
    for _ in range(FLOOR_STEPS):
        share = np.bincount((sims * scale).argmax(axis=1), minlength=N_DIRECTIONS) / total
        low = share < FLOOR_SHARE
        if not low.any():
            break
        scale[low] *= FLOOR_STEP
    return scale


def _folds(ids: Sequence[str]) -> np.ndarray:
    return np.array([int(hashlib.sha256(f"fold|{i}".encode()).hexdigest()[:8], 16) % FOLDS for i in ids])


def _fit_parts(
    x_lab: sp.csr_matrix,
    lab: Labelled,
    x_text: sp.csr_matrix,
    x_pool: sp.csr_matrix,
    pre: np.ndarray | slice,
    keep: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, float, np.ndarray]:
    """Prototypes, outside prototype, outside ratio and scales fitted on the labels where ``keep``:
    the ratio over the pool (the model's labelled papers are drawn from it), the floor over its
    rows ``pre`` (the papers before the codebook cutoff)."""
    cents, outside = prototypes(x_lab, lab, x_text, x_pool, keep)
    share = float((lab.primary[keep] < 0).mean()) if len(outside) else 0.0
    cos = np.asarray(x_pool @ cents.T)
    ratios = outside_ratios(x_pool, cos, outside)
    ratio = calibrated_ratio(ratios, share)
    cos_pre = cos[pre]
    return cents, outside, ratio, floor_scales(cos_pre[ratios[pre] <= ratio], total=len(cos_pre))


class HeldOut(NamedTuple):
    """Held-out counts (:func:`_held_out`): ``hits`` among the ``n`` labelled papers the model
    placed in a direction, ``found`` (placed outside) among the ``n_outside`` it placed in none;
    means over draws in a learning curve."""

    hits: float
    n: int
    found: float
    n_outside: int

    @property
    def agreement(self) -> float:
        return self.hits / self.n if self.n else float("nan")

    @property
    def outside_recall(self) -> float:
        return self.found / self.n_outside if self.n_outside else float("nan")


@dataclass(frozen=True)
class FieldFit:
    """One field's distilled labeller (:func:`fit_field`) and how it fares ``held`` out (its
    agreement and outside recall are NaN where it has no such papers)."""

    space: FieldSpace
    centroids: np.ndarray
    outside: np.ndarray
    outside_ratio: float
    scales: np.ndarray
    held: HeldOut


def _held_out(
    x_lab: sp.csr_matrix,
    lab: Labelled,
    x_text: sp.csr_matrix,
    x_pool: sp.csr_matrix,
    pre: np.ndarray | slice,
    train: np.ndarray,
) -> HeldOut:
    """Per ``FOLDS`` fold (by a hash of the id), the labeller fitted on the labels where ``train``
    outside the fold scores the fold's papers."""
    folds = _folds(lab.ids)
    placed = lab.primary >= 0
    hits = found = 0
    for f in range(FOLDS):
        test = folds == f
        if not test.any():
            continue
        cents, outside, ratio, scale = _fit_parts(x_lab, lab, x_text, x_pool, pre, train & ~test)
        x = x_lab[np.flatnonzero(test)]
        cos = np.asarray(x @ cents.T)
        away = outside_ratios(x, cos, outside) > ratio
        guess = np.where(away, -1, (cos * scale).argmax(axis=1))
        hits += int(((guess == lab.primary[test]) & placed[test]).sum())
        found += int((away & ~placed[test]).sum())
    return HeldOut(hits, int(placed.sum()), found, int((~placed).sum()))


def _field_rows(
    counts_lab: sp.csr_matrix, counts_text: sp.csr_matrix, counts_pool: sp.csr_matrix
) -> tuple[FieldSpace, sp.csr_matrix, sp.csr_matrix, sp.csr_matrix]:
    """A field's space, fitted on its pool, and the labelled, text and pool rows in it."""
    space = fit_space(counts_pool)
    return space, space.rows(counts_lab), space.rows(counts_text), space.rows(counts_pool)


def fit_field(
    counts_lab: sp.csr_matrix,
    lab: Labelled,
    counts_text: sp.csr_matrix,
    counts_pool: sp.csr_matrix,
    pre: np.ndarray | None = None,
) -> FieldFit:
    """One field's labeller: the space is fitted on the pool (the field's papers before
    ``eligibility_end``, which sets the outside ratio; ``pre`` marks those before the codebook
    cutoff, which set the share floor: all when None). The held-out figures (``FOLDS`` folds by a hash of
    the id) score each labelled paper with everything fitted without its label."""
    space, x_lab, x_text, x_pool = _field_rows(counts_lab, counts_text, counts_pool)
    pre_rows = slice(None) if pre is None else np.flatnonzero(pre)
    every = np.ones(len(lab.ids), dtype=bool)
    held = _held_out(x_lab, lab, x_text, x_pool, pre_rows, every)
    cents, outside, ratio, scale = _fit_parts(x_lab, lab, x_text, x_pool, pre_rows, every)
    return FieldFit(space, cents, outside, ratio, scale, held)


def training_draw(ids: Sequence[str], fraction: float, seed: int) -> np.ndarray:
    """The labelled papers a learning curve keeps at ``fraction``: those whose hash of (``seed``,
    id) falls under it, so that for one seed a smaller fraction keeps a subset of a larger one."""
    u = np.array([int(hashlib.sha256(f"curve|{seed}|{i}".encode()).hexdigest()[:12], 16) / 16**12 for i in ids])
    return u < fraction


class FieldInputs(NamedTuple):
    """What one field's labeller is fitted on (:func:`fit_field`'s arguments)."""

    field_id: str
    counts_lab: sp.csr_matrix
    lab: Labelled
    counts_text: sp.csr_matrix
    counts_pool: sp.csr_matrix
    pre: np.ndarray


def _field_inputs(
    papers: pd.DataFrame, units: dict[str, tuple[Sequence[str], Labelled]], spec: Any
) -> tuple[Features, Iterator[FieldInputs]]:
    """The feature set (fitted on the papers dated before ``spec.eligibility_end`` only) and, per
    field of ``units`` in id order, its labelled papers' counts, the model's labels, its
    directions' text counts, its pool's counts (members dated before ``eligibility_end``) and
    which of the pool are dated before the codebook cutoff."""
    tok = tokenize_papers(papers)
    dates = papers["date"].astype(str).str.slice(0, 10).to_numpy()
    features = Features.fit(tok.select(np.flatnonzero(dates < spec.eligibility_end)))
    counts, _ = features.counts(tok)
    pos = pd.Series(np.arange(len(papers)), index=papers["arxiv_id"].astype(str).to_numpy())
    order = sorted(units)
    texts = [t for fid in order for t in units[fid][1].texts]
    frame = pd.DataFrame({"arxiv_id": [f"direction-{i}" for i in range(len(texts))], "title": texts, "abstract": ""})
    text_counts, _ = features.counts(tokenize_papers(frame))

    def each() -> Iterator[FieldInputs]:
        for j, fid in enumerate(order):
            members, lab = units[fid]
            rows = pos.loc[list(members)].to_numpy()
            pool = rows[dates[rows] < spec.eligibility_end]
            lab_rows = pos.loc[list(lab.ids)].to_numpy()
            own_text = text_counts[j * N_DIRECTIONS : (j + 1) * N_DIRECTIONS]
            yield FieldInputs(fid, counts[lab_rows], lab, own_text, counts[pool], dates[pool] < spec.codebook_cutoff)

    return features, each()


def distil(
    papers: pd.DataFrame, units: dict[str, tuple[Sequence[str], Labelled]], spec: Any
) -> tuple[DistilledLabeller, dict[str, FieldFit]]:
    """The labeller of every field in ``units`` (field id -> (members, the model's labels)) and
    each field's :class:`FieldFit` (its held-out figures).
    Only papers dated before ``spec.eligibility_end`` shape the features and the prototypes."""
    features, fields = _field_inputs(papers, units, spec)
    fits = {f.field_id: fit_field(f.counts_lab, f.lab, f.counts_text, f.counts_pool, f.pre) for f in fields}
    labeller = DistilledLabeller(
        features,
        {fid: f.space for fid, f in fits.items()},
        {fid: f.centroids for fid, f in fits.items()},
        {fid: f.scales for fid, f in fits.items()},
        {fid: f.outside for fid, f in fits.items()},
        {fid: f.outside_ratio for fid, f in fits.items()},
    )
    return labeller, fits


@dataclass(frozen=True)
class CurvePoint:
    """One field's ``held`` out counts when only ``fraction`` of its labels train (means over the
    seeds), and how many labels trained a fold (``trained``, also a mean)."""

    field_id: str
    fraction: float
    held: HeldOut
    trained: float


def held_out_curve(
    papers: pd.DataFrame,
    units: dict[str, tuple[Sequence[str], Labelled]],
    spec: Any,
    fractions: Sequence[float],
    seeds: Sequence[int] = (0,),
) -> list[CurvePoint]:
    """How the held-out figures of :func:`distil` grow with the model's labels: per field and
    fraction, the same folds scored by labellers fitted on the labels :func:`training_draw` keeps
    (every label at fraction 1, whatever the seeds: then the figures are the build's own)."""
    out: list[CurvePoint] = []
    for f in _field_inputs(papers, units, spec)[1]:
        _, x_lab, x_text, x_pool = _field_rows(f.counts_lab, f.counts_text, f.counts_pool)
        pre_rows = np.flatnonzero(f.pre)
        for fraction in fractions:
            draws = [training_draw(f.lab.ids, fraction, s) for s in (seeds if fraction < 1 else seeds[:1])]
            counts = np.array([_held_out(x_lab, f.lab, x_text, x_pool, pre_rows, d) for d in draws], dtype=float)
            hits, n, found, n_out = counts.mean(axis=0)
            trained = float(np.mean([d.sum() for d in draws])) * (FOLDS - 1) / FOLDS
            out.append(CurvePoint(f.field_id, float(fraction), HeldOut(hits, int(n), found, int(n_out)), trained))
    return out
