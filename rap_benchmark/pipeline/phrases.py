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

import bisect
import hashlib
import math
import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import cached_property, lru_cache

import numpy as np

from rap_benchmark.core.text import STOPWORDS
from rap_benchmark.pipeline.interning import intern_rows

__all__ = [
    "KeyCounts",
    "PhraseTable",
    "first_surface",
    "forget_tables",
    "listing",
    "maximal_phrases",
    "names_a_thing",
    "phrase_keys",
    "phrase_table",
    "rank_phrases",
    "spellings",
    "word_set",
]

_WORD = re.compile(r"[^\W_]+(?:-[^\W_]+)*")
MIN_WORDS, MAX_WORDS = 2, 4
SURFACE_DOCS = 25
SURFACE_MEMO = 512
"""Surfaces remembered per table (a codebook asks for the same phrase of the same papers again)."""
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
    comprehensive prior previous current traditional conventional popular state-of-the-art
    thereby including struggle struggles available exhibit exhibits exhibited exhibiting assess
    assesses assessed assessing""".split()
)
"""Words a noun phrase naming a research direction neither starts nor ends with: modals,
prepositions, adverbs, verbs and evaluative adjectives ("shown remarkable", "simple yet", "may
help", "become increasingly", "Building upon" are fragments, not names)."""

END_WORDS: frozenset[str] = EDGE_WORDS | frozenset(
    """simple new large small high low better best good great strong key main major common general
    unified standard typical emerging growing fundamental critical open future efficient robust
    accurate scalable novel effective superior rapid promise number baselines years page pages
    website webpage homepage url need needs empirical""".split()
)
"""Adjectives that may start a name ("large language models") but never end one, and the words of
an abstract's pointers ("project page")."""

_ADVERB_ENDS = ("ally", "ively", "ously", "ingly", "edly", "ently", "antly", "ately", "ibly", "ably", "tly")
_NOUN_ED = frozenset("speed seed need feed bed embed breed shed weed".split())


def names_a_thing(key: str) -> bool:
    """Whether the phrase ``key`` (lower case) can be a noun phrase: no edge word, adverb or (last)
    end word or ``-ed`` participle at its ends."""
    words = key.split(" ")
    first, last = words[0], words[-1]
    if first in EDGE_WORDS or last in END_WORDS or first.endswith(_ADVERB_ENDS) or last.endswith(_ADVERB_ENDS):
        return False
    return not (last.endswith("ed") and len(last) > 4 and last not in _NOUN_ED) and not last.endswith("-based")


def _singular(word: str) -> str:
    """A plural's singular form, roughly ("abilities" -> "ability", "processes" -> "process",
    "approaches" -> "approach", "models" -> "model"; "loss", "analysis" stay)."""
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith(("sses", "ches", "shes", "xes")):
        return word[:-2]
    if word.endswith(("ss", "us", "is")) or not word.endswith("s") or len(word) <= 3:
        return word
    return word[:-1]


SPELLINGS_MEMO = 1 << 16
"""Phrases whose spellings are remembered (codebooks compare the same candidates many times)."""


@lru_cache(maxsize=SPELLINGS_MEMO)
def spellings(key: str) -> tuple[str, str]:
    """The phrase ``key`` in singular form, hyphenated words split and joined ("multi-modal models"
    -> "multi modal model", "multimodal model"): phrases sharing a form say the same thing."""
    split = " ".join(_singular(w) for w in key.replace("-", " ").split(" "))
    return split, " ".join(_singular(w.replace("-", "")) for w in key.split(" "))


@lru_cache(maxsize=SPELLINGS_MEMO)
def word_set(key: str) -> frozenset[str]:
    """The words of the phrase's joined spelling (:func:`spellings`)."""
    return frozenset(spellings(key)[1].split(" "))


def listing(items: Sequence[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]


def _breaks(word: str) -> bool:
    low = word.lower()
    return low in STOPWORDS or low in NAME_BREAKS or len(low) < 2 or low.replace("-", "").isdigit()


_BREAK_MEMO: dict[str, bool] = {}
_BREAK_MEMO_MAX = 200_000


def _runs(text: str) -> list[list[tuple[int, int]]]:
    """The runs of ``text``: maximal sequences of (start, end) word spans that are separated only
    by single spaces and hold no breaking word (runs of one word included)."""
    memo = _BREAK_MEMO
    runs: list[list[tuple[int, int]]] = []
    run: list[tuple[int, int]] = []
    prev_end = -1
    for m in _WORD.finditer(text):
        start, end = m.span()
        word = m.group()
        brk = memo.get(word)
        if brk is None:
            brk = _breaks(word)
            if len(memo) < _BREAK_MEMO_MAX:
                memo[word] = brk
        if brk:
            if run:
                runs.append(run)
                run = []
        else:
            if run and (start - prev_end != 1 or text[prev_end] != " "):
                runs.append(run)
                run = []
            run.append((start, end))
        prev_end = end
    if run:
        runs.append(run)
    return runs


def _spans(run: list[tuple[int, int]]) -> Iterator[tuple[int, int]]:
    """(start, end) of every phrase of one run, in reading order (by first word, then length)."""
    n = len(run)
    for i in range(n - MIN_WORDS + 1):
        a = run[i][0]
        for j in range(i + MIN_WORDS, min(i + MAX_WORDS, n) + 1):
            yield a, run[j - 1][1]


_LOWER_ASCII_SPLIT = re.compile(r"([a-z0-9]+(?:-[a-z0-9]+)*)")
r"""Splits lower-case ASCII text into separator, word, ..., word, separator (one C call per text):
:data:`_WORD`'s words, since ``[^\W_]`` is ``[a-z0-9]`` there."""


def phrase_keys(text: str) -> set[str]:
    """The candidate phrases of ``text``, lower case."""
    if text.isascii():
        return _ascii_phrase_keys(text.lower())
    return {text[a:b].lower() for run in _runs(text) for a, b in _spans(run)}


def _ascii_phrase_keys(low: str) -> set[str]:
    """:func:`phrase_keys` of lower-cased ASCII text, read as a list of words and separators.

    The runs are :func:`_runs`' (lower-casing ASCII moves no word boundary and changes no
    :func:`_breaks` answer), and a phrase's text is its words joined by the single spaces
    between them, so joining the words gives the same keys without a span per phrase."""
    memo = _BREAK_MEMO
    keys: set[str] = set()
    parts = _LOWER_ASCII_SPLIT.split(low)  # parts[i] for odd i is a word, parts[i - 1] the text before it
    run: list[str] = []
    for i in range(1, len(parts), 2):
        word = parts[i]
        brk = memo.get(word)
        if brk is None:
            brk = _breaks(word)
            if len(memo) < _BREAK_MEMO_MAX:
                memo[word] = brk
        if brk or (run and parts[i - 1] != " "):
            if len(run) >= MIN_WORDS:
                _add_run_keys(run, keys)
            run = [] if brk else [word]
        else:
            run.append(word)
    if len(run) >= MIN_WORDS:
        _add_run_keys(run, keys)
    return keys


def _add_run_keys(run: list[str], keys: set[str]) -> None:
    """Add the phrases of one run of (lower-case) words: every MIN_WORDS..MAX_WORDS consecutive words."""
    grams = run
    for n in range(2, min(len(run), MAX_WORDS) + 1):  # n-grams: (n - 1)-grams and the word after each
        grams = [f"{g} {w}" for g, w in zip(grams[:-1], run[n - 1 :], strict=True)]
        if n >= MIN_WORDS:
            keys.update(grams)


def _continues_word(text: str, i: int, step: int) -> bool:
    r"""Whether ``text[i]``, beside an occurrence (``step`` -1 before it, +1 after it), belongs to a
    word running into it: a letter or digit (for ASCII, what ``[^\W_]`` matches), or a hyphen with
    one beyond it (a hyphen joined to a letter continues a word, as in :data:`_WORD`)."""
    if not 0 <= i < len(text):
        return False
    beyond = i + step
    return text[i].isalnum() or (text[i] == "-" and 0 <= beyond < len(text) and text[beyond].isalnum())


def first_surface(text: str, key: str) -> str | None:
    """The surface form of ``key`` in ``text`` (None if unused): its leftmost occurrence as a phrase.

    ASCII text is searched for the key itself: an occurrence is a phrase when no word runs into it
    from either side, since the key's own words are single-spaced and none of them breaks a run.
    Other text is read run by run."""
    n = key.count(" ") + 1
    if not MIN_WORDS <= n <= MAX_WORDS:
        return None
    if text.isascii():
        words = key.split(" ")
        if any(_breaks(w) or _WORD.fullmatch(w) is None for w in words):
            return None
        low = text.lower()
        at = low.find(key)
        while at >= 0:
            end = at + len(key)
            if not _continues_word(text, at - 1, -1) and not _continues_word(text, end, 1):
                return text[at:end]
            at = low.find(key, at + 1)
        return None
    for run in _runs(text):
        for i in range(len(run) - n + 1):
            surface = text[run[i][0] : run[i + n - 1][1]]
            if surface.lower() == key:
                return surface
    return None


@dataclass(frozen=True, eq=False)
class PhraseTable:
    """The texts and, per text, the candidate phrase keys it uses: ``vocab`` holds every key once,
    sorted (ids order as keys do); row ``d`` of the CSR pair (``indptr``, ``ids``) lists the ids
    of the keys text ``d`` uses, each once."""

    texts: tuple[str, ...]
    vocab: tuple[str, ...]
    indptr: np.ndarray
    ids: np.ndarray
    _surfaces: dict[tuple[str, bytes], str] = field(default_factory=dict, repr=False)

    @cached_property
    def key_totals(self) -> np.ndarray:
        """Per key id, how many texts use it."""
        return np.bincount(self.ids, minlength=len(self.vocab))

    def key_id(self, key: str) -> int:
        """The id of ``key`` in ``vocab``, -1 if no text uses it."""
        i = bisect.bisect_left(self.vocab, key)
        return i if i < len(self.vocab) and self.vocab[i] == key else -1

    def _gather(self, docs: Sequence[int] | np.ndarray) -> np.ndarray:
        """The key ids of all of ``docs`` (a text listed twice counts twice)."""
        docs = np.asarray(docs, dtype=np.int64).reshape(-1)
        if docs.size == 0:
            return np.zeros(0, dtype=self.ids.dtype)
        starts = self.indptr[docs]
        lens = self.indptr[docs + 1] - starts
        total = int(lens.sum())
        offsets = np.repeat(starts - (np.cumsum(lens) - lens), lens)
        return self.ids[offsets + np.arange(total, dtype=np.int64)]

    def frequencies(self, docs: Sequence[int] | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(key ids, how many of ``docs`` use each), ids ascending (so keys alphabetical)."""
        return np.unique(self._gather(docs), return_counts=True)

    def counts(self, docs: Sequence[int] | np.ndarray) -> Counter[str]:
        """Key -> how many of ``docs`` use it."""
        keys, n = self.frequencies(docs)
        vocab = self.vocab
        return Counter(dict(zip([vocab[i] for i in keys.tolist()], n.tolist(), strict=True)))

    def key_counts(self, docs: Sequence[int] | np.ndarray) -> KeyCounts:
        """How many of ``docs`` use a key, looked up key by key: what :meth:`counts` holds, without
        a string and a dict entry for each of the (many) keys ``docs`` use."""
        return KeyCounts(self, *self.frequencies(docs))

    @cached_property
    def _postings(self) -> tuple[np.ndarray, np.ndarray]:
        """(postings indptr, texts): the texts using key id ``i`` are
        ``texts[indptr[i]:indptr[i + 1]]``, ascending. Built once, on first use."""
        order = np.argsort(self.ids, kind="stable")
        doc_of = np.repeat(np.arange(len(self.texts), dtype=np.int32), np.diff(self.indptr))
        ptr = np.zeros(len(self.vocab) + 1, dtype=np.int64)
        np.cumsum(self.key_totals, out=ptr[1:])
        return ptr, doc_of[order]

    def uses_mask(self, key: str, docs: Sequence[int] | np.ndarray) -> np.ndarray:
        """Per text of ``docs``, whether it uses ``key``."""
        docs = np.asarray(docs, dtype=np.int64).reshape(-1)
        i = self.key_id(key)
        if i < 0:
            return np.zeros(docs.size, dtype=bool)
        ptr, texts = self._postings
        post = texts[ptr[i] : ptr[i + 1]]  # ascending
        at = np.minimum(np.searchsorted(post, docs), post.size - 1)
        return post[at] == docs

    def users(self, key: str, docs: Sequence[int] | np.ndarray) -> np.ndarray:
        """The texts of ``docs`` that use ``key``, in the order of ``docs``."""
        docs = np.asarray(docs, dtype=np.int64).reshape(-1)
        return docs[self.uses_mask(key, docs)]

    def surface(self, key: str, docs: Iterable[int]) -> str:
        """The most frequent surface form of ``key`` among the first SURFACE_DOCS of ``docs``
        that use it (ties: alphabetical)."""
        docs = np.asarray(docs if isinstance(docs, np.ndarray) else list(docs), dtype=np.int64)
        memo = (key, hashlib.blake2b(docs.tobytes(), digest_size=16).digest())
        if memo in self._surfaces:
            return self._surfaces[memo]
        counts: Counter[str] = Counter()
        for d in self.users(key, docs)[:SURFACE_DOCS].tolist():
            form = first_surface(self.texts[d], key)
            assert form is not None, (key, d)
            counts[form] += 1
        if not counts:
            raise KeyError(f"no doc uses the phrase {key!r}")
        if len(self._surfaces) >= SURFACE_MEMO:
            self._surfaces.clear()
        form = self._surfaces[memo] = min(counts, key=lambda s: (-counts[s], s))
        return form


class KeyCounts:
    """How many of some texts use each phrase key (:meth:`PhraseTable.key_counts`): ``c[key]`` is
    what ``Counter`` would give, 0 for a key none of them uses."""

    __slots__ = ("_ids", "_n", "_table")

    def __init__(self, table: PhraseTable, ids: np.ndarray, n: np.ndarray) -> None:
        self._table, self._ids, self._n = table, ids, n

    def __getitem__(self, key: str) -> int:
        i = self._table.key_id(key)
        if i < 0:
            return 0
        at = int(np.searchsorted(self._ids, i))
        return int(self._n[at]) if at < self._ids.size and self._ids[at] == i else 0


def phrase_table(texts: Sequence[str]) -> PhraseTable:
    """The :class:`PhraseTable` of ``texts``; the last one is cached by a hash of the texts (fields
    and codebooks read the same ones) until :func:`forget_tables`."""
    digest = hashlib.sha256("\x00".join(texts).encode("utf-8")).hexdigest()
    if digest in _CACHE:
        return _CACHE[digest]
    _CACHE.clear()
    vocab, indptr, ids = intern_rows((phrase_keys(text) for text in texts), len(texts))
    table = PhraseTable(texts=tuple(texts), vocab=vocab, indptr=indptr, ids=ids)
    _CACHE[digest] = table
    return table


def forget_tables() -> None:
    """Drop the cached table (its texts and phrases) once no stage needs it."""
    _CACHE.clear()


def rank_phrases(
    table: PhraseTable,
    docs: Sequence[int],
    rest: Sequence[int] | None = None,
    *,
    min_docs: int = 2,
    top: int | None = 20,
) -> list[tuple[str, float, float]]:
    """The ``top`` phrases of ``docs`` against ``rest``: (key, score, share of ``docs`` using it).

    Only phrases used by at least ``min_docs`` of ``docs`` qualify; ties by key. ``rest`` None is
    every other text of the table; ``top`` None keeps every qualifying phrase.
    """
    n_c = max(len(docs), 1)
    ids_c, in_c = table.frequencies(docs)
    keep = in_c >= min_docs
    ids_c, in_c = ids_c[keep], in_c[keep]
    if ids_c.size == 0:
        return []
    if rest is None:  # the other texts' counts: the table's totals less the docs' own
        n_r = max(len(table.texts) - len(docs), 1)
        r = table.key_totals[ids_c] - in_c
    else:
        n_r = max(len(rest), 1)
        r = _counts_of(table, rest, ids_c)
    p_c = in_c / n_c
    ratio = p_c / (r / n_r + 1.0 / n_r)
    score = p_c * np.array([math.log1p(x) for x in ratio.tolist()])  # math's log1p, as when scored one by one
    order = np.lexsort((ids_c, -score))[:top]  # ids ascend as keys do
    vocab = table.vocab
    return [
        (vocab[i], s, p)
        for i, s, p in zip(ids_c[order].tolist(), score[order].tolist(), p_c[order].tolist(), strict=True)
    ]


def _counts_of(table: PhraseTable, docs: Sequence[int], ids: np.ndarray) -> np.ndarray:
    """How many of ``docs`` use each key id of ``ids`` (ascending)."""
    ids_r, in_r = table.frequencies(docs)
    if not ids_r.size:
        return np.zeros(ids.size, dtype=np.int64)
    pos = np.minimum(np.searchsorted(ids_r, ids), ids_r.size - 1)
    return np.where(ids_r[pos] == ids, in_r[pos], 0)


MAXIMAL_KEEP = 0.75
"""A phrase gives way to a longer one containing it that at least this share of its users use."""


def maximal_phrases(table: PhraseTable, docs: Sequence[int], *, keep: float = MAXIMAL_KEEP) -> Callable[[str], str]:
    """A function taking a phrase key of ``docs`` to the longest phrase that completes it there
    ("anything model" -> "segment anything model"). A key is a fragment when at least ``keep`` of
    its users in ``docs`` also use some longer key containing it; it is then replaced by its most
    used completion (ties: longer, then alphabetical), repeatedly.
    """
    docs = np.asarray(list(docs) if not isinstance(docs, np.ndarray) else docs, dtype=np.int64)
    ids, n = table.frequencies(docs)
    shared = n >= 2  # only a key two or more texts use can complete another (most keys have one)
    vocab = table.vocab
    counts = dict(zip([vocab[i] for i in ids[shared].tolist()], n[shared].tolist(), strict=True))
    supers: dict[str, list[str]] = {}
    for key in counts:
        words = key.split(" ")
        for i in range(len(words)):
            for j in range(i + MIN_WORDS, len(words) + 1):
                if j - i < len(words):
                    supers.setdefault(" ".join(words[i:j]), []).append(key)

    def complete(key: str) -> str:
        while key in supers:
            longer = supers[key]
            users = table.users(key, docs)
            completed = int(np.logical_or.reduce([table.uses_mask(s, users) for s in longer]).sum())
            if not users.size or completed < keep * users.size:
                return key
            key = min(longer, key=lambda s: (-counts[s], -len(s.split(" ")), s))
        return key

    return complete
