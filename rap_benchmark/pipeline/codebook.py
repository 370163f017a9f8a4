"""Offline codebooks: exactly eight directions per field from pre-cutoff text (SPEC 3.2).

Two constructions share one output (a list of :class:`~rap_benchmark.core.records.Codebook` sorted
by field id, and :class:`Prototypes` for the offline assignment instrument):

* :func:`build_codebooks` (real text): a TF-IDF space fitted on all papers dated before
  ``spec.codebook_cutoff``; per field, seeded spherical k-means of the field's pre-cutoff
  papers into eight clusters; a direction's name is its most distinctive terms (centroid weight
  minus the field's mean centroid), its definition, inclusion and exclusion are written from those
  terms (the exclusion names the nearest other direction), and its exemplars are the (up to) five
  pre-cutoff papers nearest its centroid. Directions are ordered by pre-cutoff size (largest is
  D0; ties by name).
* :func:`codebooks_from_blueprint` (mini): the generator's own directions (D_k = true direction
  k), prototypes fitted on the pre-cutoff papers' true labels, exemplars nearest the prototype.

Both never read a paper dated on or after the cutoff: every pre-cutoff filter happens before
any text is tokenised.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import scipy.sparse as sp

from rap_benchmark.core.records import DIRECTION_KEYS, N_DIRECTIONS, Codebook, Direction
from rap_benchmark.core.spec import BenchmarkSpec
from rap_benchmark.pipeline.fields import (
    FieldInfo,
    TfidfSpace,
    TokenizedCorpus,
    _normalise_dense_rows,
    spherical_kmeans,
    tokenize_papers,
    top_terms,
)

if TYPE_CHECKING:
    from rap_benchmark.pipeline.synth import MiniCorpus

__all__ = ["N_EXEMPLARS", "Prototypes", "build_codebooks", "codebooks_from_blueprint"]

N_EXEMPLARS = 5
KMEANS_INITS = 4  # seeded k-means++ starts per field; the best objective is kept
NAME_TERMS = 3
DESCRIBE_TERMS = 8


@dataclass(frozen=True)
class Prototypes:
    """What the offline instrument compares papers against.

    ``space``: the TF-IDF space fitted on pre-cutoff papers only. ``centroids``: field id ->
    8 x ``space.n_terms`` dense array, row k the L2-normalised prototype of direction Dk.
    """

    space: TfidfSpace
    centroids: dict[str, np.ndarray]


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


def _write_direction(
    key: str,
    name_terms: list[str],
    describe: list[str],
    field_name: str,
    nearest_name: str,
    exemplars: tuple[str, ...],
) -> Direction:
    name = " / ".join(name_terms) if name_terms else f"{field_name} ({key})"
    return Direction(
        key=key,
        name=name,
        definition=f"Papers in {field_name} whose main contribution concerns {_phrase(describe)}.",
        inclusion=f"Include papers whose central method, task or finding is about {_phrase(describe[:4])}.",
        exclusion=(
            f"Exclude papers that only mention these terms in passing, and papers centred on "
            f"{nearest_name}, the nearest other direction."
        ),
        exemplars=exemplars,
    )


def build_codebooks(
    papers: pd.DataFrame,
    memberships: pd.DataFrame,
    field_info: dict[str, FieldInfo],
    spec: BenchmarkSpec,
    *,
    progress: bool = False,
) -> tuple[list[Codebook], Prototypes]:
    """Offline codebooks from real pre-cutoff text (see the module docstring).

    Raises ValueError when a field has fewer than eight pre-cutoff papers.
    """
    from tqdm import tqdm

    pre, docs = _pre_cutoff(papers, spec)
    space = TfidfSpace.fit(docs, min_df=2, max_df_ratio=0.5)
    x, _ = space.transform(docs)
    ids = pre["arxiv_id"].to_numpy(dtype=object)
    rows_by_field = _field_rows(pre, memberships)
    terms = space.terms
    codebooks: list[Codebook] = []
    centroids: dict[str, np.ndarray] = {}
    for i, fid in enumerate(tqdm(sorted(field_info), desc="codebooks", disable=not progress)):
        rows = rows_by_field.get(fid, np.zeros(0, np.int64))
        if rows.size < N_DIRECTIONS:
            raise ValueError(f"field {fid} has {rows.size} pre-cutoff papers; eight directions need at least 8")
        xf = x[rows]
        rng = np.random.default_rng([spec.seed, 3, i])
        labels, cents = spherical_kmeans(xf, N_DIRECTIONS, rng, n_init=KMEANS_INITS)
        sizes = np.bincount(labels, minlength=N_DIRECTIONS)
        mean = cents.mean(axis=0)
        distinct = [top_terms(cents[k] - mean, terms, DESCRIBE_TERMS) for k in range(N_DIRECTIONS)]
        order = sorted(range(N_DIRECTIONS), key=lambda k: (-sizes[k], distinct[k]))
        cents = cents[order]
        labels = np.argsort(order)[labels]
        distinct = [distinct[k] for k in order]
        names = [
            " / ".join(d[:NAME_TERMS]) or f"{field_info[fid].name} ({DIRECTION_KEYS[k]})"
            for k, d in enumerate(distinct)
        ]
        proto_sims = cents @ cents.T
        np.fill_diagonal(proto_sims, -np.inf)
        directions = []
        for k in range(N_DIRECTIONS):
            near = int(np.argmax(proto_sims[k]))
            ex = _exemplars(xf, ids[rows], cents[k], labels == k)
            directions.append(
                _write_direction(
                    DIRECTION_KEYS[k], distinct[k][:NAME_TERMS], distinct[k], field_info[fid].name, names[near], ex
                )
            )
        info = field_info[fid]
        codebooks.append(Codebook(fid, info.name, info.definition, tuple(directions)))
        centroids[fid] = cents
    return codebooks, Prototypes(space=space, centroids=centroids)


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
        cents = _normalise_dense_rows(sums)
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
