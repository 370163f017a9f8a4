"""The corpus view at the cutoff as files, built once and memory-mapped read-only by every worker.

The workers share one copy in the page cache instead of each building BM25 postings. The folder
is derived data under the instance's ``.cache/`` (never hashed), named by the corpus file's
sha256, the cutoff and :data:`FORMAT`, and renamed into place once complete.

    meta.json                   format, cutoff, number of documents, BM25 k1 and b
    vocab.json                  the BM25 vocabulary (a term's position is its id)
    bm25.<array>.npy            the BM25Index arrays (rows, day, id_rank, doc_len, terms, indptr, post_doc, post_tf)
    <column>.bin, <column>.npy  UTF-8 strings and int64 offsets: key (normalised url, sorted), url,
                                title, text, flat (whitespace-flattened text, what snippets cut from)
    crawl_day.npy, sub_corpus.npy   int32 days since 1970, uint8 sub-corpus codes

:class:`MappedView` answers ``search_results`` and ``fetch`` exactly as the in-memory
:class:`~rap_benchmark.citecast.webcorpus.CorpusView` it was built from.
"""

from __future__ import annotations

import bisect
import datetime as dt
import hashlib
import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from rap_benchmark.citecast.records import SubCorpus, WebDocument
from rap_benchmark.citecast.webcorpus import (
    CorpusView,
    flatten,
    normalise_url,
    search_result,
)
from rap_benchmark.core.fsio import atomic_open, atomic_write_bytes, atomic_write_text, build_once
from rap_benchmark.core.text import query_terms

FORMAT = 1
BM25_ARRAYS = ("rows", "day", "id_rank", "doc_len", "terms", "indptr", "post_doc", "post_tf")
STRING_COLUMNS = ("key", "url", "title", "text", "flat")
SUB_CORPORA = tuple(SubCorpus)
EPOCH = dt.date(1970, 1, 1)


class StringColumn(Sequence[str]):
    """Strings stored as one UTF-8 blob plus offsets, both memory-mapped; ``col[i]`` decodes one."""

    def __init__(self, blob: np.ndarray, offsets: np.ndarray) -> None:
        self._blob = blob
        self._offsets = offsets

    def __len__(self) -> int:
        return len(self._offsets) - 1

    def __getitem__(self, i):  # noqa: ANN001 - int (slices are not needed)
        a, b = int(self._offsets[i]), int(self._offsets[i + 1])
        return self._blob[a:b].tobytes().decode("utf-8")

    @staticmethod
    def write(folder: Path, name: str, values: Sequence[str]) -> None:
        encoded = [v.encode("utf-8") for v in values]
        offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
        np.cumsum([len(e) for e in encoded], out=offsets[1:])
        atomic_write_bytes(folder / f"{name}.bin", b"".join(encoded))
        _save(folder / f"{name}.npy", offsets)

    @classmethod
    def open(cls, folder: Path, name: str) -> StringColumn:
        path = folder / f"{name}.bin"
        blob = np.memmap(path, dtype=np.uint8, mode="r") if path.stat().st_size else np.zeros(0, np.uint8)
        return cls(np.asarray(blob), _load(folder / f"{name}.npy"))


def _save(path: Path, array: np.ndarray) -> None:
    with atomic_open(path, "wb") as fh:
        np.save(fh, array)


def _load(path: Path) -> np.ndarray:
    return np.asarray(np.load(path, mmap_mode="r"))  # a read-only view of the mapped file


def index_key(corpus_sha256: str, cutoff: dt.date) -> str:
    return hashlib.sha256(f"{FORMAT}\n{corpus_sha256}\n{cutoff.isoformat()}".encode()).hexdigest()[:24]


def write_index(view: CorpusView, out: Path) -> Path:
    """Write ``view`` (documents and BM25 index) as an index folder at ``out``, atomically; an
    existing ``out`` is kept as it is."""
    return build_once(out, "meta.json", lambda folder: _write_index(view, folder))


def _write_index(view: CorpusView, folder: Path) -> None:
    folder.mkdir()
    index = view.bm25_index()
    for name in BM25_ARRAYS:
        _save(folder / f"bm25.{name}.npy", np.ascontiguousarray(getattr(index, name)))
    vocab = sorted(index.term_index, key=index.term_index.__getitem__)
    atomic_write_text(folder / "vocab.json", json.dumps(vocab, ensure_ascii=False))
    docs = view.documents
    columns = {
        "key": view.keys,
        "url": [d.url for d in docs],
        "title": [d.title for d in docs],
        "text": [d.text for d in docs],
        "flat": [flatten(d.text) for d in docs],
    }
    for name, values in columns.items():
        StringColumn.write(folder, name, values)
    _save(folder / "crawl_day.npy", np.array([(d.crawl_date - EPOCH).days for d in docs], dtype=np.int32))
    _save(folder / "sub_corpus.npy", np.array([SUB_CORPORA.index(d.sub_corpus) for d in docs], dtype=np.uint8))
    meta = {"format": FORMAT, "cutoff": view.cutoff.isoformat(), "n_docs": len(docs), "k1": index.k1, "b": index.b}
    atomic_write_text(folder / "meta.json", json.dumps(meta, sort_keys=True))


class MappedView:
    """A corpus view served from an index folder (see the module docstring); read-only, fork-safe."""

    def __init__(self, folder: str | Path) -> None:
        from rap_benchmark.bm25 import BM25Index

        folder = Path(folder)
        meta = json.loads((folder / "meta.json").read_text(encoding="utf-8"))
        if meta.get("format") != FORMAT:
            raise ValueError(f"{folder}: index format {meta.get('format')}, expected {FORMAT}; rebuild it")
        self.folder = folder
        self.cutoff = dt.date.fromisoformat(meta["cutoff"])
        cols = {name: StringColumn.open(folder, name) for name in STRING_COLUMNS}
        self.keys, self.urls, self.titles, self.texts, self.flats = (cols[n] for n in STRING_COLUMNS)
        self.crawl_day = _load(folder / "crawl_day.npy")
        self.sub_corpus = _load(folder / "sub_corpus.npy")
        vocab = json.loads((folder / "vocab.json").read_text(encoding="utf-8"))
        arrays = {name: _load(folder / f"bm25.{name}.npy") for name in BM25_ARRAYS}
        self.index = BM25Index(
            k1=meta["k1"], b=meta["b"], backend="auto", term_index={t: i for i, t in enumerate(vocab)},
            ids=self.keys, **arrays,
        )  # fmt: skip

    def __len__(self) -> int:
        return len(self.keys)

    def build_index(self) -> None:
        """Compile the search kernels and cache the slice norms (one query)."""
        self.search_results("warm up", 1)

    def search_positions(self, query: str, k: int = 8) -> tuple[np.ndarray, int]:
        """Positions (in key order) of the top ``k`` documents by BM25, and the hit count."""
        if not query_terms(query) or not len(self):
            return np.zeros(0, dtype=np.int64), 0
        rows, _scores, total = self.index.ranked_positions(self.index.term_ids(query), -(2**31), 2**31 - 1, k)
        return rows, int(total)

    def search_results(self, query: str, k: int = 8) -> list[dict[str, str]]:
        """What ``web_search`` shows (identical to :meth:`CorpusView.search_results`)."""
        rows, _ = self.search_positions(query, k)
        terms = query_terms(query)
        return [search_result(self.titles[i], self.urls[i], self.flats[i], terms) for i in rows.tolist()]

    def fetch(self, url: str) -> WebDocument | None:
        """The latest crawl of ``url`` on or before the cutoff, or None."""
        key = normalise_url(url)
        i = bisect.bisect_left(self.keys, key)
        if i == len(self.keys) or self.keys[i] != key:
            return None
        return WebDocument(
            self.urls[i],
            EPOCH + dt.timedelta(days=int(self.crawl_day[i])),
            SUB_CORPORA[int(self.sub_corpus[i])],
            self.titles[i],
            self.texts[i],
        )
