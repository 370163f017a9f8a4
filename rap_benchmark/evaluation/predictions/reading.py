"""Reading a prediction file without ever raising on its content.

JSON lines are parsed one at a time as strict JSON (RFC 8259: duplicate keys and NaN/Infinity are
named); parquet is read batch by batch. Every row is checked on its own and the usable ones are
kept in Arrow batches, so memory grows with the number of rows, never with the size of a bad
value, and problems stay bounded (:class:`~.problems.Tally`).
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from rap_benchmark.core.errors import json_reason
from rap_benchmark.core.records import DIRECTION_KEYS, Condition
from rap_benchmark.core.schemas import PREDICTIONS
from rap_benchmark.evaluation.predictions.missing import not_a_prediction_file
from rap_benchmark.evaluation.predictions.problems import (
    ALL_COLUMNS,
    DEFAULT_MAX_BYTES,
    LINE,
    MAX_LISTED,
    META_COLUMNS,
    META_FLOAT_COLUMNS,
    META_INT_COLUMNS,
    META_STR_COLUMNS,
    REQUIRED_COLUMNS,
    PredictionFileError,
    Problem,
    ProblemKind,
    Severity,
    Tally,
    empty_frame,
    short,
)
from rap_benchmark.evaluation.scoring import MAX_WEIGHT, DuplicateKey, no_duplicate_keys, weight_fault

MAX_LINE_BYTES = 64 * 1024
"""A JSONL line longer than this is skipped unread (a prediction row is a few hundred bytes)."""
MAX_DEPTH = 32
"""JSON nested deeper than this is refused before parsing (a prediction row has depth 1)."""
MAX_KEY_CHARS = 256
"""The longest model, field_id, manifest_hash or response_model accepted."""
MAX_REASON_CHARS = 2000
"""An invalid_reason is cut to this many characters."""
BATCH_ROWS = 8192
"""Checked rows are moved into an Arrow batch this often (Python objects never pile up)."""

_CONDITIONS = frozenset(c.value for c in Condition)
_ALLOWED = frozenset(ALL_COLUMNS)
_DATE_RE = re.compile(r"\d{4}-\d{2}-\d{2}")
_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_KEPT = pa.schema([*PREDICTIONS, pa.field(LINE, pa.int64())])
_INT64 = {pa.int64(): pd.Int64Dtype()}


# -- strict JSON -------------------------------------------------------------------------------


class _NonStandard(ValueError):
    def __init__(self, token: str) -> None:
        self.token = token


def _no_constants(token: str) -> Any:
    raise _NonStandard(token)


def _nesting_depth(text: str) -> int:
    """The deepest [ / { nesting of a JSON text (strings skipped); cheap unless brackets abound."""
    if text.count("[") + text.count("{") <= MAX_DEPTH:
        return 0
    bare = np.frombuffer(_JSON_STRING.sub("", text).encode("utf-8", "replace"), dtype=np.uint8)
    step = np.isin(bare, (ord("["), ord("{"))).astype(np.int64) - np.isin(bare, (ord("]"), ord("}")))
    return int(np.cumsum(step).max(initial=0))


# -- small value checks ------------------------------------------------------------------------


def _has_surrogate(value: str) -> bool:
    if value.isascii():
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _is_integral(v: Any) -> bool:
    if isinstance(v, bool | np.bool_):
        return False
    if isinstance(v, int | np.integer):
        return True
    return isinstance(v, float | np.floating) and math.isfinite(v) and float(v).is_integer()


def _is_iso_date(value: Any) -> bool:
    if not isinstance(value, str) or len(value) != 10 or not _DATE_RE.fullmatch(value):
        return False
    try:
        return dt.date.fromisoformat(value).isoformat() == value
    except ValueError:
        return False


def _meta_ok(col: str, v: Any) -> bool:
    if col in META_INT_COLUMNS:
        return _is_integral(v) and abs(v) < 2**53
    if col in META_FLOAT_COLUMNS:  # False for NaN, infinities and 10**400 alike
        return (
            isinstance(v, int | float | np.integer | np.floating)
            and not isinstance(v, bool | np.bool_)
            and (abs(v) <= MAX_WEIGHT * 1e3)
        )
    return isinstance(v, str) and len(v) <= MAX_KEY_CHARS and not _has_surrogate(v)


# -- rows --------------------------------------------------------------------------------------


class Rows:
    """Checks rows one by one (JSON objects, parquet records or frame rows) and keeps the usable
    ones, cleaned, in Arrow batches."""

    def __init__(self, *, nan_is_null: bool = False) -> None:
        self.nan_is_null = nan_is_null  # frames: pandas writes NaN for null
        self.tally = Tally()
        self.n_rows = 0
        self.unknown: dict[str, int] = {}  # unknown key -> first line
        self.absent = dict.fromkeys(REQUIRED_COLUMNS, 0)
        self.present_meta: set[str] = set()
        self._pending: list[dict[str, Any]] = []
        self._batches: list[pa.RecordBatch] = []

    def _text(self, rec: dict[str, Any], col: str, line: int) -> str | None:
        """The value of a non-empty string key column, or None (reported)."""
        v = rec.get(col)
        if not isinstance(v, str) or not v.strip():
            self.tally.add(ProblemKind.BAD_TYPE, f"have a missing, empty or non-string {col!r} (dropped)", line)
        elif len(v) > MAX_KEY_CHARS:
            self.tally.add(
                ProblemKind.BAD_TYPE, f"have a {col!r} longer than {MAX_KEY_CHARS} characters (dropped)", line
            )
        elif _has_surrogate(v):
            self.tally.add(ProblemKind.ENCODING, f"have a {col!r} with a lone UTF-16 surrogate (dropped)", line)
        else:
            return v
        return None

    def _null(self, v: Any) -> bool:
        return v is None or (self.nan_is_null and isinstance(v, float | np.floating) and math.isnan(v))

    def add(self, rec: dict[str, Any], line: int) -> None:
        self.n_rows += 1
        tally = self.tally
        for k in rec:
            if k not in _ALLOWED and k not in self.unknown and len(self.unknown) < MAX_LISTED:
                self.unknown[k] = line
        for col in REQUIRED_COLUMNS:
            if col not in rec:
                self.absent[col] += 1
                if col != "invalid_reason":
                    tally.add(ProblemKind.MISSING_COLUMN, f"lack the key {col!r}", line)
        keys = {col: self._text(rec, col, line) for col in ("model", "field_id", "manifest_hash")}
        keep = None not in keys.values()
        cond = rec.get("condition")
        if not isinstance(cond, str):
            tally.add(ProblemKind.BAD_TYPE, "have a non-string 'condition' (dropped)", line)
            keep = False
        elif cond not in _CONDITIONS:
            what = "have an unknown condition (expected A0..A4; dropped)"
            tally.add(ProblemKind.UNKNOWN_CONDITION, what, line, example=short(cond))
            keep = False
        origin = rec.get("origin")
        if hasattr(origin, "isoformat") and not isinstance(origin, str):  # parquet date32 columns are accepted
            origin = origin.isoformat()[:10]
        if not _is_iso_date(origin):
            tally.add(ProblemKind.BAD_ORIGIN, "have an origin that is not a YYYY-MM-DD date string (dropped)", line)
            keep = False
        valid = rec.get("valid")
        if not isinstance(valid, bool | np.bool_):
            tally.add(ProblemKind.BAD_TYPE, "have a 'valid' that is not true/false (dropped)", line)
            keep = False
        reason = rec.get("invalid_reason")
        if reason is not None and not (isinstance(reason, str) and not _has_surrogate(reason)):
            if not self._null(reason):
                what = "have an 'invalid_reason' that is neither a string nor null (set to null)"
                tally.add(ProblemKind.BAD_TYPE, what, line)
            reason = None
        elif isinstance(reason, str) and len(reason) > MAX_REASON_CHARS:
            reason = reason[:MAX_REASON_CHARS] + "..."
        # weights: the one rule (scoring.weight_fault); null or absent weights make a unit incomplete
        w = [rec.get(col) for col in DIRECTION_KEYS]
        fault = None if any(map(self._null, w)) else weight_fault(w)
        if fault is not None and fault[0].startswith("have a non-numeric"):
            tally.add(ProblemKind.BAD_TYPE, f"{fault[0]} (the unit is made invalid)", line)
        is_valid = bool(valid) and keep
        if is_valid:
            if fault is None and any(map(self._null, w)):
                fault = ("give fewer than eight weights (null or absent D0..D7)", "")
            if fault is not None:
                if not fault[0].startswith("have a non-numeric"):  # reported as a type error above
                    tally.add(ProblemKind.BAD_WEIGHTS, f"claim valid but {fault[0]}; kept as invalid units", line)
                is_valid, reason = False, f"validator: {fault[0].removeprefix('have ')}"
        elif keep and valid is False and not (isinstance(reason, str) and reason.strip()):
            what = "say valid: false but give no invalid_reason (an invalid unit must say why)"
            tally.add(ProblemKind.NO_REASON, what, line)
            reason = "validator: no invalid_reason given"
        row: dict[str, Any] = {}
        for col in META_COLUMNS:
            if col not in rec:
                continue
            self.present_meta.add(col)
            v = rec[col]
            if v is None or (isinstance(v, float) and math.isnan(v) and col not in META_STR_COLUMNS):
                continue
            if not _meta_ok(col, v):
                what = f"have a {col!r} of the wrong type or size (set to null)"
                tally.add(ProblemKind.BAD_TYPE, what, line, Severity.WARNING)
                continue
            row[col] = v if col in META_STR_COLUMNS else int(v) if col in META_INT_COLUMNS else float(v)
        if not keep:
            return
        row.update(keys, condition=cond, origin=origin, valid=is_valid, invalid_reason=None if is_valid else reason)
        row.update({col: float(v) if is_valid else None for col, v in zip(DIRECTION_KEYS, w, strict=True)})
        row[LINE] = line
        self._pending.append(row)
        if len(self._pending) == BATCH_ROWS:
            self._flush()

    def _flush(self) -> None:
        if self._pending:
            self._batches.append(pa.RecordBatch.from_pylist(self._pending, schema=_KEPT))
            self._pending = []

    def finish(self, problems: list[Problem]) -> pd.DataFrame:
        """The canonical frame of the kept rows, after adding file-level and row problems."""
        for col, line in self.unknown.items():
            problems.append(_unknown_column(col, line))
        missing = [c for c, n in self.absent.items() if self.n_rows and n == self.n_rows]
        if missing:
            problems.append(
                Problem(ProblemKind.MISSING_COLUMN, Severity.FATAL, f"missing column(s): {', '.join(missing)}")
            )
        problems += [
            p
            for p in self.tally.problems()
            if not (p.kind is ProblemKind.MISSING_COLUMN and any(f"{c!r}" in p.message for c in missing))
        ]
        if self.unknown or missing:
            return empty_frame()
        self._flush()
        table = pa.Table.from_batches(self._batches, schema=_KEPT)
        self._batches = []
        table = table.drop_columns([c for c in META_COLUMNS if c not in self.present_meta])
        # the canonical frame straight from Arrow: strings become one shared Python object per
        # distinct value, and each Arrow buffer is released as soon as its column is converted,
        # so a 500 MB file stays below 1 GiB (benchmarks/validate_bench.py)
        frame = table.to_pandas(self_destruct=True, split_blocks=True, types_mapper=_INT64.get)
        for col in frame.columns:  # Arrow-backed numbers are read-only: the caller gets its own, column by column
            if isinstance(frame[col].dtype, np.dtype):
                frame[col] = frame[col].to_numpy(np.int64 if col == LINE else None, copy=True)
        return frame


def _unknown_column(col: str, line: int) -> Problem:
    low = {c.lower(): c for c in ALL_COLUMNS}
    hint = ""
    if str(col).lower() in low:
        hint = f" (did you mean {low[str(col).lower()]!r}?)"
    elif str(col).lower() in ("weights", "prediction", "distribution"):
        hint = " (give the eight weights as columns D0..D7)"
    elif str(col).upper().startswith("D") and str(col)[1:].isdigit():
        hint = " (RAP has exactly eight directions, D0..D7)"
    return Problem(
        ProblemKind.UNKNOWN_COLUMN,
        Severity.FATAL,
        f"unknown column {short(col)}{hint} (first on line {line}); allowed: {', '.join(ALL_COLUMNS)}",
        lines=(line,),
    )


# -- files -------------------------------------------------------------------------------------


def _read_line(fh: Any) -> tuple[bytes, int, bool]:
    """The next line (at most MAX_LINE_BYTES kept), its full length, and whether it ends with a
    newline (only a file's last line can lack one); an over-long line's rest is skipped unread."""
    raw = fh.readline(MAX_LINE_BYTES + 1)
    size, complete = len(raw), raw.endswith(b"\n")
    if size > MAX_LINE_BYTES and not complete:
        while True:
            chunk = fh.readline(1 << 20)
            size += len(chunk)
            complete = chunk.endswith(b"\n")
            if not chunk or complete:
                break
    return raw, size, complete


REWRITE = "write it again with the command that wrote it: rap run rewrites RUN/predictions.jsonl from the units it kept"
"""The next step for a file cut short: nothing in it says what the lost text was."""


class _Truncated(Exception):
    """A bad last line without its closing newline: the file was cut, so none of it is scored."""

    def __init__(self, lineno: int, why: str) -> None:
        what = (
            f"line {lineno} is cut off (no closing newline, {why}); the file looks truncated, so none of it is "
            f"scored: {REWRITE}"
        )
        self.problem = Problem(ProblemKind.TRUNCATED, Severity.FATAL, what, lines=(lineno,))


def _unless_cut(complete: bool, lineno: int, why: str) -> None:
    """Raise :class:`_Truncated` when the bad line is the file's unfinished last one."""
    if not complete:
        raise _Truncated(lineno, why)


def _lenient_error(text: str) -> str | None:
    """Why ``text`` is not JSON even to Python's lenient reader (NaN and repeated keys allowed)."""
    try:
        json.loads(text)
    except RecursionError:
        return None
    except ValueError as exc:
        return _json_error(exc, text)
    return None


def _json_error(exc: ValueError, text: str) -> str:
    """Why a line is not JSON, at the column of the line it stopped at (a line's own newline does
    not count: Python's decoder placed an error there on a second line, "at column 1")."""
    if isinstance(exc, json.JSONDecodeError):
        line_end = len(text.rstrip("\r\n"))
        return f"{json_reason(exc)} at column {min(exc.pos, line_end) + 1}"
    return short(str(exc), 120)


def _cut_short(text: str, exc: ValueError) -> bool:
    """Whether the JSON of the line stops only where the line does (an unclosed string, object or
    value at its end): the mark of a write cut short, not of a badly formed row."""
    return isinstance(exc, json.JSONDecodeError) and exc.pos >= len(text.rstrip())


CUT_SHORT = f"are cut short, as a torn or interrupted write leaves a line (skipped; {REWRITE})"


_JSON_ARRAY = Problem(
    ProblemKind.JSON_ARRAY,
    Severity.FATAL,
    "the file is one JSON array, not JSON Lines: write one JSON object per line (no enclosing [ ])",
    lines=(1,),
)


def _read_jsonl(path: Path, rows: Rows, problems: list[Problem]) -> bool:
    """Stream a JSON-lines file into ``rows``; False when the file as a whole cannot be read."""
    tally = rows.tally
    first_content = True
    with path.open("rb") as fh:
        if fh.read(4).startswith((b"\xff\xfe", b"\xfe\xff")):
            what = "file is UTF-16 (byte-order mark found); save it as UTF-8"
            problems.append(Problem(ProblemKind.ENCODING, Severity.FATAL, what))
            return False
        fh.seek(0)
        lineno = 0
        while True:
            raw, size, complete = _read_line(fh)
            if not raw:
                break
            lineno += 1
            if lineno == 1 and raw.startswith(b"\xef\xbb\xbf"):
                what = "UTF-8 byte-order mark at the start (ignored)"
                problems.append(Problem(ProblemKind.ENCODING, Severity.WARNING, what))
                raw = raw[3:]
            if size > MAX_LINE_BYTES:
                _unless_cut(complete, lineno, f"{size:,} bytes")
                what = f"are longer than {MAX_LINE_BYTES:,} bytes, far beyond any prediction row (skipped unread)"
                tally.add(ProblemKind.LINE_TOO_LONG, what, lineno, example=f"line {lineno}: {size:,} bytes")
                first_content = False
                continue
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                _unless_cut(complete, lineno, "a character cut in half")
                what, example = "are not valid UTF-8; save the file as UTF-8 (skipped)", f"byte {raw[exc.start]:#04x}"
                tally.add(ProblemKind.ENCODING, what, lineno, example=f"{example} at column {exc.start + 1}")
                first_content = False
                continue
            if not text.strip():
                continue
            depth = _nesting_depth(text)
            if depth > MAX_DEPTH:
                _unless_cut(complete, lineno, f"{depth} open brackets")
                what = f"nest JSON more than {MAX_DEPTH} levels deep; a prediction row is a flat object (dropped)"
                tally.add(ProblemKind.TOO_DEEP, what, lineno, example=f"line {lineno}: {depth} levels")
                first_content = False
                continue
            try:
                obj = json.loads(text, object_pairs_hook=no_duplicate_keys, parse_constant=_no_constants)
            except (DuplicateKey, _NonStandard) as exc:
                # the strict hooks stop the parse early: a cut last line ("D4": NaN<EOF>) is truncation
                if not complete and (cut := _lenient_error(text)) is not None:
                    raise _Truncated(lineno, cut) from None
                if isinstance(exc, DuplicateKey):
                    what = "repeat a key inside the row, which is ambiguous (dropped)"
                    tally.add(ProblemKind.DUPLICATE_KEY, what, lineno, example=short(exc.key))
                else:
                    what = f"contain {exc.token}, which is not JSON (write null and valid: false for an unusable unit; dropped)"
                    tally.add(ProblemKind.NON_STANDARD_JSON, what, lineno)
            except RecursionError:
                tally.add(ProblemKind.TOO_DEEP, "are nested too deeply to be a prediction row (dropped)", lineno)
            except ValueError as exc:  # JSONDecodeError, or an integer literal over Python's digit limit
                if first_content and text.lstrip().startswith("["):
                    problems.append(_JSON_ARRAY)
                    return False
                why = _json_error(exc, text)
                _unless_cut(complete, lineno, why)
                what = CUT_SHORT if _cut_short(text, exc) else "are not valid JSON (skipped)"
                tally.add(ProblemKind.BAD_JSON, what, lineno, example=f"line {lineno}: {why}")
            else:
                if first_content and isinstance(obj, list) and obj and all(isinstance(o, dict) for o in obj):
                    problems.append(_JSON_ARRAY)
                    return False
                if isinstance(obj, dict):
                    rows.add(obj, lineno)
                else:
                    tally.add(ProblemKind.NOT_AN_OBJECT, "are JSON but not objects (skipped)", lineno)
            first_content = False
    return True


def _read_parquet(path: Path, rows: Rows, problems: list[Problem]) -> bool:
    import pyarrow.parquet as pq

    try:
        line = 0
        for batch in pq.ParquetFile(path).iter_batches(batch_size=BATCH_ROWS):
            for rec in batch.to_pylist():
                line += 1
                rows.add(rec, line)
    except (pa.ArrowException, OSError, ValueError) as exc:
        what = f"not a readable parquet file (truncated?): {short(str(exc), 200)}"
        problems.append(Problem(ProblemKind.UNREADABLE, Severity.FATAL, what))
        return False
    if rows.n_rows == 0:
        problems.append(Problem(ProblemKind.EMPTY_FILE, Severity.FATAL, "the parquet file has no rows"))
        return False
    return True


_UNPARSED = (
    ProblemKind.BAD_JSON,
    ProblemKind.NOT_AN_OBJECT,
    ProblemKind.DUPLICATE_KEY,
    ProblemKind.NON_STANDARD_JSON,
    ProblemKind.TOO_DEEP,
    ProblemKind.LINE_TOO_LONG,
)


def _file_problems(path: Path, max_bytes: int, *, missing: Callable[[Path], str]) -> list[Problem]:
    """What makes a file unreadable as a whole: absent (said as ``missing(path)``), over
    ``max_bytes``, or empty."""
    size = path.stat().st_size if path.is_file() else -1
    if size < 0:
        return [Problem(ProblemKind.FILE_MISSING, Severity.FATAL, missing(path))]
    if size > max_bytes:
        what = f"file is {size:,} bytes, over the {max_bytes:,}-byte limit (split it or raise max_bytes)"
        return [Problem(ProblemKind.FILE_TOO_LARGE, Severity.FATAL, what)]
    if size == 0:
        return [Problem(ProblemKind.EMPTY_FILE, Severity.FATAL, "file is empty (0 bytes)")]
    return []


def read_json_lines(path: str | Path, sink: Any, *, max_bytes: int = DEFAULT_MAX_BYTES) -> list[Problem]:
    """Stream another JSON-lines file through this strict reader (a CiteCast submission): each
    object goes to ``sink.add(obj, line)``, each unreadable line into ``sink.tally`` (a
    :class:`Tally`); returns the file's own problems (a fatal one: nothing in it can be used).
    Limits, encodings, truncation and strict JSON are those of prediction files."""
    path = Path(path)
    problems = _file_problems(path, max_bytes, missing=lambda p: f"no file at {p}")
    if problems:
        return problems
    try:
        _read_jsonl(path, sink, problems)
    except _Truncated as cut:
        problems.append(cut.problem)
    return problems


def load_predictions(path: str | Path, *, max_bytes: int = DEFAULT_MAX_BYTES) -> tuple[pd.DataFrame, list[Problem]]:
    """Read a JSONL or parquet prediction file without ever raising on its content.

    Returns the usable rows (canonical columns, plus ``_line``: the source line or row number) and
    every problem found, at most one message per kind of problem (see the module docstring).
    Checks against an instance are in :func:`~.validating.validate_predictions`.
    """
    path = Path(path)
    problems = _file_problems(path, max_bytes, missing=not_a_prediction_file)
    if not problems:
        with path.open("rb") as fh:
            parquet = path.suffix.lower() == ".parquet" or fh.read(4) == b"PAR1"
        if not parquet and path.suffix.lower() not in (".jsonl", ".json", ".ndjson", ""):
            what = f"unknown extension {short(path.suffix.lower())}: use .jsonl or .parquet"
            problems.append(Problem(ProblemKind.UNKNOWN_FORMAT, Severity.FATAL, what))
    if problems:
        return empty_frame(), problems
    rows = Rows()
    if parquet:
        ok = _read_parquet(path, rows, problems)
    else:
        try:
            ok = _read_jsonl(path, rows, problems)
        except _Truncated as cut:
            problems.append(cut.problem)
            ok = False
        if ok and rows.n_rows == 0 and not rows.tally.problems():
            problems.append(Problem(ProblemKind.EMPTY_FILE, Severity.FATAL, "file holds only whitespace"))
            return empty_frame(), problems
    n_read = rows.n_rows + sum(rows.tally.count(k) for k in _UNPARSED)
    if not ok:
        problems += rows.tally.problems()
        frame = empty_frame()
    else:
        frame = rows.finish(problems)
        if rows.n_rows == 0:
            problems.append(Problem(ProblemKind.EMPTY_FILE, Severity.FATAL, "no prediction rows could be read"))
    frame.attrs["n_rows_read"] = n_read
    return frame, problems


def read_predictions(path: str | Path, *, max_bytes: int = DEFAULT_MAX_BYTES) -> pd.DataFrame:
    """Read a prediction file; raise :class:`PredictionFileError` listing every non-warning problem.

    The returned frame has the canonical columns (no ``_line``). Use :func:`load_predictions` or
    :func:`~.validating.validate_predictions` to get problems back instead of an exception.
    """
    frame, problems = load_predictions(path, max_bytes=max_bytes)
    serious = [p for p in problems if p.severity is not Severity.WARNING]
    if serious:
        raise PredictionFileError(str(path), serious)
    return frame.drop(columns=[LINE])
