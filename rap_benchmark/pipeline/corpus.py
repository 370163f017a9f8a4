"""Corpus readers: arXiv metadata in its three real formats -> one papers table (the paper's corpus snapshot).

Formats, chosen by :func:`read_corpus` from the path:

* the public arXiv metadata snapshot (JSON lines, optionally gzipped): one object per line with
  ``id``, space-separated ``categories``, ``versions`` (``[{"version": "v1", "created":
  "Mon, 2 Apr 2007 19:18:42 GMT"}, ...]``), ``title``, ``abstract``, and ``authors`` (a string)
  or ``authors_parsed`` (``[[last, first, suffix], ...]``). Read line by line: the real file has
  millions of lines and is never loaded whole.
* an arXiv API Atom feed (``.xml`` / ``.atom``): ``<entry>`` elements with ``id``
  (``http://arxiv.org/abs/2401.01234v1``), ``published``, ``title``, ``summary``,
  ``arxiv:primary_category``, ``category`` terms and ``author/name``. Parsed with expat, so every
  entry keeps the line number it starts on.
* a folder of parquet files in the layout of the shared arXiv sample (``arxiv_id``, ``date``,
  ``title``, ``abstract``, ``categories``, ``authors``), read batch by batch with pyarrow.

Every record is normalised (ids lose their version suffix, text its extra whitespace), filtered
to v1 dates in ``[spec.date_start, spec.date_end)`` and categories intersecting
``spec.categories``, and deduplicated by id keeping the earliest date. The :class:`CorpusReport`
accounts for every record read and lists each malformed one with its line (or row) and reason;
``strict=True`` raises :class:`CorpusError` at the first instead.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import email.utils
import gzip
import io
import json
import re
import xml.parsers.expat
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import accumulate
from pathlib import Path
from typing import Any

import pandas as pd

from rap_benchmark.core.dates import parse_date
from rap_benchmark.core.errors import UserError
from rap_benchmark.core.schemas import PAPERS
from rap_benchmark.core.spec import BenchmarkSpec

_NEW_ID = re.compile(r"^(\d{4}\.\d{4,5})(v\d+)?$")
_OLD_ID = re.compile(r"^([a-z][a-z\-]*(?:\.[A-Z]{2})?/\d{7})(v\d+)?$")
_ID_PREFIX = re.compile(r"^(?:https?://(?:export\.)?arxiv\.org/abs/|arxiv:)", re.IGNORECASE)

_ATOM = "http://www.w3.org/2005/Atom"
_ARXIV = "http://arxiv.org/schemas/atom"


class CorpusError(UserError, ValueError):
    """A malformed record in strict mode, or a path no reader understands (a user error: one CLI line)."""


@dataclass(frozen=True, slots=True)
class Malformed:
    """One record that could not be read: where it is and why."""

    source: str  # file name
    line: int  # 1-based line (JSON lines, Atom entry start) or row (parquet)
    reason: str


@dataclass
class CorpusReport:
    """What happened to every record read from a source, in exclusive buckets checked in this
    order: malformed, outside the categories, outside the date window, a duplicate id (an
    earlier copy, in the window or before it)."""

    source: str
    n_read: int = 0
    n_kept: int = 0
    n_filtered_date: int = 0
    n_filtered_category: int = 0
    n_duplicates: int = 0
    n_blank: int = 0  # empty lines between JSON records (not records, not counted in n_read)
    malformed: list[Malformed] = field(default_factory=list)

    @property
    def n_malformed(self) -> int:
        return len(self.malformed)

    def balanced(self) -> bool:
        """True when every record read is accounted for in exactly one bucket."""
        return self.n_read == (
            self.n_kept + self.n_filtered_date + self.n_filtered_category + self.n_duplicates + self.n_malformed
        )

    def to_dict(self, max_malformed: int | None = None) -> dict[str, Any]:
        kept = dataclasses.replace(self, malformed=self.malformed[:max_malformed])  # before converting
        return dataclasses.asdict(kept) | {"n_malformed": self.n_malformed}

    def summary(self) -> str:
        return (
            f"{self.source}: read {self.n_read:,}, kept {self.n_kept:,}, out of date range "
            f"{self.n_filtered_date:,}, outside categories {self.n_filtered_category:,}, duplicates "
            f"{self.n_duplicates:,}, malformed {self.n_malformed:,}"
        )


@dataclass(frozen=True, slots=True)
class _Record:
    arxiv_id: str
    date: dt.date
    title: str
    abstract: str
    categories: tuple[str, ...]
    authors: tuple[str, ...]


class _Bad(Exception):
    """A record-level problem; the message is the reason reported."""


# -- normalisation -----------------------------------------------------------------------------


def normalize_arxiv_id(raw: str) -> str:
    """``http://arxiv.org/abs/2401.01234v2`` -> ``2401.01234``; old-style ids keep their archive.

    Raises ValueError for anything that is not an arXiv identifier.
    """
    text = _ID_PREFIX.sub("", str(raw).strip())
    for pattern in (_NEW_ID, _OLD_ID):
        match = pattern.match(text)
        if match:
            return match.group(1)
    raise ValueError(f"not an arXiv id: {raw!r}")


def normalize_text(text: str) -> str:
    """Collapse every run of whitespace (newlines in titles and abstracts) to one space."""
    text = str(text)
    # printable text has no whitespace but the ASCII space: without a double or an edge space it
    # is already normal (most records are; checking is far cheaper than splitting and joining)
    if text.isprintable() and "  " not in text and text[:1] != " " and text[-1:] != " ":
        return text
    return " ".join(text.split())


def parse_snapshot_date(created: str) -> dt.date:
    """``"Mon, 2 Apr 2007 19:18:42 GMT"`` -> 2007-04-02 (UTC), independent of the locale."""
    parsed = email.utils.parsedate_tz(created)
    if parsed is None:
        raise ValueError(f"unparseable version date {created!r}")
    stamp = email.utils.mktime_tz(parsed)
    return dt.datetime.fromtimestamp(stamp, tz=dt.UTC).date()


def _nonempty(value: Any, key: str) -> str:
    text = normalize_text(value)
    if not text:
        raise _Bad(f"{key} is empty")
    return text


def _text_field(obj: dict[str, Any], key: str) -> str:
    value = obj.get(key)
    if not isinstance(value, str):
        raise _Bad(f"{key} missing or not a string")
    return _nonempty(value, key)


def _checked_id(raw: Any) -> str:
    if not isinstance(raw, str):
        raise _Bad("id missing or not a string")
    try:
        return normalize_arxiv_id(raw)
    except ValueError as exc:
        raise _Bad(str(exc)) from None


# -- the shared filter / dedupe logic -------------------------------------------------------------


class _Collector:
    """Applies the category filter, the date window and id deduplication, counting everything.
    Memory stays bounded by the kept papers: of a record dated before the window only the id is
    remembered (an in-window copy of it is dropped at the end), a later one is only counted."""

    def __init__(self, spec: BenchmarkSpec, source: str, strict: bool) -> None:
        self.start = parse_date(spec.date_start)
        self.end = parse_date(spec.date_end)
        self.categories = frozenset(spec.categories)
        self.strict = strict
        self.report = CorpusReport(source=source)
        self.kept: dict[str, _Record] = {}
        self.early_ids: set[str] = set()

    def bad(self, source: str, line: int, reason: str) -> None:
        self.report.n_read += 1
        self.report.malformed.append(Malformed(source, line, reason))
        if self.strict:
            raise CorpusError(f"{source} line {line}: {reason}")

    def add(self, record: _Record) -> None:
        report = self.report
        report.n_read += 1
        if self.categories.isdisjoint(record.categories):
            report.n_filtered_category += 1
            return
        if record.date >= self.end:
            report.n_filtered_date += 1
            return
        if record.date < self.start:
            report.n_filtered_date += 1
            self.early_ids.add(record.arxiv_id)
            return
        previous = self.kept.get(record.arxiv_id)
        if previous is None:
            self.kept[record.arxiv_id] = record
            return
        report.n_duplicates += 1
        if record.date < previous.date:
            self.kept[record.arxiv_id] = record

    def finish(self) -> tuple[pd.DataFrame, CorpusReport]:
        for arxiv_id in self.early_ids.intersection(self.kept):
            del self.kept[arxiv_id]
            self.report.n_duplicates += 1
        records = sorted(self.kept.values(), key=lambda r: (r.date, r.arxiv_id))
        self.report.n_kept = len(records)
        frame = pd.DataFrame(
            {
                "arxiv_id": pd.Series([r.arxiv_id for r in records], dtype=object),
                "date": pd.Series([r.date.isoformat() for r in records], dtype=object),
                "title": pd.Series([r.title for r in records], dtype=object),
                "abstract": pd.Series([r.abstract for r in records], dtype=object),
                "categories": pd.Series([list(r.categories) for r in records], dtype=object),
                "authors": pd.Series([list(r.authors) for r in records], dtype=object),
            }
        )
        assert self.report.balanced(), self.report.to_dict()
        return frame, self.report


# -- format 1: the arXiv metadata snapshot (JSON lines) -------------------------------------------


def _snapshot_authors(obj: dict[str, Any]) -> tuple[str, ...]:
    parsed = obj.get("authors_parsed")
    if isinstance(parsed, list) and parsed:
        names = []
        for parts in parsed:
            if not isinstance(parts, list) or not parts:
                raise _Bad("authors_parsed entry is not a non-empty list")
            last, first, suffix = (list(parts) + ["", "", ""])[:3]
            names.append(normalize_text(f"{first} {last} {suffix}"))
        return tuple(n for n in names if n)
    raw = obj.get("authors")
    if raw is None:
        return ()
    if not isinstance(raw, str):
        raise _Bad("authors is not a string")
    pieces = re.split(r",\s*|\s+and\s+", normalize_text(raw))
    return tuple(p for p in (normalize_text(x) for x in pieces) if p)


def _snapshot_v1_date(versions: Any) -> dt.date:
    if not isinstance(versions, list) or not versions:
        raise _Bad("versions missing or empty")
    dates: dict[str, dt.date] = {}
    for entry in versions:
        if not isinstance(entry, dict) or not isinstance(entry.get("created"), str):
            raise _Bad("versions entry without a created date")
        try:
            dates[str(entry.get("version"))] = parse_snapshot_date(entry["created"])
        except ValueError as exc:
            raise _Bad(str(exc)) from None
    return dates["v1"] if "v1" in dates else min(dates.values())


def parse_snapshot_line(line: str) -> _Record:
    """One snapshot JSON line -> a record; raises ``_Bad`` with the reason when malformed."""
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as exc:
        raise _Bad(f"invalid JSON: {exc.msg} (column {exc.colno})") from None
    if not isinstance(obj, dict):
        raise _Bad("line is not a JSON object")
    arxiv_id = _checked_id(obj.get("id"))
    categories = obj.get("categories")
    if not isinstance(categories, str) or not categories.split():
        raise _Bad("categories missing or empty")
    return _Record(
        arxiv_id=arxiv_id,
        date=_snapshot_v1_date(obj.get("versions")),
        title=_text_field(obj, "title"),
        abstract=_text_field(obj, "abstract"),
        categories=tuple(categories.split()),
        authors=_snapshot_authors(obj),
    )


def _open_text(path: Path) -> io.TextIOBase:
    if path.name.endswith(".gz"):
        return gzip.open(path, "rt", encoding="utf-8")  # type: ignore[return-value]
    return path.open("r", encoding="utf-8")


def _read_snapshot(path: Path, collector: _Collector, progress: bool) -> None:
    from tqdm import tqdm

    with _open_text(path) as fh:
        lines = tqdm(fh, desc=f"reading {path.name}", unit=" lines", disable=not progress)
        for lineno, line in enumerate(lines, 1):
            if not line.strip():
                collector.report.n_blank += 1
                continue
            try:
                record = parse_snapshot_line(line)
            except _Bad as exc:
                collector.bad(path.name, lineno, str(exc))
                continue
            collector.add(record)


# -- format 2: the arXiv API Atom feed --------------------------------------------------------------


@dataclass
class _AtomEntry:
    line: int
    texts: dict[str, list[str]] = field(default_factory=dict)
    categories: list[str] = field(default_factory=list)
    primary: str | None = None
    authors: list[str] = field(default_factory=list)


def _iter_atom_entries(path: Path) -> Iterator[_AtomEntry]:
    """Stream ``<entry>`` elements with the line each starts on (expat, namespace-aware)."""
    done: list[_AtomEntry] = []
    stack: list[str] = []
    state: dict[str, Any] = {"entry": None, "buf": []}
    parser = xml.parsers.expat.ParserCreate(namespace_separator="|")

    def start(name: str, attrs: dict[str, str]) -> None:
        stack.append(name)
        entry: _AtomEntry | None = state["entry"]
        if name == f"{_ATOM}|entry":
            state["entry"] = _AtomEntry(line=parser.CurrentLineNumber)
        elif entry is not None:
            if name == f"{_ATOM}|category" and "term" in attrs:
                entry.categories.append(attrs["term"])
            elif name == f"{_ARXIV}|primary_category" and "term" in attrs:
                entry.primary = attrs["term"]
        state["buf"] = []

    def end(name: str) -> None:
        stack.pop()
        entry: _AtomEntry | None = state["entry"]
        text = "".join(state["buf"])
        state["buf"] = []
        if entry is None:
            return
        if name == f"{_ATOM}|entry":
            done.append(entry)
            state["entry"] = None
        elif name == f"{_ATOM}|name" and stack and stack[-1] == f"{_ATOM}|author":
            entry.authors.append(normalize_text(text))
        elif stack and stack[-1] == f"{_ATOM}|entry":
            entry.texts.setdefault(name.rpartition("|")[2], []).append(text)

    def chars(data: str) -> None:
        state["buf"].append(data)

    parser.StartElementHandler = start
    parser.EndElementHandler = end
    parser.CharacterDataHandler = chars
    with path.open("rb") as fh:
        while True:
            chunk = fh.read(1 << 16)
            try:
                parser.Parse(chunk, not chunk)
            except xml.parsers.expat.ExpatError as exc:
                raise CorpusError(f"{path.name} line {exc.lineno}: XML is not well-formed ({exc})") from None
            yield from done
            done.clear()
            if not chunk:
                return


def _atom_record(entry: _AtomEntry) -> _Record:
    def one(key: str) -> str:
        values = entry.texts.get(key)
        if not values:
            raise _Bad(f"<{key}> missing")
        return values[0]

    raw_id = normalize_text(one("id"))
    if "/api/errors" in raw_id:
        detail = normalize_text((entry.texts.get("summary") or ["no detail"])[0])
        raise _Bad(f"arXiv API error entry: {detail}")
    arxiv_id = _checked_id(raw_id)
    try:
        published = dt.datetime.fromisoformat(normalize_text(one("published")).replace("Z", "+00:00"))
    except ValueError:
        raise _Bad(f"unparseable <published> {one('published')!r}") from None
    day = published.astimezone(dt.UTC).date() if published.tzinfo else published.date()
    categories = list(dict.fromkeys(([entry.primary] if entry.primary else []) + entry.categories))
    if not categories:
        raise _Bad("no category terms")
    title, abstract = one("title"), one("summary")
    return _Record(
        arxiv_id,
        day,
        _nonempty(title, "title"),
        _nonempty(abstract, "summary"),
        tuple(categories),
        tuple(a for a in entry.authors if a),
    )


def _read_atom(path: Path, collector: _Collector, progress: bool) -> None:
    from tqdm import tqdm

    for entry in tqdm(_iter_atom_entries(path), desc=f"reading {path.name}", unit=" entries", disable=not progress):
        try:
            record = _atom_record(entry)
        except _Bad as exc:
            collector.bad(path.name, entry.line, str(exc))
            continue
        collector.add(record)


# -- format 3: the parquet sample folder ----------------------------------------------------------


def _as_str_list(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    return tuple(str(v) for v in value if v is not None and str(v).strip())


def _str_lists(column: Any) -> list[tuple[str, ...]]:
    """An arrow column of lists as :func:`_as_str_list` reads each row's value.

    A column of string lists is read flat (one Python list of its strings, cut into rows by
    length) instead of as a Python list per row: the same tuples at a fraction of the cost."""
    import pyarrow as pa
    import pyarrow.compute as pc

    kind = column.type
    if not (pa.types.is_list(kind) or pa.types.is_large_list(kind)) or not (
        pa.types.is_string(kind.value_type) or pa.types.is_large_string(kind.value_type)
    ):
        return [_as_str_list(v) for v in column.to_pylist()]
    flat = pc.list_flatten(column).to_pylist()
    lengths = pc.list_value_length(column).fill_null(0).to_pylist()
    return [_as_str_list(flat[end - n : end]) for n, end in zip(lengths, accumulate(lengths), strict=True)]


def _read_parquet_dir(path: Path, collector: _Collector, progress: bool) -> None:
    import pyarrow.parquet as pq
    from tqdm import tqdm

    files = sorted(path.glob("*.parquet")) if path.is_dir() else [path]
    if not files:
        raise CorpusError(f"no *.parquet files in {path}")
    wanted = list(PAPERS.names)
    total = sum(pq.ParquetFile(f).metadata.num_rows for f in files)
    bar = tqdm(total=total, desc=f"reading {path.name}", unit=" rows", disable=not progress)
    for file in files:
        pf = pq.ParquetFile(file)
        names = set(pf.schema_arrow.names)
        missing = [c for c in ("arxiv_id", "date", "title", "abstract", "categories") if c not in names]
        if missing:
            raise CorpusError(f"{file.name}: missing columns {missing}")
        columns = [c for c in wanted if c in names]
        row = 0
        for batch in pf.iter_batches(batch_size=65536, columns=columns):
            n = batch.num_rows
            plain = (batch.column(c).to_pylist() for c in ("arxiv_id", "date", "title", "abstract"))
            cats = _str_lists(batch.column("categories"))
            authors = _str_lists(batch.column("authors")) if "authors" in names else [()] * n
            for raw_id, raw_date, raw_title, raw_abstract, categories, paper_authors in zip(
                *plain, cats, authors, strict=True
            ):
                row += 1
                try:
                    arxiv_id = _checked_id(raw_id)
                    if raw_date is None:
                        raise _Bad("date is null")
                    try:
                        day = parse_date(raw_date)
                    except ValueError as exc:
                        raise _Bad(str(exc)) from None
                    title, abstract = _nonempty(raw_title or "", "title"), _nonempty(raw_abstract or "", "abstract")
                    if not categories:
                        raise _Bad("categories missing or empty")
                except _Bad as exc:
                    collector.bad(file.name, row, str(exc))
                    continue
                collector.add(_Record(arxiv_id, day, title, abstract, categories, paper_authors))
            bar.update(n)
    bar.close()


# -- dispatch ---------------------------------------------------------------------------------------


def corpus_format(path: str | Path) -> str:
    """``parquet``, ``snapshot`` or ``atom``, decided from the path; CorpusError otherwise."""
    p = Path(path)
    name = p.name.lower()
    if p.is_dir() or name.endswith(".parquet"):
        return "parquet"
    if name.endswith((".jsonl", ".json", ".jsonl.gz", ".json.gz")):
        return "snapshot"
    if name.endswith((".xml", ".atom")):
        return "atom"
    raise CorpusError(f"cannot tell the format of {path}: expected a parquet folder, .jsonl/.json(.gz) or .xml/.atom")


def read_corpus(
    path: str | Path, spec: BenchmarkSpec, *, strict: bool = False, progress: bool = False
) -> tuple[pd.DataFrame, CorpusReport]:
    """Read, normalise, filter and deduplicate a corpus source.

    Returns the papers table (columns of :data:`rap_benchmark.core.schemas.PAPERS`: ``date`` as ``YYYY-MM-DD``, lists for
    ``categories`` and ``authors``; sorted by (date, arxiv_id)) and the report. ``strict=True``
    raises CorpusError at the first malformed record.
    """
    p = Path(path)
    if not p.exists():
        raise CorpusError(f"no corpus at {p}")
    kind = corpus_format(p)
    collector = _Collector(spec, p.name, strict)
    reader = {"parquet": _read_parquet_dir, "snapshot": _read_snapshot, "atom": _read_atom}[kind]
    reader(p, collector, progress)
    return collector.finish()
