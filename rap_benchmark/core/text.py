"""The one deterministic tokenizer used by search, codebooks and instruments.

Lower-case, ASCII-fold, split on anything that is not a letter or digit, drop a fixed English
stop-word list and one-character tokens. No stemming, no dependence on hash seeds or locale.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from itertools import islice

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


def _folded(text: str) -> str:
    """``text`` as :func:`words` and :func:`token_ids` read it before lower-casing: ASCII as it is
    (NFKD and the ASCII fold leave it so), other text NFKD normalised with the non-ASCII
    characters dropped."""
    if text.isascii():
        return text
    return unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")


def words(text: str) -> list[str]:
    """The words of ``text`` in order: folded to lower-case ASCII, split on anything that is not a
    letter or digit, one-character words dropped; stop words kept."""
    return _WORD.findall(_folded(text).lower())


def tokenize(text: str) -> list[str]:
    """Tokens of ``text`` in order (duplicates kept)."""
    return [t for t in words(text) if t not in STOPWORDS]


TOKEN_CHUNK = 20_000
"""Texts read at a time by :func:`token_ids` (the word strings of one chunk only are alive at once)."""


_WORD_BYTES = np.full(256, ord(" "), dtype=np.uint8)
"""A byte table that lower-cases ASCII letters, keeps digits and turns every other byte into a
space: the words of folded text are then the space-separated pieces of two or more bytes."""
_WORD_BYTES[np.frombuffer(b"abcdefghijklmnopqrstuvwxyz0123456789", dtype=np.uint8)] = np.frombuffer(
    b"abcdefghijklmnopqrstuvwxyz0123456789", dtype=np.uint8
)
_WORD_BYTES[np.frombuffer(b"ABCDEFGHIJKLMNOPQRSTUVWXYZ", dtype=np.uint8)] = np.frombuffer(
    b"abcdefghijklmnopqrstuvwxyz", dtype=np.uint8
)


def token_ids(texts: Iterable[str]) -> tuple[list[str], np.ndarray, np.ndarray]:
    """(vocab, lengths, ids): the :func:`tokenize` tokens of every text, as ids into the sorted
    ``vocab``: text ``d`` is ``vocab[ids[start:start + lengths[d]]]`` (int64 lengths, int32 ids).

    What :func:`tokenize` gives, text by text, but read a chunk at a time in Arrow: the folded
    ASCII texts' bytes go through :data:`_WORD_BYTES` at once, the pieces between spaces of two or
    more bytes are :func:`words`' words (maximal letter/digit runs, in order), each is hashed in C
    (a dictionary encoding) and stop words are dropped by id: no string is made per word, only one
    per distinct word of a chunk."""
    import pyarrow as pa
    import pyarrow.compute as pc

    index: dict[str, int] = {}  # word -> id, in first-seen order
    parts: list[np.ndarray] = []
    sizes: list[np.ndarray] = []
    it = iter(texts)
    while batch := [_folded(t) for t in islice(it, TOKEN_CHUNK)]:
        text = pa.array(batch, type=pa.large_string())
        _, offsets, data = text.buffers()
        raw = np.frombuffer(data, dtype=np.uint8) if data is not None else np.zeros(0, np.uint8)
        spaced = pa.LargeStringArray.from_buffers(len(text), offsets, pa.py_buffer(_WORD_BYTES[raw]))
        pieces = pc.ascii_split_whitespace(spaced)
        flat, doc = pc.list_flatten(pieces), pc.list_parent_indices(pieces)
        is_word = pc.greater_equal(pc.binary_length(flat), 2)
        coded = flat.filter(is_word).dictionary_encode()
        codes = coded.indices.to_numpy(zero_copy_only=False)
        seen = coded.dictionary.to_pylist()
        ids = np.fromiter((index.setdefault(w, len(index)) for w in seen), dtype=np.int32, count=len(seen))
        kept = ~np.fromiter((w in STOPWORDS for w in seen), dtype=bool, count=len(seen))[codes]
        parts.append(ids[codes[kept]])  # only this chunk's distinct words are ever held as strings
        doc_of = doc.filter(is_word).to_numpy(zero_copy_only=False)[kept]
        sizes.append(np.bincount(doc_of, minlength=len(batch)))
        del batch, text, spaced, pieces, flat, doc, coded
    vocab = sorted(w for w in index if w not in STOPWORDS)
    rank = {w: i for i, w in enumerate(vocab)}
    remap = np.fromiter((rank.get(w, -1) for w in index), dtype=np.int32, count=len(index))
    lengths = np.concatenate(sizes).astype(np.int64) if sizes else np.zeros(0, dtype=np.int64)
    return vocab, lengths, remap[np.concatenate(parts)] if parts else np.zeros(0, dtype=np.int32)


def query_terms(query: str) -> list[str]:
    """Distinct query tokens in first-seen order (duplicate query terms count once)."""
    return list(dict.fromkeys(tokenize(query)))
