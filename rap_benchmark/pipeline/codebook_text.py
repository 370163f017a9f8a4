"""The written codebook of a real-text field: names, definitions, boundaries and exemplars.

Given a field's pre-cutoff papers grouped into eight directions, each direction gets

* a **name**: a verbatim noun phrase of its papers, ranked by class-based TF-IDF against its
  siblings, completed to the longer phrase its papers use, filtered (:func:`_usable`) and chosen
  by how well it picks out the group within the field (F-score, beta 0.5, of precision and
  coverage), distinct from larger siblings' names and the field's own (:func:`_pick_names`);
* a **definition** from its next distinguishing phrases and its most representative title;
* an **inclusion** listing its distinguishing phrases (maximal marginal relevance) and the phrase
  that separates it from its nearest sibling, and an **exclusion** naming that sibling;
* five **exemplars** central to the group (:func:`_exemplars`), with ids and titles.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Sequence

import numpy as np

from rap_benchmark.core.records import DIRECTION_KEYS, N_DIRECTIONS, Direction
from rap_benchmark.pipeline.phrases import (
    KeyCounts,
    PhraseTable,
    listing,
    maximal_phrases,
    names_a_thing,
    rank_phrases,
    spellings,
    word_set,
)

__all__ = ["N_EXEMPLARS", "FieldUnfit", "common_phrases", "write_directions"]


class FieldUnfit(ValueError):
    """A field whose pre-cutoff papers cannot hold eight directions (the build drops it)."""


N_EXEMPLARS = 5
DEFINITION_PHRASES = 3
INCLUSION_PHRASES = 8
CANDIDATES = 60
"""Phrases ranked per direction (class-based TF-IDF against its siblings) before filtering."""
GENERIC_SHARE = 0.20
"""A phrase used by more than this share of the field's papers names nothing within it."""
COMMON_IN_FIELD = 0.01
COMMON_FIELDS = 0.25
"""A phrase in at least COMMON_IN_FIELD of the papers of COMMON_FIELDS of the fields is common."""
NAME_BETA2 = 0.25
"""beta squared of the name's F-score: precision counts more than coverage (beta = 0.5)."""
SEPARATING_SHARE = 0.10
"""The phrase that sets a direction apart from its nearest sibling is used by this share of its papers."""
MMR_OVERLAP = 0.5
"""Inclusion phrases sharing this much of their words (Jaccard) with an earlier one are skipped."""
EXEMPLAR_POOL = 4 * N_EXEMPLARS
"""Exemplars come from the closer half of a direction's papers to its prototype, and at least this many."""


def _nested(a: str, b: str) -> bool:
    """Whether one phrase holds the other, singular or plural, hyphenated or not ("multi-modal
    LLMs" in "multimodal llm", "language model" in "large language models")."""
    return any(f" {x} " in f" {y} " or f" {y} " in f" {x} " for x, y in zip(spellings(a), spellings(b), strict=True))


def _same_or_nested(a: str, b: str) -> bool:
    return _nested(a, b) or word_set(a) == word_set(b)


def _pick_names(field_name: str, ranked: list[list[str]]) -> list[str]:
    """One phrase key per direction: the best not equal to (in singular form) or nested in a larger
    sibling's name or the field's name (directions pick in key order, D0 first); the best unused one if every
    phrase is nested."""
    taken: list[str] = [field_name.lower()]
    keys: list[str] = []
    for options in ranked:
        free = [k for k in options if k not in taken]
        pick = next((k for k in free if not any(_same_or_nested(k, t) for t in taken)), free[0] if free else None)
        if pick is None:
            raise FieldUnfit(f"no distinct phrase names a direction of {field_name!r}")
        taken.append(pick)
        keys.append(pick)
    return keys


MIN_CONCENTRATION = 0.05
"""At least this share of the corpus's papers using a phrase are in the field, or the phrase is the
corpus's ("success rate", "real data", "key challenge"), not the field's."""


def _usable(
    key: str,
    field_counts: KeyCounts | Counter[str],
    n_field: int,
    field_key: str,
    common: Collection[str],
    table: PhraseTable,
) -> bool:
    """A phrase that can name or describe a direction: a noun phrase (not a fragment), used by at
    most GENERIC_SHARE of the field's papers, with at least MIN_CONCENTRATION of the corpus's users
    in the field, not a phrase common to the corpus's fields, and not the field's own name."""
    count = field_counts[key]
    return (
        names_a_thing(key)
        and count <= GENERIC_SHARE * n_field
        and count >= MIN_CONCENTRATION * table.key_totals[table.key_id(key)]
        and key not in common
        and not _nested(key, field_key)
    )


def common_phrases(table: PhraseTable, fields: Sequence[np.ndarray]) -> frozenset[str]:
    """Phrases the whole corpus uses: found in at least COMMON_IN_FIELD of the papers of at least
    COMMON_FIELDS of the fields (``fields``: each field's papers as rows of ``table``). Academic
    filler ("future research", "superior performance") and umbrella terms ("deep learning",
    "large language models") are spread over many fields; a field's topics are not."""
    spread = np.zeros(len(table.vocab), dtype=np.int64)  # per key id: fields it is common in
    for docs in fields:
        ids, counts = table.frequencies(docs)
        floor = max(2.0, COMMON_IN_FIELD * len(docs))
        spread[ids[counts >= floor]] += 1
    need = max(2.0, COMMON_FIELDS * len(fields))
    return frozenset(table.vocab[i] for i in np.flatnonzero(spread >= need).tolist())


def _diverse(keys: Sequence[str], avoid: Sequence[str], n: int) -> list[str]:
    """Up to ``n`` of ``keys`` (best first) by maximal marginal relevance: each next pick is the
    best-ranked one whose words overlap no earlier pick (nor ``avoid``) by MMR_OVERLAP or more
    (Jaccard over singular word forms), so the list does not repeat itself."""
    picked: list[str] = []
    seen = [word_set(a) for a in avoid]
    for key in keys:
        words = word_set(key)
        if any(len(words & s) / len(words | s) >= MMR_OVERLAP for s in seen):
            continue
        picked.append(key)
        seen.append(words)
        if len(picked) == n:
            break
    return picked


def write_directions(
    field_name: str,
    table: PhraseTable,
    docs: np.ndarray,
    labels: np.ndarray,
    sims: np.ndarray,
    ids: np.ndarray,
    titles: np.ndarray,
    centroids: np.ndarray,
    common: Collection[str] = frozenset(),
) -> tuple[Direction, ...]:
    """The eight written directions of one field.

    ``docs``: the field's pre-cutoff papers as rows of ``table``; ``labels``: their direction
    (0..7); ``sims``: their cosine to each prototype; ``ids``/``titles`` aligned with ``docs``;
    ``centroids``: the 8 prototypes (to find each direction's nearest sibling); ``common``: the
    corpus's common phrases (:func:`common_phrases`), which name nothing.
    """
    groups = [np.flatnonzero(labels == k) for k in range(N_DIRECTIONS)]
    members = [docs[g] for g in groups]
    field_counts = table.key_counts(docs)
    n_field = len(docs)
    field_key = field_name.lower()
    ranked, naming = [], []
    for k in range(N_DIRECTIONS):
        rest = np.concatenate([members[j] for j in range(N_DIRECTIONS) if j != k])
        options = [key for key, _, _ in rank_phrases(table, members[k], rest, min_docs=2, top=CANDIDATES)]
        if not options:
            options = [key for key, _, _ in rank_phrases(table, members[k], rest, min_docs=1, top=CANDIDATES)]
        complete = maximal_phrases(table, members[k])
        completed = list(dict.fromkeys(complete(key) for key in options))
        usable = [
            key for key in completed if _usable(key, field_counts, n_field, field_key, common, table)
        ] or completed
        ranked.append(usable)
        # the name: the phrase that best picks out the group within the field, F_beta of its
        # precision p = in_k / field and coverage c = in_k / n_k, (1 + b2) in_k / (b2 n_k + field)
        wanted = set(usable)
        in_k = table.key_counts(members[k])
        n_k = len(members[k])
        best = sorted(usable, key=lambda key: -in_k[key] / (NAME_BETA2 * n_k + field_counts[key]))
        naming.append(best + [key for key in completed if key not in wanted])  # fallbacks, last
    keys = _pick_names(field_name, naming)
    names = [table.surface(key, members[k]) for k, key in enumerate(keys)]
    near_sims = centroids @ centroids.T
    np.fill_diagonal(near_sims, -np.inf)
    out = []
    for k in range(N_DIRECTIONS):
        near = int(np.argmax(near_sims[k]))
        g = groups[k]
        ex_ids, ex_titles = _exemplars(table, docs, g, sims[:, k], ids, titles, keys[k])
        rest_keys = [x for x in ranked[k] if x != keys[k] and not _nested(x, keys[k]) and x not in keys]
        listed_keys = _diverse(rest_keys, [keys[k]], INCLUSION_PHRASES)
        phrases = [table.surface(key, members[k]) for key in listed_keys[:DEFINITION_PHRASES]]
        listed = [table.surface(key, members[k]) for key in listed_keys]
        exclude = {keys[k], keys[near], field_key}

        def usable(key: str) -> bool:
            return _usable(key, field_counts, n_field, field_key, common, table)

        own = _separating(table, members[k], members[near], exclude=exclude, usable=usable)
        theirs = _separating(table, members[near], members[k], exclude=exclude, usable=usable)
        definition = f"Work in {field_name} on {names[k]}"
        definition += f", notably {listing(phrases)}." if phrases else "."
        definition += f" Representative: \u201c{ex_titles[0]}\u201d." if ex_titles else ""
        inclusion = f"Include papers whose main contribution concerns {names[k]}"
        inclusion += f", such as work on {listing(listed)}" if listed else ""
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


def _exemplars(
    table: PhraseTable,
    docs: np.ndarray,
    group: np.ndarray,
    sim: np.ndarray,
    ids: np.ndarray,
    titles: np.ndarray,
    name_key: str,
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """N_EXEMPLARS papers central to the group: among the closer half of its papers to the
    prototype (at least EXEMPLAR_POOL of them), those that use the direction's name first, then
    the closest others, each by closeness (ties by id). A reader sees the name in the exemplars,
    and never an outlier of the group."""
    order = group[np.lexsort((ids[group].astype(str), -sim[group]))]
    central = order[: max(EXEMPLAR_POOL, (order.size + 1) // 2)]
    uses = table.uses_mask(name_key, docs[central])
    chosen = np.concatenate([central[uses], central[~uses]])[:N_EXEMPLARS]
    return tuple(str(ids[i]) for i in chosen), tuple(str(titles[i]) for i in chosen)


def _separating(
    table: PhraseTable, docs: np.ndarray, other: np.ndarray, *, exclude: set[str], usable: Callable[[str], bool]
) -> str:
    """The usable phrase that best tells ``docs`` from ``other`` (surface form), or '' if none. It
    is used by at least SEPARATING_SHARE of ``docs`` (at least two): a phrase a few papers happen
    to use ("18x speedup", "urgent need") separates nothing a reader can apply."""
    min_docs = max(2, int(np.ceil(SEPARATING_SHARE * len(docs))))
    for key, _, _ in rank_phrases(table, docs, other, min_docs=min_docs, top=20):
        if usable(key) and key not in exclude and not any(_nested(key, e) for e in exclude):
            return table.surface(key, docs)
    return ""
