"""The written codebook of a real-text field: names, definitions, boundaries and exemplars.

Given a field's pre-cutoff papers grouped into eight directions, each direction gets

* a **name**: its best verbatim phrase by class-based TF-IDF against its seven siblings
  (:func:`rap_benchmark.pipeline.phrases.rank_phrases`), completed to the longer phrase its
  papers actually use ("Segment Anything Model", not "Anything Model":
  :func:`~rap_benchmark.pipeline.phrases.maximal_phrases`), distinct from (and not nested in) the
  names of larger siblings and the field's own name;
* a **definition** built from its next distinguishing phrases and its most representative title;
* an **inclusion** listing the direction's distinguishing phrases (what a paper of it is about)
  and naming the phrase that best separates it from its nearest sibling (closest prototype), and
  an **exclusion** naming that sibling's name and separating phrase (the sibling's own words
  stay out of the inclusion, so a reader, or a classifier, is not pointed at them twice);
* five **exemplars**: the group's papers closest to its prototype, with ids and titles.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from rap_benchmark.core.records import DIRECTION_KEYS, N_DIRECTIONS, Direction
from rap_benchmark.pipeline.phrases import PhraseTable, maximal_phrases, rank_phrases

__all__ = ["N_EXEMPLARS", "FieldUnfit", "write_directions"]


class FieldUnfit(ValueError):
    """A field whose pre-cutoff papers cannot hold eight directions (the build drops it)."""


N_EXEMPLARS = 5
DEFINITION_PHRASES = 3
INCLUSION_PHRASES = 8


def _listing(items: Sequence[str]) -> str:
    items = list(items)
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]


def _nested(a: str, b: str) -> bool:
    return f" {a} " in f" {b} " or f" {b} " in f" {a} "


def _pick_names(field_name: str, ranked: list[list[str]]) -> list[str]:
    """One phrase key per direction: the best not equal to or nested in a larger sibling's name
    or the field's name (directions pick in key order, D0 first); the best unused one if every
    phrase is nested."""
    taken: list[str] = [field_name.lower()]
    keys: list[str] = []
    for options in ranked:
        free = [k for k in options if k not in taken]
        pick = next((k for k in free if not any(_nested(k, t) for t in taken)), free[0] if free else None)
        if pick is None:
            raise FieldUnfit(f"no distinct phrase names a direction of {field_name!r}")
        taken.append(pick)
        keys.append(pick)
    return keys


def write_directions(
    field_name: str,
    table: PhraseTable,
    docs: np.ndarray,
    labels: np.ndarray,
    sims: np.ndarray,
    ids: np.ndarray,
    titles: np.ndarray,
    centroids: np.ndarray,
) -> tuple[Direction, ...]:
    """The eight written directions of one field.

    ``docs``: the field's pre-cutoff papers as rows of ``table``; ``labels``: their direction
    (0..7); ``sims``: their cosine to each prototype; ``ids``/``titles`` aligned with ``docs``;
    ``centroids``: the 8 prototypes (to find each direction's nearest sibling).
    """
    groups = [np.flatnonzero(labels == k) for k in range(N_DIRECTIONS)]
    members = [docs[g] for g in groups]
    ranked = []
    for k in range(N_DIRECTIONS):
        rest = np.concatenate([members[j] for j in range(N_DIRECTIONS) if j != k])
        options = [key for key, _, _ in rank_phrases(table, members[k], rest, min_docs=2, top=40)]
        if not options:
            options = [key for key, _, _ in rank_phrases(table, members[k], rest, min_docs=1, top=40)]
        complete = maximal_phrases(table, members[k])
        ranked.append(list(dict.fromkeys(complete(key) for key in options)))
    keys = _pick_names(field_name, ranked)
    names = [table.surface(key, members[k]) for k, key in enumerate(keys)]
    near_sims = centroids @ centroids.T
    np.fill_diagonal(near_sims, -np.inf)
    out = []
    for k in range(N_DIRECTIONS):
        near = int(np.argmax(near_sims[k]))
        g = groups[k]
        order = np.lexsort((ids[g].astype(str), -sims[g, k]))[:N_EXEMPLARS]
        ex_ids = tuple(str(ids[g[i]]) for i in order)
        ex_titles = tuple(str(titles[g[i]]) for i in order)
        rest_keys = [x for x in ranked[k] if x != keys[k] and not _nested(x, keys[k])]
        phrases = [table.surface(key, members[k]) for key in rest_keys[:DEFINITION_PHRASES]]
        listed = [table.surface(key, members[k]) for key in rest_keys[:INCLUSION_PHRASES]]
        own = _separating(table, members[k], members[near], exclude={keys[k], keys[near]})
        theirs = _separating(table, members[near], members[k], exclude={keys[k], keys[near]})
        definition = f"Work in {field_name} on {names[k]}"
        definition += f", notably {_listing(phrases)}." if phrases else "."
        definition += f" Representative: \u201c{ex_titles[0]}\u201d." if ex_titles else ""
        inclusion = f"Include papers whose main contribution concerns {names[k]}"
        inclusion += f", such as work on {_listing(listed)}" if listed else ""
        inclusion += f"; {own} sets it apart from its nearest sibling, {DIRECTION_KEYS[near]}." if own else "."
        exclusion = f"Exclude papers centred on {names[near]}"
        exclusion += f" or {theirs}" if theirs else ""
        exclusion += f"; they belong to {DIRECTION_KEYS[near]}."
        out.append(
            Direction(
                key=DIRECTION_KEYS[k],
                name=names[k],
                definition=definition,
                inclusion=inclusion,
                exclusion=exclusion,
                exemplars=ex_ids,
                exemplar_titles=ex_titles,
            )
        )
    return tuple(out)


def _separating(table: PhraseTable, docs: np.ndarray, other: np.ndarray, *, exclude: set[str]) -> str:
    """The phrase that best tells ``docs`` from ``other`` (surface form), or '' if none."""
    for key, _, _ in rank_phrases(table, docs, other, min_docs=2, top=10):
        if key not in exclude and not any(_nested(key, e) for e in exclude):
            return table.surface(key, docs)
    return ""
