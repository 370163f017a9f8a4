"""The one deterministic tokenizer used by search, codebooks and instruments.

Lower-case, ASCII-fold, split on anything that is not a letter or digit, drop a fixed English
stop-word list and one-character tokens. No stemming, no dependence on hash seeds or locale.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from itertools import chain, islice

import numpy as np

_WORD = re.compile(r"[a-z0-9]{2,}")  # a maximal letter/digit run of two or more characters

STOPWORDS: frozenset[str] = frozenset(
    """a about above after again against all also am an and any are as at be because been before
    being below between both but by can could did do does doing down during each few for from
    further had has have having he her here hers herself him himself his how i if in into is it its
    itself just me more most my myself no nor not now of off on once only or other our ours
    ourselves out over own same she should so some such than that the their theirs them themselves
    then there these they this those through to too under until up very was we were what when where
    which while who whom why will with would you your yours yourself yourselves via using use used
    based we our paper propose proposed show shows results approach method methods new""".split()
)


def words(text: str) -> list[str]:
    """The words of ``text`` in order: folded to lower-case ASCII, split on anything that is not a
    letter or digit, one-character words dropped; stop words kept."""
    if text.isascii():  # NFKD and the ASCII fold leave ASCII as it is
        return _WORD.findall(text.lower())
    return _WORD.findall(unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii").lower())


def tokenize(text: str) -> list[str]:
    """Tokens of ``text`` in order (duplicates kept)."""
    return [t for t in words(text) if t not in STOPWORDS]


TOKEN_CHUNK = 20_000
"""Texts read at a time by :func:`token_ids` (the word strings of one chunk only are alive at once)."""


def token_ids(texts: Iterable[str]) -> tuple[list[str], np.ndarray, np.ndarray]:
    """(vocab, lengths, ids): the :func:`tokenize` tokens of every text, as ids into the sorted
    ``vocab``: text ``d`` is ``vocab[ids[start:start + lengths[d]]]`` (int64 lengths, int32 ids).

    What :func:`tokenize` gives, text by text, but each word is hashed in C (pandas' factorize)
    and stop words are dropped by id, a chunk at a time, not checked word by word in Python: the
    numbers kept per token are its int32 id only."""
    import pandas as pd

    index: dict[str, int] = {}  # word -> id, in first-seen order
    parts: list[np.ndarray] = []
    sizes: list[np.ndarray] = []
    it = iter(texts)
    while batch := [words(t) for t in islice(it, TOKEN_CHUNK)]:
        n = np.fromiter(map(len, batch), dtype=np.int64, count=len(batch))
        flat = np.fromiter(chain.from_iterable(batch), dtype=object, count=int(n.sum()))
        del batch
        codes, uniques = pd.factorize(flat)
        del flat
        seen = uniques.tolist()
        ids = np.fromiter((index.setdefault(w, len(index)) for w in seen), dtype=np.int32, count=len(seen))
        kept = ~np.fromiter((w in STOPWORDS for w in seen), dtype=bool, count=len(seen))[codes]
        parts.append(ids[codes[kept]])  # only this chunk's words are ever held word by word
        sizes.append(np.bincount(np.repeat(np.arange(n.size), n)[kept], minlength=n.size))
    vocab = sorted(w for w in index if w not in STOPWORDS)
    rank = {w: i for i, w in enumerate(vocab)}
    remap = np.fromiter((rank.get(w, -1) for w in index), dtype=np.int32, count=len(index))
    lengths = np.concatenate(sizes).astype(np.int64) if sizes else np.zeros(0, dtype=np.int64)
    return vocab, lengths, remap[np.concatenate(parts)] if parts else np.zeros(0, dtype=np.int32)


def query_terms(query: str) -> list[str]:
    """Distinct query tokens in first-seen order (duplicate query terms count once)."""
    return list(dict.fromkeys(tokenize(query)))
