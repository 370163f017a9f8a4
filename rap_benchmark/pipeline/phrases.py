"""Readable names from text: verbatim phrases ranked by class-based TF-IDF (as BERTopic/KeyBERT).

A candidate phrase is 2-4 consecutive words of a title or abstract that are separated only by
single spaces and contain no stop word (:data:`rap_benchmark.core.text.STOPWORDS`), no
one-letter word and no pure number; hyphenated words count as one word ("retrieval-augmented
generation"). Its key is its lower-case form; its *surface* is the exact text it was read from,
so a name chosen here always occurs verbatim in the papers it names.

:func:`rank_phrases` scores phrases for one class against sibling classes with a document
frequency version of class-based TF-IDF: ``p_c(t) * ln(1 + p_c(t) / (p_rest(t) + 1/n_rest))``,
where ``p_c`` is the share of the class's papers using the phrase and ``p_rest`` the share of the
other papers. Frequent *and* distinctive phrases rank first.
"""

from __future__ import annotations

import hashlib
import math
import re
import sys
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from rap_benchmark.core.text import STOPWORDS

__all__ = ["PhraseTable", "extract_phrases", "maximal_phrases", "names_a_thing", "phrase_table", "rank_phrases"]

_WORD = re.compile(r"[^\W_]+(?:-[^\W_]+)*")
MIN_WORDS, MAX_WORDS = 2, 4
SURFACE_DOCS = 25
_CACHE: dict[str, PhraseTable] = {}


NAME_BREAKS: frozenset[str] = frozenset(
    """study studies present presents introduce introduces investigate investigates explore explores
    evaluate evaluates demonstrate demonstrates achieve achieves achieving provide provides improve
    improves improving existing novel recent various different several many well however first two
    three one work works framework frameworks extensive experiments significantly effectively
    efficient effective state art specifically furthermore moreover additionally e.g i.e et al""".split()
)
"""Generic academic words that break a phrase as stop words do (they never name a direction)."""


EDGE_WORDS: frozenset[str] = frozenset(
    """yet may might must shall will would should could can cannot upon via towards toward across
    within without among amongst along around beyond despite unlike like thus hence whereas whether
    while although though since still even rather quite very much more most less least almost nearly
    often always never usually typically generally particularly especially recently increasingly
    widely highly largely mainly mostly simply directly jointly respectively already also
    become becomes becoming became help helps helped helping make makes making made show shows
    showing shown showed remain remains remaining require requires required requiring allow allows
    allowed allowing enable enables enabled enabling leverage leverages leveraged leveraging use uses
    used using utilize utilizes utilizing employ employs employing lead leads leading led yield yields
    yielding offer offers offering obtain obtains obtained obtaining propose proposes proposed
    proposing called known given based build builds building built aim aims aiming seek seeks
    consider considers considered considering focus focuses focusing address addresses addressing
    tackle tackles suggest suggests indicate indicates highlight highlights reveal reveals due
    findings shed remarkable impressive promising powerful various numerous diverse further crucial
    important significant challenging difficult limited able capable potential possible successful
    comprehensive prior previous current traditional conventional popular""".split()
)
"""Words a noun phrase naming a research direction neither starts nor ends with: modals,
prepositions, adverbs, verbs and evaluative adjectives ("shown remarkable", "simple yet", "may
help", "become increasingly", "Building upon" are fragments, not names)."""

END_WORDS: frozenset[str] = EDGE_WORDS | frozenset(
    """simple new large small high low better best good great strong key main major common general
    unified standard typical emerging growing fundamental critical open future efficient robust
    accurate scalable novel effective superior rapid promise number baselines years""".split()
)
"""Adjectives that may start a name ("large language models") but never end one."""

_ADVERB_ENDS = ("ally", "ively", "ously", "ingly", "edly", "ently", "antly", "ately", "ibly", "ably", "tly")
_NOUN_ED = frozenset("speed seed need feed bed embed breed shed weed".split())


def names_a_thing(key: str) -> bool:
    """Whether the phrase ``key`` (lower case) can be a noun phrase: its first word is none of
    :data:`EDGE_WORDS`, its last none of :data:`END_WORDS`, no adverb (``-ally``, ``-ively``, ``-ously``, ...) starts or ends it, and it does not end on a
    past participle in ``-ed`` (``based``, ``driven``-style fragments)."""
    words = key.split(" ")
    first, last = words[0], words[-1]
    if first in EDGE_WORDS or last in END_WORDS or first.endswith(_ADVERB_ENDS) or last.endswith(_ADVERB_ENDS):
        return False
    return not (last.endswith("ed") and len(last) > 4 and last not in _NOUN_ED) and not last.endswith("-based")


def _breaks(word: str) -> bool:
    low = word.lower()
    return low in STOPWORDS or low in NAME_BREAKS or len(low) < 2 or low.replace("-", "").isdigit()


def extract_phrases(text: str) -> dict[str, str]:
    """Candidate phrases of ``text``: key (lower case) -> first surface form read."""
    out: dict[str, str] = {}
    run: list[re.Match[str]] = []

    def flush() -> None:
        for i in range(len(run)):
            for j in range(i + MIN_WORDS, min(i + MAX_WORDS, len(run)) + 1):
                surface = text[run[i].start() : run[j - 1].end()]
                out.setdefault(surface.lower(), surface)

    prev_end = None
    for m in _WORD.finditer(text):
        if _breaks(m.group()) or (prev_end is not None and text[prev_end : m.start()] != " "):
            flush()
            run = []
        if not _breaks(m.group()):
            run.append(m)
        prev_end = m.end()
    flush()
    return out


@dataclass(frozen=True)
class PhraseTable:
    """The texts and, per text, the set of candidate phrase keys it uses."""

    texts: tuple[str, ...]
    doc_keys: tuple[frozenset[str], ...]

    def surface(self, key: str, docs: Iterable[int]) -> str:
        """The most frequent surface form of ``key`` among the first SURFACE_DOCS of ``docs``
        that use it (ties: alphabetical)."""
        counts: Counter[str] = Counter()
        for d in docs:
            if key in self.doc_keys[d]:
                counts[extract_phrases(self.texts[d])[key]] += 1
                if counts.total() >= SURFACE_DOCS:
                    break
        if not counts:
            raise KeyError(f"no doc uses the phrase {key!r}")
        return min(counts, key=lambda s: (-counts[s], s))


def phrase_table(texts: Sequence[str]) -> PhraseTable:
    """Extract the candidate phrases of every text (keys interned: many docs share them).

    The last table is cached by a hash of the texts (fields and codebooks read the same ones).
    """
    digest = hashlib.sha256("\x00".join(texts).encode("utf-8")).hexdigest()
    if digest in _CACHE:
        return _CACHE[digest]
    keys = tuple(frozenset(sys.intern(k) for k in extract_phrases(t)) for t in texts)
    table = PhraseTable(texts=tuple(texts), doc_keys=keys)
    _CACHE.clear()
    _CACHE[digest] = table
    return table


def rank_phrases(
    table: PhraseTable, docs: Sequence[int], rest: Sequence[int], *, min_docs: int = 2, top: int = 20
) -> list[tuple[str, float, float]]:
    """The ``top`` phrases of ``docs`` against ``rest``: (key, score, share of ``docs`` using it).

    Only phrases used by at least ``min_docs`` of ``docs`` qualify; ties by key.
    """
    n_c, n_r = max(len(docs), 1), max(len(rest), 1)
    in_c: Counter[str] = Counter(k for d in docs for k in table.doc_keys[d])
    in_r: Counter[str] = Counter(k for d in rest for k in table.doc_keys[d] if k in in_c)
    scored = []
    for key, c in in_c.items():
        if c < min_docs:
            continue
        p_c = c / n_c
        p_r = in_r.get(key, 0) / n_r
        scored.append((key, p_c * math.log1p(p_c / (p_r + 1.0 / n_r)), p_c))
    scored.sort(key=lambda t: (-t[1], t[0]))
    return scored[:top]


MAXIMAL_KEEP = 0.75
"""A phrase gives way to a longer one containing it that at least this share of its users use."""


def maximal_phrases(table: PhraseTable, docs: Sequence[int], *, keep: float = MAXIMAL_KEEP) -> Callable[[str], str]:
    """A function taking a phrase key of ``docs`` to the longest phrase that completes it there.

    Sub-phrases are always at least as frequent as the phrases containing them, so a frequency
    ranking prefers "anything model" to "segment anything model". A key is a fragment when at
    least ``keep`` of the papers of ``docs`` using it also use a longer key containing it
    (contiguous words), counting every such completion together ("convolutional neural" is
    completed by "... network" in some papers and "... networks" in others); it is then replaced
    by its most used completion (ties: longer, then alphabetical), repeatedly. The result is a
    key used by ``docs``, so its surface is verbatim.
    """
    docs = list(docs)
    counts: Counter[str] = Counter(k for d in docs for k in table.doc_keys[d])
    supers: dict[str, list[str]] = {}
    for key, c in counts.items():
        if c < 2:
            continue
        words = key.split(" ")
        for i in range(len(words)):
            for j in range(i + MIN_WORDS, len(words) + 1):
                if j - i < len(words):
                    supers.setdefault(" ".join(words[i:j]), []).append(key)

    def complete(key: str) -> str:
        while key in supers:
            longer = supers[key]
            users = [table.doc_keys[d] for d in docs if key in table.doc_keys[d]]
            completed = sum(1 for keys in users if any(s in keys for s in longer))
            if not users or completed < keep * len(users):
                return key
            key = min(longer, key=lambda s: (-counts[s], -len(s.split(" ")), s))
        return key

    return complete
