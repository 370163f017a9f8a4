"""SearchEngine: every episode universe of an instance, served from one index per field.

A field's index holds the field's papers (its ``assignments`` rows, any type) sorted by
(date, arxiv_id). A universe is a date slice of it (the paper's Search environment):

* ``fixed``: the field's papers dated in [T - window_months, T);
* ``expanding``: the field's papers dated before T.

Optional ``start`` / ``end`` arguments (``end`` inclusive) intersect that slice; they never widen
it, so a paper dated on or after T is never returned. IDF and avgdl are those of the papers the
call can see (the slice after narrowing), exactly as if an index were built on only those papers.

Building every field index from the cached token table is a pair of linear passes per field; no
per-universe structure exists, so all universes are servable as soon as the fields are built.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from rap_benchmark.bm25.columns import (
    DISPLAY_CACHE,
    date_strings,
    display_key,
    read_display,
    release_free_heap,
    strings,
    write_display,
)
from rap_benchmark.bm25.index import DAY_MIN, BM25Index, RankedResult, id_ranks
from rap_benchmark.bm25.kernels import Backend
from rap_benchmark.bm25.tokens import cached_table, token_cache_valid
from rap_benchmark.core.dates import add_months, parse_date, to_days
from rap_benchmark.core.records import Regime, SearchHit, SearchObservation
from rap_benchmark.core.spec import BenchmarkSpec
from rap_benchmark.core.sums import CACHE_DIR, listed_sha256

DateArg = str | dt.date | None


def _frame_digest(papers: pd.DataFrame) -> str:
    h = hashlib.sha256()
    for col in ("arxiv_id", "date", "title", "abstract"):
        for value in papers[col].astype(str):
            h.update(value.encode("utf-8"))
            h.update(b"\x1f")
        h.update(b"\x1e")
    return h.hexdigest()


class SearchEngine:
    """Field-local BM25 search over every (field, origin, regime) universe of an instance."""

    def __init__(
        self,
        *,
        spec: BenchmarkSpec,
        ids: list[str],
        dates: Any,
        titles: Any,
        abstracts: Any,
        fields: dict[str, BM25Index],
    ) -> None:
        self.spec = spec
        self.ids = ids
        self._dates = dates
        self._titles = titles
        self._abstracts = abstracts  # already cut to spec.abstract_chars
        self.fields = fields
        self._universe_cache: dict[tuple[Any, Any], tuple[int, int]] = {}

    # -- construction ----------------------------------------------------------------------
    @classmethod
    def from_instance(cls, inst: Any, *, backend: Backend = "auto", progress: bool = False) -> SearchEngine:
        """Build from a loaded instance: an :class:`~rap_benchmark.core.artifacts.Instance`, its
        target-blind :class:`~rap_benchmark.core.artifacts.PublicInstance` view, or any object
        with ``papers``, ``memberships`` (arxiv_id, field_id), ``spec`` and optionally
        ``search_cache``. Tokens are cached in the instance's ``.cache/``; later builds read them
        instead of re-tokenising."""
        cache = getattr(inst, "search_cache", None)
        return cls.from_frames(
            inst.papers, inst.memberships, inst.spec,
            cache_dir=None if cache is None else cache.folder,
            corpus_digest=None if cache is None else cache.papers_sha256,
            backend=backend, progress=progress,
        )  # fmt: skip

    @classmethod
    def from_dir(cls, root: str | Path, *, backend: Backend = "auto", progress: bool = False) -> SearchEngine:
        """Build straight from an instance folder, reading only what search needs (papers' id,
        date, title, abstract; assignments' id and field; the ledger's spec). Hashes are not
        verified here: use ``from_instance(load_instance(root))`` for a verified load.

        Besides the token table, ``.cache/`` keeps the display text (titles, abstracts already
        cut to ``spec.abstract_chars``) so later builds never read the full-text parquet."""
        import pyarrow.parquet as pq

        from rap_benchmark.core.artifacts import LEDGER_FILE

        root = Path(root)
        ledger = json.loads((root / LEDGER_FILE).read_text(encoding="utf-8"))
        spec = BenchmarkSpec.from_dict(ledger["spec"])
        cache_dir = root / CACHE_DIR
        digest = listed_sha256(root, "papers.parquet")
        display_path = cache_dir / DISPLAY_CACHE
        key = display_key(digest, spec.abstract_chars)
        papers = read_display(display_path, key)
        cut = papers is not None and token_cache_valid(cache_dir, digest, papers.num_rows)
        if not cut:
            papers = pq.read_table(root / "papers.parquet", columns=["arxiv_id", "date", "title", "abstract"])
        engine = cls._from_arrow(
            papers,
            pq.read_table(root / "assignments.parquet", columns=["arxiv_id", "field_id"]),
            spec,
            cache_dir=cache_dir,
            corpus_digest=digest,
            backend=backend,
            progress=progress,
            abstracts_cut=cut,
            display_cache=None if cut else (display_path, key),
        )
        del papers
        release_free_heap()  # the full-text table read above is gone now
        return engine

    @classmethod
    def from_frames(
        cls,
        papers: pd.DataFrame,
        assignments: pd.DataFrame,
        spec: BenchmarkSpec,
        *,
        cache_dir: Path | None = None,
        corpus_digest: str | None = None,
        backend: Backend = "auto",
        progress: bool = False,
    ) -> SearchEngine:
        """Build from a papers table (arxiv_id, date, title, abstract) and a memberships table
        (arxiv_id, field_id). With ``cache_dir``, the token table is cached there under
        ``corpus_digest`` (computed from the papers' text when not given)."""
        import pyarrow as pa

        if cache_dir is not None and corpus_digest is None:
            corpus_digest = _frame_digest(papers)
        paper_cols = ["arxiv_id", "date", "title", "abstract"]
        engine = cls._from_arrow(
            pa.Table.from_pandas(papers[paper_cols], preserve_index=False),
            pa.Table.from_pandas(assignments[["arxiv_id", "field_id"]], preserve_index=False),
            spec,
            cache_dir=cache_dir,
            corpus_digest=corpus_digest,
            backend=backend,
            progress=progress,
        )
        release_free_heap()
        return engine

    @classmethod
    def _from_arrow(
        cls,
        papers: Any,
        assignments: Any,
        spec: BenchmarkSpec,
        *,
        cache_dir: Path | None,
        corpus_digest: str | None,
        backend: Backend,
        progress: bool,
        abstracts_cut: bool = False,
        display_cache: tuple[Path, str] | None = None,
    ) -> SearchEngine:
        import pyarrow as pa
        import pyarrow.compute as pc
        from tqdm import tqdm

        ids_arr = strings(papers["arxiv_id"])
        ids = ids_arr.to_pylist()
        if len(set(ids)) != len(ids):
            raise ValueError("papers.arxiv_id has duplicates")
        dates_arr = date_strings(papers["date"])
        days = pc.cast(pc.cast(dates_arr, pa.date32()), pa.int32()).to_numpy(zero_copy_only=False)
        titles = strings(papers["title"])
        abstracts = strings(papers["abstract"])

        def texts() -> Iterator[str]:
            if abstracts_cut:  # never tokenise display text: the index must see full abstracts
                raise RuntimeError("token cache vanished while building from the display cache")
            for title, abstract in zip(titles.to_pylist(), abstracts.to_pylist(), strict=True):
                yield f"{title}\n{abstract}"

        table = cached_table(cache_dir, corpus_digest or "", len(ids), texts, progress=progress)
        id_rank = id_ranks(ids)
        order_rank = np.empty(len(ids), dtype=np.int64)
        order_rank[np.lexsort((id_rank, days))] = np.arange(len(ids), dtype=np.int64)

        assigned = strings(assignments["arxiv_id"])
        found = pc.index_in(assigned, value_set=ids_arr)
        if found.null_count:
            missing = assigned.filter(pc.is_null(found))[0].as_py()
            raise ValueError(f"assignments name a paper absent from papers: {missing}")
        rows = found.to_numpy(zero_copy_only=False).astype(np.int64)
        field_col = strings(assignments["field_id"])
        field_ids = sorted(pc.unique(field_col).to_pylist())
        codes = pc.index_in(field_col, value_set=pa.array(field_ids, type=field_col.type))
        codes = codes.to_numpy(zero_copy_only=False).astype(np.int64)
        order = np.lexsort((order_rank[rows], codes))
        rows, codes = rows[order], codes[order]
        bounds = np.searchsorted(codes, np.arange(len(field_ids) + 1))
        term_index = table.term_index()
        fields: dict[str, BM25Index] = {}
        for j, field_id in enumerate(tqdm(field_ids, desc="index fields", unit="field", disable=not progress)):
            field_rows = rows[bounds[j] : bounds[j + 1]]
            if len(field_rows) > 1:  # drop duplicate memberships (rows are in (date, id) order)
                field_rows = field_rows[np.concatenate(([True], field_rows[1:] != field_rows[:-1]))]
            fields[field_id] = BM25Index.from_token_table(
                table, field_rows, ids=ids, days=days, id_rank=id_rank, k1=spec.bm25_k1, b=spec.bm25_b,
                backend=backend, term_index=term_index,
            )  # fmt: skip
        if not abstracts_cut:
            abstracts = pc.utf8_slice_codeunits(abstracts, 0, spec.abstract_chars)
        if display_cache is not None:
            columns = {"arxiv_id": ids_arr, "date": dates_arr, "title": titles, "abstract": abstracts}
            write_display(*display_cache, pa.table(columns))
        return cls(spec=spec, ids=ids, dates=dates_arr, titles=titles, abstracts=abstracts, fields=fields)

    # -- universes -------------------------------------------------------------------------
    @property
    def field_ids(self) -> list[str]:
        return sorted(self.fields)

    def index(self, field_id: str) -> BM25Index:
        try:
            return self.fields[field_id]
        except KeyError:
            raise ValueError(f"unknown field {field_id!r}") from None

    def universe_days(
        self, origin: DateArg, regime: Regime | str, *, start: DateArg = None, end: DateArg = None
    ) -> tuple[int, int]:
        """The call's visible days ``[lo, hi)``: the universe of (origin, regime) intersected
        with ``[start, end]`` (``end`` inclusive). ``hi`` never exceeds the origin's day."""
        key = (origin, regime)
        bounds = self._universe_cache.get(key)
        if bounds is None:
            if origin is None:
                raise ValueError("origin is required")
            t = parse_date(origin)
            hi = to_days(t)
            lo = to_days(add_months(t, -self.spec.window_months)) if Regime(regime) is Regime.FIXED else DAY_MIN
            bounds = self._universe_cache[key] = (lo, hi)
        lo, hi = bounds
        if start is not None:
            lo = max(lo, to_days(parse_date(start)))
        if end is not None:
            hi = min(hi, to_days(parse_date(end)) + 1)
        return lo, hi

    def universes(self) -> Iterator[tuple[str, str, Regime]]:
        """Every (field_id, origin, regime) of the instance's spec."""
        for field_id in self.field_ids:
            for origin in self.spec.origins:
                for regime in Regime:
                    yield field_id, origin, regime

    def universe_ids(
        self, field_id: str, origin: DateArg, regime: Regime | str, *, start: DateArg = None, end: DateArg = None
    ) -> list[str]:
        """The arxiv ids a call can see, in (date, id) order."""
        index = self.index(field_id)
        lo, hi = index.slice_bounds(*self.universe_days(origin, regime, start=start, end=end))
        ids = self.ids
        return [ids[r] for r in index.rows[lo:hi].tolist()]

    # -- queries ---------------------------------------------------------------------------
    def _positions(self, field_id, origin, regime, query, start, end):
        index = self.index(field_id)
        lo, hi = self.universe_days(origin, regime, start=start, end=end)
        narrowed = start is not None or end is not None  # only whole universes keep slice norms
        return index.ranked_positions(index.term_ids(query), lo, hi, self.spec.top_k, cache_slice=not narrowed)

    def ranked(
        self,
        field_id: str,
        origin: DateArg,
        regime: Regime | str,
        query: str,
        *,
        start: DateArg = None,
        end: DateArg = None,
    ) -> RankedResult:
        """Ids, scores and total hits of one call (what the audit compares)."""
        rows, scores, total = self._positions(field_id, origin, regime, query, start, end)
        ids = self.ids
        return RankedResult([ids[r] for r in rows.tolist()], scores.tolist(), int(total))

    def search(
        self,
        field_id: str,
        origin: DateArg,
        regime: Regime | str,
        query: str,
        *,
        start: DateArg = None,
        end: DateArg = None,
    ) -> SearchObservation:
        """One Search call: at most ``spec.top_k`` papers (abstracts cut to
        ``spec.abstract_chars``) and the number of visible papers matching any query term."""
        rows, scores, total = self._positions(field_id, origin, regime, query, start, end)
        hits = tuple(
            SearchHit(
                arxiv_id=self.ids[r],
                title=self._titles[r].as_py(),
                date=self._dates[r].as_py(),
                abstract=self._abstracts[r].as_py(),
                score=float(s),
            )
            for r, s in zip(rows.tolist(), scores.tolist(), strict=True)
        )
        return SearchObservation(hits=hits, total_hits=total)

    @property
    def nbytes(self) -> int:
        """Bytes of the field indexes' arrays and the stored display text."""
        text = sum(a.nbytes for a in (self._dates, self._titles, self._abstracts))
        return sum(ix.nbytes for ix in self.fields.values()) + text


_KEYS = ["field_id", "origin", "regime"]


def universe_problems(ours: pd.DataFrame, published: pd.DataFrame) -> list[str]:
    """The one universe check: every (field, origin, regime) whose paper count or shard hash
    differs between two search manifests (``ours`` served or rebuilt, ``published`` the one the
    instance carries), or that only one of them holds; one line each."""
    cols = [*_KEYS, "n_papers", "shard_hash"]
    both = (
        ours[cols]
        .astype(str)
        .merge(published[cols].astype(str), on=_KEYS, how="outer", suffixes=("", "_m"), indicator="side")
    )
    problems = []
    for row in both.sort_values(_KEYS).itertuples(index=False):
        where = f"{row.field_id}@{row.origin}/{row.regime}"
        if row.side != "both":
            problems.append(f"{where}: {'not in the manifest' if row.side == 'left_only' else 'absent'}")
        elif row.n_papers != row.n_papers_m:
            problems.append(f"{where}: {row.n_papers} papers, manifest {row.n_papers_m}")
        elif row.shard_hash != row.shard_hash_m:
            problems.append(f"{where}: shard_hash differs")
    return problems
