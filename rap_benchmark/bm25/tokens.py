"""Tokenised text as compact arrays, and its on-disk cache.

A :class:`TokenTable` holds, for every document, its distinct terms (ids into a sorted
vocabulary, ascending) with their term frequencies, and its length in tokens (duplicates
counted). It is everything BM25 needs, so field indexes for every universe are built from it
without touching the text again. The vocabulary is sorted, so term ids never depend on hash
seeds or on the order documents arrive in.

An instance folder caches its table in ``.cache/`` (never hashed, always rebuildable), keyed by
the sha256 of ``papers.parquet`` and a fingerprint of the tokenizer, so a changed corpus or a
changed tokenizer can never serve stale tokens.
"""

from __future__ import annotations

import hashlib
import inspect
import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from rap_benchmark.core import text as _text
from rap_benchmark.core.fsio import atomic_open

CACHE_NAME = "search_tokens_v2.npz"
ARRAYS = ("doc_ptr", "term", "tf", "doc_len")  # a TokenTable's arrays, as the cache stores them


def tokenizer_fingerprint() -> str:
    """sha256 of the shared tokenizer's source: any change to it invalidates token caches."""
    return hashlib.sha256(inspect.getsource(_text).encode("utf-8")).hexdigest()


@dataclass(frozen=True, eq=False)
class TokenTable:
    """Per-document distinct terms, term frequencies and lengths over a sorted vocabulary.

    Document ``i`` owns ``term[doc_ptr[i]:doc_ptr[i+1]]`` (ascending term ids) and the matching
    ``tf`` entries; ``doc_len[i]`` is its number of tokens, duplicates included.
    """

    vocab: tuple[str, ...]
    doc_ptr: np.ndarray  # int64, n_docs + 1
    term: np.ndarray  # int32
    tf: np.ndarray  # uint8, uint16 or int32: the narrowest that holds every count
    doc_len: np.ndarray  # int32

    @property
    def n_docs(self) -> int:
        return len(self.doc_len)

    def term_index(self) -> dict[str, int]:
        """Term -> id for the sorted vocabulary."""
        return {t: i for i, t in enumerate(self.vocab)}


def _compact_tf(tf: np.ndarray) -> np.ndarray:
    """Term frequencies in the narrowest of uint8 / uint16 / int32 that holds them all."""
    top = int(tf.max()) if len(tf) else 0
    for dtype in (np.uint8, np.uint16):
        if top <= np.iinfo(dtype).max:
            return tf.astype(dtype)
    return tf.astype(np.int32)


def table_from_token_ids(vocab: Sequence[str], docs: Sequence[np.ndarray] | np.ndarray, lengths=None) -> TokenTable:
    """Build a table from token-id streams over an already sorted ``vocab``.

    ``docs`` is either a sequence of int arrays (one per document, duplicates kept) or one flat
    int array with ``lengths`` giving each document's token count.
    """
    vocab = tuple(vocab)
    if list(vocab) != sorted(set(vocab)):
        raise ValueError("vocab must be sorted and free of duplicates")
    if lengths is None:
        lengths = np.fromiter((len(d) for d in docs), dtype=np.int64, count=len(docs))
        flat = np.concatenate([np.asarray(d, dtype=np.int64) for d in docs]) if len(docs) else np.zeros(0, np.int64)
    else:
        lengths = np.asarray(lengths, dtype=np.int64)
        flat = np.asarray(docs, dtype=np.int64)
    n = len(lengths)
    n_vocab = max(len(vocab), 1)
    if len(flat) and (flat.min() < 0 or flat.max() >= len(vocab)):
        raise ValueError("token id outside the vocabulary")
    doc_of = np.repeat(np.arange(n, dtype=np.int64), lengths)
    keys, counts = np.unique(doc_of * n_vocab + flat, return_counts=True)
    key_doc = keys // n_vocab
    doc_ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(key_doc, minlength=n), out=doc_ptr[1:])
    return TokenTable(
        vocab=vocab,
        doc_ptr=doc_ptr,
        term=(keys % n_vocab).astype(np.int32),
        tf=_compact_tf(counts),
        doc_len=lengths.astype(np.int32),
    )


def tokenize_texts(texts: Iterable[str], *, progress: bool = False, total: int | None = None) -> TokenTable:
    """Tokenise every text with :func:`rap_benchmark.core.text.tokenize` into a :class:`TokenTable`."""
    from tqdm import tqdm

    bar = tqdm(texts, total=total, desc="tokenize", unit="doc", disable=not progress, leave=False)
    vocab, lengths, ids = _text.token_ids(bar)
    return table_from_token_ids(vocab, ids, lengths)


def save_table(path: Path, table: TokenTable, key: str) -> None:
    """Write ``table`` to ``path`` (uncompressed npz; written atomically)."""
    with atomic_open(path, "wb") as fh:
        np.savez(
            fh,
            key=np.frombuffer(key.encode("utf-8"), dtype=np.uint8),
            vocab=np.frombuffer("\n".join(table.vocab).encode("utf-8"), dtype=np.uint8),
            **{name: getattr(table, name) for name in ARRAYS},
        )
    for stale in path.parent.glob("search_tokens_v*.npz"):  # caches of older formats
        if stale.name != path.name:
            stale.unlink(missing_ok=True)


def load_table(path: Path, key: str) -> TokenTable | None:
    """Read a cached table; None when absent, unreadable or built for another key."""
    try:
        with np.load(path, allow_pickle=False) as data:
            if data["key"].tobytes().decode("utf-8") != key:
                return None
            blob = data["vocab"].tobytes().decode("utf-8")
            vocab = tuple(blob.split("\n")) if blob else ()
            return TokenTable(vocab=vocab, **{name: data[name] for name in ARRAYS})
    except (OSError, KeyError, ValueError):
        return None


def cache_key(corpus_digest: str, n_docs: int) -> str:
    """The key a cached table must carry: corpus identity, size and tokenizer fingerprint."""
    return json.dumps(
        {"corpus": corpus_digest, "n_docs": n_docs, "tokenizer": tokenizer_fingerprint(), "format": 2},
        sort_keys=True,
    )


def token_cache_valid(cache_dir: Path | None, corpus_digest: str, n_docs: int) -> bool:
    """Whether ``cache_dir`` holds a token table for this corpus and tokenizer (cheap check)."""
    if cache_dir is None:
        return False
    try:
        with np.load(Path(cache_dir) / CACHE_NAME, allow_pickle=False) as data:
            return data["key"].tobytes().decode("utf-8") == cache_key(corpus_digest, n_docs)
    except (OSError, KeyError, ValueError):
        return False


def cached_table(
    cache_dir: Path | None,
    corpus_digest: str,
    n_docs: int,
    make_texts: Callable[[], Iterable[str]],
    *,
    progress: bool = False,
) -> TokenTable:
    """The token table of the ``n_docs`` texts that ``make_texts()`` yields: read from
    ``cache_dir`` when a matching cache is there, otherwise tokenised and (when ``cache_dir``
    is given and writable) cached. ``make_texts`` is only called on a cache miss."""
    key = cache_key(corpus_digest, n_docs)
    path = None if cache_dir is None else Path(cache_dir) / CACHE_NAME
    if path is not None and path.is_file():
        table = load_table(path, key)
        if table is not None:
            return table
    table = tokenize_texts(make_texts(), progress=progress, total=n_docs)
    if table.n_docs != n_docs:
        raise ValueError(f"expected {n_docs} texts, got {table.n_docs}")
    if path is not None:
        try:
            save_table(path, table, key)
        except OSError:
            pass  # a read-only artifact folder still serves; it just re-tokenises next time
    return table
