"""Offline codebooks: exactly eight directions per field from pre-cutoff text (the paper's codebook construction).

Two constructions share one output (codebooks sorted by field id, and the prototypes the offline
assignment instrument compares papers against):

* :func:`build_codebooks` (real text): per field, an LSA space of its pre-cutoff papers
  (:class:`~rap_benchmark.pipeline.features.LocalSpace`), eight seeded spherical k-means groups
  of at least ``MIN_DIRECTION_SHARE`` each (:func:`eight_directions`), ordered by size (D0 the
  largest), written out by :mod:`rap_benchmark.pipeline.codebook_text`.
* :func:`codebooks_from_blueprint` (mini): the generator's own directions (Dk = true direction
  k), prototypes fitted on the pre-cutoff papers' true labels, exemplars nearest the prototype.

Neither reads a paper dated on or after the cutoff: every pre-cutoff filter happens before any
text is tokenised.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import scipy.sparse as sp

from rap_benchmark.core.records import DIRECTION_KEYS, N_DIRECTIONS, Codebook, Direction
from rap_benchmark.core.spec import BenchmarkSpec
from rap_benchmark.pipeline.clusters import normalise_dense
from rap_benchmark.pipeline.features import Features, LocalSpace
from rap_benchmark.pipeline.fields import FieldInfo, FieldModel, TfidfSpace, TokenizedCorpus, tokenize_papers

if TYPE_CHECKING:
    from rap_benchmark.pipeline.synth import MiniCorpus

__all__ = [
    "N_EXEMPLARS",
    "FieldUnfit",
    "LocalPrototypes",
    "Prototypes",
    "build_codebooks",
    "codebooks_from_blueprint",
    "drop_fields",
    "field_summary",
]

from rap_benchmark.pipeline.codebook_text import N_EXEMPLARS, FieldUnfit


@dataclass(frozen=True)
class Prototypes:
    """What the offline instrument compares papers against.

    ``space``: the TF-IDF space fitted on pre-cutoff papers only. ``centroids``: field id ->
    8 x ``space.n_terms`` dense array, row k the L2-normalised prototype of direction Dk.
    """

    space: TfidfSpace
    centroids: dict[str, np.ndarray]

    def prepare(self, papers: pd.DataFrame) -> tuple[sp.csr_matrix, np.ndarray]:
        """TF-IDF rows of ``papers`` in the pre-cutoff space and their known-token counts."""
        return self.space.transform(tokenize_papers(papers))

    def similarities(self, prepared: tuple[sp.csr_matrix, np.ndarray], field_id: str, rows: np.ndarray) -> np.ndarray:
        """Cosine of ``rows`` (positions in the prepared papers) to the field's eight prototypes."""
        return np.asarray(prepared[0][rows] @ self.centroids[field_id].T)


def _pre_cutoff(papers: pd.DataFrame, spec: BenchmarkSpec) -> tuple[pd.DataFrame, TokenizedCorpus]:
    """The papers dated before the cutoff (sorted by date, id) and their tokens.

    Tokens come from the (cached) tokenisation of all papers, restricted to the pre-cutoff
    rows: a paper's tokens depend only on its own text, so later papers cannot leak in.
    """
    dates = papers["date"].astype(str).to_numpy()
    rows = np.flatnonzero(dates < spec.codebook_cutoff)
    rows = rows[np.lexsort((papers["arxiv_id"].to_numpy()[rows].astype(str), dates[rows]))]
    pre = papers.iloc[rows].reset_index(drop=True)
    return pre, tokenize_papers(papers).select(rows)


def _field_rows(pre: pd.DataFrame, memberships: pd.DataFrame) -> dict[str, np.ndarray]:
    """Field id -> row positions (in ``pre``) of its pre-cutoff members, sorted."""
    pos = pd.Series(np.arange(len(pre)), index=pre["arxiv_id"].to_numpy())
    m = memberships.loc[memberships["arxiv_id"].isin(pos.index)]
    rows = pos.loc[m["arxiv_id"].to_numpy()].to_numpy()
    fids = m["field_id"].to_numpy().astype(str)
    out: dict[str, np.ndarray] = {}
    for fid in sorted(set(fids)):
        out[str(fid)] = np.sort(rows[fids == fid])
    return out


def _exemplars(x: sp.csr_matrix, ids: np.ndarray, centroid: np.ndarray, mask: np.ndarray) -> tuple[str, ...]:
    """Up to N_EXEMPLARS ids among ``mask`` rows nearest ``centroid`` (ties by id)."""
    cand = np.flatnonzero(mask)
    if cand.size == 0:
        return ()
    sims = np.asarray(x[cand] @ centroid).ravel()
    order = np.lexsort((ids[cand], -sims))[:N_EXEMPLARS]
    return tuple(str(ids[cand[i]]) for i in order)


def _phrase(terms: Sequence[str]) -> str:
    return ", ".join(terms) if terms else "no distinctive terms"


MIN_DIRECTION_SHARE = 0.03
"""Every direction holds at least this share of its field's pre-cutoff papers."""
LOCAL_DIMS = 8
"""Dimensions of a field's LSA space (its main axes of variation)."""
REBALANCE_ROUNDS = 40


@dataclass(frozen=True)
class LocalPrototypes:
    """What the real-text instrument compares papers against (see :mod:`.features`).

    ``features``: unigram + bigram feature set fitted on pre-cutoff papers; ``spaces``: field id
    -> the field's TF-IDF + LSA space (fitted on its pre-cutoff papers); ``centroids``: field id
    -> 8 x dims, row k the L2-normalised prototype of Dk in that space.
    """

    features: Features
    spaces: dict[str, LocalSpace]
    centroids: dict[str, np.ndarray]

    def prepare(self, papers: pd.DataFrame) -> tuple[sp.csr_matrix, np.ndarray]:
        """Feature counts of ``papers`` and their known-token counts."""
        return self.features.counts(tokenize_papers(papers))

    def similarities(self, prepared: tuple[sp.csr_matrix, np.ndarray], field_id: str, rows: np.ndarray) -> np.ndarray:
        """Cosine of ``rows`` (positions in the prepared papers) to the field's eight prototypes."""
        return self.spaces[field_id].embed(prepared[0][rows]) @ self.centroids[field_id].T


def eight_directions(y: np.ndarray, seed: Sequence[int], *, min_size: int, n_init: int = 10) -> np.ndarray:
    """Eight centroids over the rows ``y`` (L2-normalised) whose argmax groups all hold >= ``min_size``.

    Seeded spherical k-means; while a group is too small, it is dissolved and the largest group
    is split in two by 2-means (up to REBALANCE_ROUNDS times). Raises :class:`FieldUnfit` if the
    field cannot hold eight such groups.
    """
    from rap_benchmark.pipeline.clusters import spherical_kmeans_dense

    if y.shape[0] < N_DIRECTIONS * max(min_size, 1):
        raise FieldUnfit(f"{y.shape[0]} papers cannot hold eight directions of {min_size} papers")
    rng = np.random.default_rng(list(seed))
    _, cents = spherical_kmeans_dense(y, N_DIRECTIONS, rng, n_init=n_init)
    for _ in range(REBALANCE_ROUNDS):
        labels = (y @ cents.T).argmax(axis=1)
        sizes = np.bincount(labels, minlength=N_DIRECTIONS)
        if sizes.min() >= min_size:
            return cents
        small, big = int(np.argmin(sizes)), int(np.argmax(sizes))
        members = y[labels == big]
        _, halves = spherical_kmeans_dense(members, 2, rng, n_init=3)
        cents = cents.copy()
        cents[small], cents[big] = halves[0], halves[1]
    raise FieldUnfit(f"no eight directions of at least {min_size} papers after {REBALANCE_ROUNDS} rounds")


def build_codebooks(
    papers: pd.DataFrame,
    memberships: pd.DataFrame,
    field_info: dict[str, FieldInfo],
    spec: BenchmarkSpec,
    *,
    progress: bool = False,
) -> tuple[list[Codebook], LocalPrototypes, dict[str, str]]:
    """Offline codebooks from real pre-cutoff text (see the module docstring).

    Returns (codebooks, prototypes, unfit): a field whose pre-cutoff papers cannot hold eight
    directions of at least ``MIN_DIRECTION_SHARE`` each (or cannot name them apart) gets no
    codebook; ``unfit`` maps its id to the reason (:func:`drop_fields` removes it). Never raises
    for a field's shape.
    """
    from tqdm import tqdm

    from rap_benchmark.pipeline.codebook_text import common_phrases, write_directions
    from rap_benchmark.pipeline.phrases import phrase_table

    pre, docs = _pre_cutoff(papers, spec)
    features = Features.fit(docs, min_df=2)
    counts, _ = features.counts(docs)
    ids = pre["arxiv_id"].to_numpy(dtype=object)
    titles = pre["title"].astype(str).to_numpy(dtype=object)
    table = phrase_table((pre["title"] + ". " + pre["abstract"]).tolist())
    rows_by_field = _field_rows(pre, memberships)
    common = common_phrases(table, [rows_by_field.get(fid, np.zeros(0, np.int64)) for fid in sorted(field_info)])
    codebooks: list[Codebook] = []
    spaces: dict[str, LocalSpace] = {}
    centroids: dict[str, np.ndarray] = {}
    unfit: dict[str, str] = {}
    for i, fid in enumerate(tqdm(sorted(field_info), desc="codebooks", disable=not progress)):
        rows = rows_by_field.get(fid, np.zeros(0, np.int64))
        min_size = max(1, int(np.ceil(MIN_DIRECTION_SHARE * rows.size)))
        if rows.size < N_DIRECTIONS * min_size or rows.size <= LOCAL_DIMS:
            unfit[fid] = f"{rows.size} pre-cutoff papers cannot hold eight directions"
            continue
        space = LocalSpace.fit(counts[rows], dims=LOCAL_DIMS, seed=spec.seed + i)
        y = space.embed(counts[rows])
        try:
            cents = eight_directions(y, (spec.seed, 3, i), min_size=min_size)
        except FieldUnfit as exc:
            unfit[fid] = str(exc)
            continue
        sims = y @ cents.T
        labels = sims.argmax(axis=1)
        sizes = np.bincount(labels, minlength=N_DIRECTIONS)
        order = sorted(range(N_DIRECTIONS), key=lambda k: (-sizes[k], k))
        cents = cents[order]
        sims = sims[:, order]
        labels = np.argsort(order)[labels]
        info = field_info[fid]
        try:
            directions = write_directions(
                info.name, table, rows, labels, sims, ids[rows], titles[rows], cents, common=common
            )
        except FieldUnfit as exc:
            unfit[fid] = str(exc)
            continue
        codebooks.append(Codebook(fid, info.name, info.definition, directions))
        spaces[fid] = space
        centroids[fid] = cents
    return codebooks, LocalPrototypes(features=features, spaces=spaces, centroids=centroids), unfit


def drop_fields(
    unfit: Sequence[str],
    memberships: pd.DataFrame,
    field_info: dict[str, FieldInfo],
    field_model: FieldModel,
    codebooks: list[Codebook],
    prototypes: LocalPrototypes,
) -> tuple[pd.DataFrame, dict[str, FieldInfo], FieldModel, list[Codebook], LocalPrototypes]:
    """Remove the fields ``unfit`` everywhere and renumber the rest ``f000``, ``f001``, ... in order.

    The dropped fields' memberships go (a paper keeps its other fields); the field model no
    longer places papers in them, so later papers are labelled the same way.
    """
    if not unfit:
        return memberships, field_info, field_model, codebooks, prototypes
    gone = set(unfit)
    survivors = [fid for fid in sorted(field_info) if fid not in gone]
    new = {old: f"f{j:03d}" for j, old in enumerate(survivors)}
    m = memberships.loc[memberships["field_id"].isin(new)].copy()
    m["field_id"] = m["field_id"].map(new).astype(object)
    m = m.sort_values(["field_id", "arxiv_id"], kind="stable").reset_index(drop=True)
    info = {new[f]: dataclasses.replace(field_info[f], field_id=new[f]) for f in survivors}
    books = [dataclasses.replace(cb, field_id=new[cb.field_id]) for cb in codebooks if cb.field_id in new]
    protos = LocalPrototypes(
        features=prototypes.features,
        spaces={new[f]: s for f, s in prototypes.spaces.items() if f in new},
        centroids={new[f]: c for f, c in prototypes.centroids.items() if f in new},
    )
    return m, info, field_model.dropping(sorted(gone)), books, protos


LEAST_COHESIVE = 10
"""How many of the least cohesive kept fields the build summary names."""


def field_summary(candidates: dict[str, FieldInfo], unfit: dict[str, str], kept: dict[str, FieldInfo]) -> dict:
    """The build summary's account of the fields: each candidate dropped (its name and why), and the
    ``LEAST_COHESIVE`` kept fields whose papers share the least of one topic (lowest
    :attr:`FieldInfo.cohesion` first), so a maintainer sees both."""

    def rounded(v: float) -> float | None:
        return round(float(v), 4) if np.isfinite(v) else None

    measured = [f for f in kept.values() if np.isfinite(f.cohesion)]
    least = sorted(measured, key=lambda f: (f.cohesion, f.field_id))[:LEAST_COHESIVE]
    return {
        "n_candidates": len(candidates),
        "dropped": [
            {"name": candidates[f].name, "cohesion": rounded(candidates[f].cohesion), "reason": reason}
            for f, reason in sorted(unfit.items())
        ],
        "least_cohesive": [{"field_id": f.field_id, "name": f.name, "cohesion": rounded(f.cohesion)} for f in least],
    }


def codebooks_from_blueprint(mini: MiniCorpus, spec: BenchmarkSpec) -> tuple[list[Codebook], Prototypes]:
    """Codebooks for the synthetic mini corpus from the generator's own directions.

    Direction Dk is the generator's direction k (so truth and codebook align). Prototypes are
    the normalised mean TF-IDF vectors of each direction's pre-cutoff papers (true labels), in a
    space fitted on pre-cutoff papers; exemplars are the five such papers nearest the prototype.
    """
    pre, docs = _pre_cutoff(mini.papers, spec)
    space = TfidfSpace.fit(docs, min_df=2, max_df_ratio=0.5)
    x, _ = space.transform(docs)
    ids = pre["arxiv_id"].to_numpy(dtype=object)
    pos = pd.Series(np.arange(len(pre)), index=ids)
    truth = mini.truth.loc[mini.truth["arxiv_id"].isin(pos.index)]
    codebooks: list[Codebook] = []
    centroids: dict[str, np.ndarray] = {}
    for fid in sorted(mini.field_info):
        fb = mini.blueprints[fid]
        t = truth.loc[truth["field_id"] == fid]
        rows = pos.loc[t["arxiv_id"].to_numpy()].to_numpy()
        labels = np.searchsorted(np.asarray(DIRECTION_KEYS), t["true_direction"].to_numpy())
        xf = x[rows]
        onehot = sp.csr_matrix((np.ones(rows.size), (labels, np.arange(rows.size))), shape=(N_DIRECTIONS, rows.size))
        sums = np.asarray((onehot @ xf).todense())
        empty = np.flatnonzero(~sums.any(axis=1))
        if empty.size:  # no pre-cutoff paper: the written direction (name and words) stands in
            pseudo = pd.DataFrame(
                {
                    "arxiv_id": [f"{fid}-{DIRECTION_KEYS[k]}" for k in empty],
                    "title": [fb.directions[k].name for k in empty],
                    "abstract": [" ".join(fb.directions[k].words) for k in empty],
                }
            )
            sums[empty] = space.transform(tokenize_papers(pseudo))[0].toarray()
        cents = normalise_dense(sums)
        proto_sims = cents @ cents.T
        np.fill_diagonal(proto_sims, -np.inf)
        directions = []
        for k, db in enumerate(fb.directions):
            near = fb.directions[int(np.argmax(proto_sims[k]))].name
            words = list(db.words)
            directions.append(
                Direction(
                    key=db.key,
                    name=db.name,
                    definition=f"Papers in {fb.name} whose main contribution concerns {db.name} ({_phrase(words[:6])}).",
                    inclusion=f"Include papers whose central method, task or finding is about {_phrase(words[:4])}.",
                    exclusion=(
                        f"Exclude papers that only mention {db.name} in passing, and papers centred on {near}, "
                        f"the nearest other direction."
                    ),
                    exemplars=_exemplars(xf, ids[rows], cents[k], labels == k),
                )
            )
        codebooks.append(Codebook(fid, fb.name, fb.definition, tuple(directions)))
        centroids[fid] = cents
    return codebooks, Prototypes(space=space, centroids=centroids)
