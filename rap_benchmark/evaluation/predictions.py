"""Prediction files: the format, reading/writing, and a validator that names every problem.

A prediction file is JSONL or parquet with one row per (model, condition, field_id, origin)
(docs/ARCHITECTURE.md, "Prediction files"):

    model            str, non-empty
    condition        "A0".."A4"
    field_id         str, a field of the instance
    origin           "YYYY-MM-DD", an origin of the instance
    D0..D7           float (null when the unit is invalid)
    valid            bool
    invalid_reason   str or null (an agent run writes an ``InvalidReason`` value)
    manifest_hash    str, the instance's manifest hash the predictions were built against
    [attempts, prompt_tokens, completion_tokens, n_search_calls]   optional int
    [cost_usd, wall_s]                                              optional float
    [invalid_detail, response_model]                                optional str

Reading never raises on bad input: :func:`load_predictions` returns the rows it could read plus
a list of :class:`Problem`. :func:`validate_predictions` adds the checks against an instance
(unknown, duplicate and missing episodes, weights, manifest hash) and returns a
:class:`ValidationReport` whose ``frame`` is what the scorer may use:

* rows whose key cannot be trusted (bad JSON, bad types, unknown condition or episode) are dropped;
* every copy of a duplicated key is dropped (the validator never guesses which copy is meant),
  so the episode is then counted as missing;
* rows that claim ``valid`` but carry unusable weights are kept as invalid units, with
  ``invalid_reason`` starting ``"validator: "``.

Weights of valid rows are not renormalised here; the scorer renormalises to the simplex.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re
from array import array
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import pyarrow as pa

from rap_benchmark.core.errors import json_reason
from rap_benchmark.core.fsio import atomic_open
from rap_benchmark.core.records import DIRECTION_KEYS, Condition, Policy, Split, parse_enum
from rap_benchmark.core.schemas import (
    PREDICTION_KEY,
    PREDICTION_META,
    PREDICTION_REQUIRED,
    PREDICTIONS,
    columns_of,
    pending_mask,
    select,
)

if TYPE_CHECKING:
    from rap_benchmark.core.artifacts import Instance

# Column groups of the prediction file, all read off its schema (rap_benchmark.core.schemas.PREDICTIONS).
KEY_COLUMNS: tuple[str, ...] = PREDICTION_KEY
REQUIRED_COLUMNS: tuple[str, ...] = PREDICTION_REQUIRED
META_INT_COLUMNS: tuple[str, ...] = columns_of(PREDICTIONS, pa.int64(), PREDICTION_META)
META_FLOAT_COLUMNS: tuple[str, ...] = columns_of(PREDICTIONS, pa.float64(), PREDICTION_META)
META_STR_COLUMNS: tuple[str, ...] = columns_of(PREDICTIONS, pa.string(), PREDICTION_META)
META_COLUMNS: tuple[str, ...] = PREDICTION_META
ALL_COLUMNS: tuple[str, ...] = tuple(PREDICTIONS.names)

DEFAULT_MAX_BYTES = 512 * 1024 * 1024
"""Files larger than this are refused unread (40k episodes x 5 conditions is about 60 MB)."""

MAX_LISTED = 20
"""How many offending keys or line numbers a problem message lists before summarising."""
MAX_EXAMPLES = 5
"""How many distinct examples (values, parse errors) a problem message shows."""
MAX_ECHO = 80
"""Echoed input is cut to this many characters (a 200 MB model name stays one short line)."""
MAX_LINE_BYTES = 64 * 1024
"""A JSONL line longer than this is skipped unread (a prediction row is a few hundred bytes)."""
MAX_DEPTH = 32
"""JSON nested deeper than this is refused before parsing (a prediction row has depth 1)."""
MAX_KEY_CHARS = 256
"""The longest model, field_id, manifest_hash or response_model accepted."""
MAX_REASON_CHARS = 2000
"""An invalid_reason is cut to this many characters."""
MAX_WEIGHT = 1e9
"""Weights are percentages: a weight beyond this (e.g. 1e308, whose sum overflows) is out of range."""

_CONDITIONS = frozenset(c.value for c in Condition)
_LINE = "_line"  # 1-based source line (JSONL) or row (parquet) number, kept for messages


class ProblemKind(StrEnum):
    """Every kind of problem the validator reports."""

    FILE_MISSING = "file_missing"
    FILE_TOO_LARGE = "file_too_large"
    EMPTY_FILE = "empty_file"
    ENCODING = "encoding"
    BAD_JSON = "bad_json"
    TRUNCATED = "truncated"
    NOT_AN_OBJECT = "not_an_object"
    UNREADABLE = "unreadable"
    UNKNOWN_FORMAT = "unknown_format"
    MISSING_COLUMN = "missing_column"
    UNKNOWN_COLUMN = "unknown_column"
    BAD_TYPE = "bad_type"
    UNKNOWN_CONDITION = "unknown_condition"
    UNEXPECTED_CONDITION = "unexpected_condition"
    BAD_ORIGIN = "bad_origin"
    UNKNOWN_EPISODE = "unknown_episode"
    PENDING_EPISODE = "pending_episode"
    DUPLICATE = "duplicate"
    MISSING_EPISODES = "missing_episodes"
    BAD_WEIGHTS = "bad_weights"
    MANIFEST_HASH = "manifest_hash"
    LINE_TOO_LONG = "line_too_long"
    DUPLICATE_KEY = "duplicate_key"
    NON_STANDARD_JSON = "non_standard_json"
    TOO_DEEP = "too_deep"
    JSON_ARRAY = "json_array"
    NO_REASON = "no_reason"
    REPEATED_UNIT = "repeated_unit"


class Severity(StrEnum):
    FATAL = "fatal"  # nothing in the file can be scored
    ERROR = "error"  # some rows are dropped or made invalid; the rest can be scored
    WARNING = "warning"  # reported only (e.g. missing episodes, a UTF-8 byte-order mark)


@dataclass(frozen=True, slots=True)
class Problem:
    """One problem, with the source lines (or parquet rows) it concerns when known."""

    kind: ProblemKind
    severity: Severity
    message: str
    lines: tuple[int, ...] = ()
    count: int = 1

    def __str__(self) -> str:
        return f"[{self.severity.value}] {self.kind.value}: {self.message}"


@dataclass(frozen=True)
class ValidationReport:
    """The outcome of validating one prediction file (or frame) against an instance.

    ``frame`` holds the rows the scorer may use (canonical columns and dtypes); it is empty when
    a fatal problem was found. ``missing`` lists, per (model, condition), the episode ids the
    file does not cover.
    """

    source: str
    problems: tuple[Problem, ...]
    frame: pd.DataFrame = field(repr=False)
    n_rows_read: int
    missing: dict[tuple[str, str], tuple[str, ...]] = field(default_factory=dict, repr=False)

    @property
    def ok(self) -> bool:
        """True when nothing but warnings was found."""
        return all(p.severity is Severity.WARNING for p in self.problems)

    @property
    def scorable(self) -> bool:
        """True when no fatal problem was found (row-level errors only drop or invalidate rows)."""
        return not any(p.severity is Severity.FATAL for p in self.problems)

    @property
    def n_invalid_units(self) -> int:
        return int((~self.frame["valid"]).sum()) if len(self.frame) else 0

    def of_kind(self, kind: ProblemKind) -> list[Problem]:
        return [p for p in self.problems if p.kind is kind]

    def summary(self) -> str:
        head = (
            f"{self.source}: {self.n_rows_read} rows read, {len(self.frame)} usable "
            f"({self.n_invalid_units} invalid units), {len(self.problems)} problem(s)"
        )
        return "\n".join([head, *(f"  {p}" for p in self.problems)])


class PredictionFileError(ValueError):
    """Raised by :func:`read_predictions` when a file cannot be read cleanly."""

    def __init__(self, source: str, problems: Sequence[Problem]):
        self.problems = tuple(problems)
        super().__init__(f"{source}:\n  " + "\n  ".join(str(p) for p in problems))


# -- helpers ---------------------------------------------------------------------------------


def _short(value: Any, limit: int = MAX_ECHO) -> str:
    """``repr(value)`` cut to ``limit`` characters: echoed input never floods a message."""
    if isinstance(value, str) and len(value) > limit * 4:
        value = value[: limit * 4]  # repr of a 200 MB string is never built
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _echo(text: str) -> str:
    """A string as it may be echoed in a message: escaped (no control characters or surrogates) and cut."""
    return _short(str(text))[1:-1]


def _listing(items: Sequence[Any], limit: int = MAX_LISTED, total: int | None = None) -> str:
    total = len(items) if total is None else total
    shown = ", ".join(str(i) for i in items[:limit])
    return shown + (f", ... ({total - min(limit, len(items))} more)" if total > min(limit, len(items)) else "")


def _lines(numbers: Sequence[int], total: int | None = None) -> str:
    """``line 3`` or ``lines 3, 7, 9`` (at most MAX_LISTED numbers, then how many more)."""
    total = len(numbers) if total is None else total
    return f"line {numbers[0]}" if total == 1 else f"lines {_listing(list(numbers), total=total)}"


def _line_list(lines: Iterable[int]) -> tuple[int, ...]:
    """The first MAX_LISTED line numbers, sorted (a problem never carries millions of them)."""
    return tuple(sorted(int(x) for x in lines)[:MAX_LISTED])


def empty_frame() -> pd.DataFrame:
    """A prediction frame with the required columns and no rows."""
    return _canonical(pd.DataFrame({c: [] for c in REQUIRED_COLUMNS}))


def _canonical(df: pd.DataFrame) -> pd.DataFrame:
    """Columns in file order with canonical dtypes (object strings, float64 weights, bool valid)."""
    out = pd.DataFrame(index=df.index)
    for col in KEY_COLUMNS:
        out[col] = df[col].astype(object)
    for col in DIRECTION_KEYS:
        out[col] = pd.to_numeric(df[col], errors="coerce").astype(np.float64)
    out["valid"] = df["valid"].astype(bool)
    out["invalid_reason"] = df["invalid_reason"].astype(object).where(df["invalid_reason"].notna(), None)
    out["manifest_hash"] = df["manifest_hash"].astype(object)
    for col in META_INT_COLUMNS:
        if col in df:
            out[col] = pd.to_numeric(df[col], errors="coerce").astype("Int64")
    for col in META_FLOAT_COLUMNS:
        if col in df:
            out[col] = pd.to_numeric(df[col], errors="coerce").astype(np.float64)
    for col in META_STR_COLUMNS:
        if col in df:
            out[col] = df[col].astype(object).where(df[col].notna(), None)
    if _LINE in df:
        out[_LINE] = df[_LINE].astype(np.int64)
    return out.reset_index(drop=True)


class _Tally:
    """Row problems grouped by (kind, severity, what): a count, the first line numbers and a few
    examples each, so a million bad rows make one short message."""

    def __init__(self) -> None:
        self._items: dict[tuple[ProblemKind, Severity, str], list[Any]] = {}

    def add(
        self, kind: ProblemKind, what: str, line: int, severity: Severity = Severity.ERROR, example: str | None = None
    ) -> None:
        entry = self._items.get((kind, severity, what))
        if entry is None:
            entry = self._items[(kind, severity, what)] = [0, [], []]
        entry[0] += 1
        if len(entry[1]) < MAX_LISTED:
            entry[1].append(line)
        if example is not None and len(entry[2]) < MAX_EXAMPLES and example not in entry[2]:
            entry[2].append(example)

    def count(self, kind: ProblemKind) -> int:
        return sum(e[0] for (k, _, _), e in self._items.items() if k is kind)

    def problems(self) -> list[Problem]:
        out = []
        for (kind, severity, what), (count, lines, examples) in self._items.items():
            shown = f" ({'; '.join(examples)})" if examples else ""
            out.append(
                Problem(
                    kind,
                    severity,
                    f"{count} row(s) {what}{shown}: {_lines(lines, count)}",
                    lines=_line_list(lines),
                    count=count,
                )
            )
        return out


# -- strict JSON -------------------------------------------------------------------------------


class _DuplicateKey(ValueError):
    def __init__(self, key: str) -> None:
        self.key = key


class _NonStandard(ValueError):
    def __init__(self, token: str) -> None:
        self.token = token


def _strict_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for k, _ in pairs:
            if k in seen:
                raise _DuplicateKey(k)
            seen.add(k)
    return obj


def _no_constants(token: str) -> Any:
    raise _NonStandard(token)


def _strict_loads(text: str) -> Any:
    """``json.loads`` that refuses duplicate keys and NaN/Infinity (RFC 8259 JSON only)."""
    return json.loads(text, object_pairs_hook=_strict_object, parse_constant=_no_constants)


_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')


def _nesting_depth(text: str) -> int:
    """The deepest [ / { nesting of a JSON text (strings skipped); cheap unless brackets abound."""
    if text.count("[") + text.count("{") <= MAX_DEPTH:
        return 0
    bare = np.frombuffer(_JSON_STRING.sub("", text).encode("utf-8", "replace"), dtype=np.uint8)
    step = np.isin(bare, (ord("["), ord("{"))).astype(np.int64) - np.isin(bare, (ord("]"), ord("}")))
    return int(np.cumsum(step).max(initial=0))


def _has_surrogate(value: str) -> bool:
    if value.isascii():
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


# -- rows: checked one at a time, kept in compact columns ------------------------------------------

_ALLOWED = frozenset(ALL_COLUMNS)
_WEIGHT_INDEX = {k: j for j, k in enumerate(DIRECTION_KEYS)}
_DATE_RE = re.compile(r"\d{4}-\d{2}-\d{2}")


class _Rows:
    """Checks rows one by one (JSON objects, parquet records or frame rows) and keeps the usable
    ones in compact columns: strings interned, numbers in typed arrays. Memory grows with the
    number of rows, never with the size of a bad value, and problems stay bounded (``_Tally``)."""

    def __init__(self, *, nan_is_null: bool = False) -> None:
        self.nan_is_null = nan_is_null  # frames: pandas writes NaN for null
        self.tally = _Tally()
        self.n_rows = 0
        self.unknown: dict[str, int] = {}  # unknown key -> first line
        self.absent = dict.fromkeys(REQUIRED_COLUMNS, 0)
        self.present_meta: set[str] = set()
        self._intern: dict[str, str] = {}
        self.str_cols: dict[str, list[Any]] = {c: [] for c in (*KEY_COLUMNS, "manifest_hash", "invalid_reason")}
        self.str_cols.update({c: [] for c in META_STR_COLUMNS})
        self.weights = [array("d") for _ in DIRECTION_KEYS]
        self.valid = bytearray()
        self.lines = array("q")
        self.ints = {c: array("q") for c in META_INT_COLUMNS}
        self.int_null = {c: bytearray() for c in META_INT_COLUMNS}
        self.floats = {c: array("d") for c in META_FLOAT_COLUMNS}

    def _key(self, value: str) -> str:
        got = self._intern.get(value)
        if got is None:
            if len(self._intern) < 1_000_000:
                self._intern[value] = value
            got = value
        return got

    def _text(self, rec: dict[str, Any], col: str, line: int, limit: int) -> tuple[bool, str | None]:
        """(ok, value) for a non-empty string key column."""
        v = rec.get(col)
        if not isinstance(v, str) or not v.strip():
            self.tally.add(ProblemKind.BAD_TYPE, f"have a missing, empty or non-string {col!r} (dropped)", line)
            return False, None
        if len(v) > limit:
            self.tally.add(ProblemKind.BAD_TYPE, f"have a {col!r} longer than {limit} characters (dropped)", line)
            return False, None
        if _has_surrogate(v):
            self.tally.add(ProblemKind.ENCODING, f"have a {col!r} with a lone UTF-16 surrogate (dropped)", line)
            return False, None
        return True, self._key(v)

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
        ok_m, model = self._text(rec, "model", line, MAX_KEY_CHARS)
        ok_f, field_id = self._text(rec, "field_id", line, MAX_KEY_CHARS)
        ok_h, mhash = self._text(rec, "manifest_hash", line, MAX_KEY_CHARS)
        keep = ok_m and ok_f and ok_h
        cond = rec.get("condition")
        if not isinstance(cond, str):
            tally.add(ProblemKind.BAD_TYPE, "have a non-string 'condition' (dropped)", line)
            keep = False
        elif cond not in _CONDITIONS:
            tally.add(
                ProblemKind.UNKNOWN_CONDITION,
                "have an unknown condition (expected A0..A4; dropped)",
                line,
                example=_short(cond),
            )
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
            if not (self.nan_is_null and isinstance(reason, float) and math.isnan(reason)):
                tally.add(
                    ProblemKind.BAD_TYPE,
                    "have an 'invalid_reason' that is neither a string nor null (set to null)",
                    line,
                )
            reason = None
        elif isinstance(reason, str) and len(reason) > MAX_REASON_CHARS:
            reason = reason[:MAX_REASON_CHARS] + "..."
        # weights
        w = [math.nan] * 8
        why_invalid = None
        n_null = 0
        for col, j in _WEIGHT_INDEX.items():
            v = rec.get(col)
            if v is None:
                n_null += 1
                continue
            if isinstance(v, bool | np.bool_) or not isinstance(v, int | float | np.integer | np.floating):
                tally.add(ProblemKind.BAD_TYPE, f"have a non-numeric {col} (the unit is made invalid)", line)
                why_invalid = why_invalid or f"have a non-numeric {col}"
                continue
            if isinstance(v, float | np.floating) and math.isnan(v):
                if self.nan_is_null:
                    n_null += 1
                else:
                    why_invalid = why_invalid or "have a NaN weight"
                continue
            if isinstance(v, float | np.floating) and math.isinf(v):
                why_invalid = why_invalid or "have an infinite weight"
                continue
            if abs(v) > MAX_WEIGHT:
                why_invalid = why_invalid or f"have a weight beyond +-{MAX_WEIGHT:g} (out of range)"
                continue
            w[j] = float(v)
        is_valid = bool(valid) and keep
        if is_valid:
            if why_invalid is None and n_null:
                why_invalid = "give fewer than eight weights (null or absent D0..D7)"
            if why_invalid is None and any(x < 0 for x in w):
                why_invalid = "have a negative weight"
            if why_invalid is None and not math.fsum(w) > 0:
                why_invalid = "all weights are zero"
            if why_invalid is not None:
                if not why_invalid.startswith("have a non-numeric"):  # reported as a type error above
                    tally.add(ProblemKind.BAD_WEIGHTS, f"claim valid but {why_invalid}; kept as invalid units", line)
                is_valid, reason = False, f"validator: {why_invalid.removeprefix('have ')}"
        elif keep and valid is False and not (isinstance(reason, str) and reason.strip()):
            tally.add(
                ProblemKind.NO_REASON,
                "say valid: false but give no invalid_reason (an invalid unit must say why)",
                line,
            )
            reason = "validator: no invalid_reason given"
        # metadata
        meta: dict[str, Any] = {}
        for col in META_COLUMNS:
            if col not in rec:
                continue
            self.present_meta.add(col)
            v = rec[col]
            if v is None or (isinstance(v, float) and math.isnan(v) and col not in META_STR_COLUMNS):
                meta[col] = None
                continue
            if col in META_INT_COLUMNS:
                ok = _is_integral(v) and abs(v) < 2**53
            elif col in META_FLOAT_COLUMNS:
                ok = isinstance(v, int | float | np.integer | np.floating) and not isinstance(v, bool | np.bool_)
                ok = ok and abs(v) <= MAX_WEIGHT * 1e3  # False for NaN, infinities and 10**400 alike
            else:
                ok = isinstance(v, str) and len(v) <= MAX_KEY_CHARS and not _has_surrogate(v)
            if not ok:
                tally.add(
                    ProblemKind.BAD_TYPE,
                    f"have a {col!r} of the wrong type or size (set to null)",
                    line,
                    Severity.WARNING,
                )
                v = None
            meta[col] = v
        if not keep:
            return
        s = self.str_cols
        s["model"].append(model)
        s["condition"].append(self._key(cond))
        s["field_id"].append(field_id)
        s["origin"].append(self._key(origin))
        s["manifest_hash"].append(mhash)
        s["invalid_reason"].append(None if is_valid else (self._key(reason) if reason is not None else None))
        for col in META_STR_COLUMNS:
            v = meta.get(col)
            s[col].append(self._key(v) if isinstance(v, str) else None)
        for j in range(8):
            self.weights[j].append(w[j] if is_valid else math.nan)
        self.valid.append(1 if is_valid else 0)
        self.lines.append(line)
        for col in META_INT_COLUMNS:
            v = meta.get(col)
            self.ints[col].append(int(v) if v is not None else 0)
            self.int_null[col].append(1 if v is None else 0)
        for col in META_FLOAT_COLUMNS:
            v = meta.get(col)
            self.floats[col].append(float(v) if v is not None else math.nan)

    def finish(self, problems: list[Problem]) -> pd.DataFrame:
        """The canonical frame of the kept rows, after adding file-level and row problems."""
        for col, line in self.unknown.items():
            hint = ""
            low = {c.lower(): c for c in ALL_COLUMNS}
            if str(col).lower() in low:
                hint = f" (did you mean {low[str(col).lower()]!r}?)"
            elif str(col).lower() in ("weights", "prediction", "distribution"):
                hint = " (give the eight weights as columns D0..D7)"
            elif str(col).upper().startswith("D") and str(col)[1:].isdigit():
                hint = " (RAP has exactly eight directions, D0..D7)"
            problems.append(
                Problem(
                    ProblemKind.UNKNOWN_COLUMN,
                    Severity.FATAL,
                    f"unknown column {_short(col)}{hint} (first on line {line}); allowed: {', '.join(ALL_COLUMNS)}",
                    lines=(line,),
                )
            )
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
        # column by column, releasing each source as soon as it is converted (a 500 MB file must stay
        # far below 1 GiB: the rows are never held twice)
        frame = pd.DataFrame(index=pd.RangeIndex(len(self.lines)))

        def take_str(col: str) -> None:
            frame[col] = np.array(self.str_cols.pop(col), dtype=object)

        def take_float(buf: array) -> np.ndarray:
            return np.frombuffer(buf, dtype=np.float64).copy() if len(buf) else np.zeros(0)

        for col in KEY_COLUMNS:
            take_str(col)
        for j, col in enumerate(DIRECTION_KEYS):
            frame[col] = take_float(self.weights[j])
            self.weights[j] = array("d")
        frame["valid"] = np.frombuffer(bytes(self.valid), dtype=np.uint8).astype(bool)
        self.valid = bytearray()
        take_str("invalid_reason")
        take_str("manifest_hash")
        for col in META_INT_COLUMNS:
            if col in self.present_meta:
                values = np.frombuffer(self.ints[col], dtype=np.int64).copy() if len(self.lines) else np.zeros(0, int)
                mask = np.frombuffer(bytes(self.int_null[col]), dtype=np.uint8).astype(bool)
                frame[col] = pd.arrays.IntegerArray(values, mask)
            self.ints[col], self.int_null[col] = array("q"), bytearray()
        for col in META_FLOAT_COLUMNS:
            if col in self.present_meta:
                frame[col] = take_float(self.floats[col])
            self.floats[col] = array("d")
        for col in META_STR_COLUMNS:
            if col in self.present_meta:
                take_str(col)
        frame[_LINE] = np.frombuffer(self.lines, dtype=np.int64).copy() if len(self.lines) else np.zeros(0, int)
        self.lines = array("q")
        return frame


# -- reading ---------------------------------------------------------------------------------


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


def _truncated(lineno: int, why: str) -> Problem:
    return Problem(
        ProblemKind.TRUNCATED,
        Severity.FATAL,
        f"line {lineno} is cut off (no closing newline, {why}); the file looks truncated, so none of it is scored",
        lines=(lineno,),
    )


def _read_jsonl(path: Path, rows: _Rows, problems: list[Problem]) -> bool:
    """Stream a JSON-lines file into ``rows``; False when the file as a whole cannot be read."""
    tally = rows.tally
    first_content = True
    with path.open("rb") as fh:
        head = fh.read(4)
        fh.seek(0)
        if head.startswith((b"\xff\xfe", b"\xfe\xff")):
            problems.append(
                Problem(
                    ProblemKind.ENCODING, Severity.FATAL, "file is UTF-16 (byte-order mark found); save it as UTF-8"
                )
            )
            return False
        lineno = 0
        while True:
            raw, size, complete = _read_line(fh)
            if not raw:
                break
            lineno += 1
            if lineno == 1 and raw.startswith(b"\xef\xbb\xbf"):
                problems.append(
                    Problem(ProblemKind.ENCODING, Severity.WARNING, "UTF-8 byte-order mark at the start (ignored)")
                )
                raw = raw[3:]
            if size > MAX_LINE_BYTES:
                if not complete:
                    problems.append(_truncated(lineno, f"{size:,} bytes"))
                    return False
                tally.add(
                    ProblemKind.LINE_TOO_LONG,
                    f"are longer than {MAX_LINE_BYTES:,} bytes, far beyond any prediction row (skipped unread)",
                    lineno,
                    example=f"line {lineno}: {size:,} bytes",
                )
                first_content = False
                continue
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                if not complete:
                    problems.append(_truncated(lineno, "a character cut in half"))
                    return False
                tally.add(
                    ProblemKind.ENCODING,
                    "are not valid UTF-8; save the file as UTF-8 (skipped)",
                    lineno,
                    example=f"byte {raw[exc.start]:#04x} at column {exc.start + 1}",
                )
                first_content = False
                continue
            if not text.strip():
                continue
            depth = _nesting_depth(text)
            if depth > MAX_DEPTH:
                if not complete:
                    problems.append(_truncated(lineno, f"{depth} open brackets"))
                    return False
                tally.add(
                    ProblemKind.TOO_DEEP,
                    f"nest JSON more than {MAX_DEPTH} levels deep; a prediction row is a flat object (dropped)",
                    lineno,
                    example=f"line {lineno}: {depth} levels",
                )
                first_content = False
                continue
            try:
                obj = _strict_loads(text)
            except _DuplicateKey as exc:
                tally.add(
                    ProblemKind.DUPLICATE_KEY,
                    "repeat a key inside the row, which is ambiguous (dropped)",
                    lineno,
                    example=_short(exc.key),
                )
            except _NonStandard as exc:
                tally.add(
                    ProblemKind.NON_STANDARD_JSON,
                    f"contain {exc.token}, which is not JSON (write null and valid: false for an unusable unit; "
                    "dropped)",
                    lineno,
                )
            except RecursionError:
                tally.add(ProblemKind.TOO_DEEP, "are nested too deeply to be a prediction row (dropped)", lineno)
            except ValueError as exc:  # JSONDecodeError, or an integer literal over Python's digit limit
                if first_content and text.lstrip().startswith("["):
                    problems.append(_json_array_problem())
                    return False
                if not complete:
                    problems.append(_truncated(lineno, _json_error(exc)))
                    return False
                tally.add(
                    ProblemKind.BAD_JSON,
                    "are not valid JSON (skipped)",
                    lineno,
                    example=f"line {lineno}: {_json_error(exc)}",
                )
            else:
                if first_content and isinstance(obj, list) and obj and all(isinstance(o, dict) for o in obj):
                    problems.append(_json_array_problem())
                    return False
                if isinstance(obj, dict):
                    rows.add(obj, lineno)
                else:
                    tally.add(ProblemKind.NOT_AN_OBJECT, "are JSON but not objects (skipped)", lineno)
            first_content = False
    return True


def _json_error(exc: ValueError) -> str:
    if isinstance(exc, json.JSONDecodeError):
        return f"{json_reason(exc)} at column {exc.colno}"
    return _short(str(exc), 120)


def _json_array_problem() -> Problem:
    return Problem(
        ProblemKind.JSON_ARRAY,
        Severity.FATAL,
        "the file is one JSON array, not JSON Lines: write one JSON object per line (no enclosing [ ])",
        lines=(1,),
    )


def _read_parquet(path: Path, rows: _Rows, problems: list[Problem]) -> bool:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(path)
        line = 0
        for batch in pf.iter_batches(batch_size=65_536):
            for rec in batch.to_pylist():
                line += 1
                rows.add(rec, line)
    except (pa.ArrowException, OSError, ValueError) as exc:
        problems.append(
            Problem(
                ProblemKind.UNREADABLE,
                Severity.FATAL,
                f"not a readable parquet file (truncated?): {_short(str(exc), 200)}",
            )
        )
        return False
    if rows.n_rows == 0:
        problems.append(Problem(ProblemKind.EMPTY_FILE, Severity.FATAL, "the parquet file has no rows"))
        return False
    return True


def load_predictions(path: str | Path, *, max_bytes: int = DEFAULT_MAX_BYTES) -> tuple[pd.DataFrame, list[Problem]]:
    """Read a JSONL or parquet prediction file without ever raising on its content.

    The file is streamed row by row (memory grows with the number of rows, not the file's bytes),
    parsed as strict JSON (duplicate keys and NaN/Infinity are named), and every row is checked.
    Returns the usable rows (canonical columns, plus ``_line``: the source line or row number) and
    every problem found, at most one message per kind of problem. Checks against an instance are
    in :func:`validate_predictions`.
    """
    path = Path(path)
    problems: list[Problem] = []
    if not path.is_file():
        problems.append(Problem(ProblemKind.FILE_MISSING, Severity.FATAL, f"no file at {path}"))
        return empty_frame(), problems
    size = path.stat().st_size
    if size > max_bytes:
        problems.append(
            Problem(
                ProblemKind.FILE_TOO_LARGE,
                Severity.FATAL,
                f"file is {size:,} bytes, over the {max_bytes:,}-byte limit (split it or raise max_bytes)",
            )
        )
        return empty_frame(), problems
    if size == 0:
        problems.append(Problem(ProblemKind.EMPTY_FILE, Severity.FATAL, "file is empty (0 bytes)"))
        return empty_frame(), problems
    with path.open("rb") as fh:
        magic = fh.read(4)
    suffix = path.suffix.lower()
    rows = _Rows()
    if suffix == ".parquet" or magic == b"PAR1":
        ok = _read_parquet(path, rows, problems)
    elif suffix in (".jsonl", ".json", ".ndjson") or suffix == "":
        ok = _read_jsonl(path, rows, problems)
        if ok and rows.n_rows == 0 and not rows.tally.problems():
            problems.append(Problem(ProblemKind.EMPTY_FILE, Severity.FATAL, "file holds only whitespace"))
            return empty_frame(), problems
    else:
        problems.append(
            Problem(
                ProblemKind.UNKNOWN_FORMAT,
                Severity.FATAL,
                f"unknown extension {_short(suffix)}: use .jsonl or .parquet",
            )
        )
        return empty_frame(), problems
    n_read = rows.n_rows + sum(
        rows.tally.count(k)
        for k in (
            ProblemKind.BAD_JSON,
            ProblemKind.NOT_AN_OBJECT,
            ProblemKind.DUPLICATE_KEY,
            ProblemKind.NON_STANDARD_JSON,
            ProblemKind.TOO_DEEP,
            ProblemKind.LINE_TOO_LONG,
        )
    )
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
    :func:`validate_predictions` to get problems back instead of an exception.
    """
    frame, problems = load_predictions(path, max_bytes=max_bytes)
    serious = [p for p in problems if p.severity is not Severity.WARNING]
    if serious:
        raise PredictionFileError(str(path), serious)
    return frame.drop(columns=[_LINE])


def write_predictions(df: pd.DataFrame, path: str | Path) -> Path:
    """Write a prediction frame as JSONL (``.jsonl``) or parquet (``.parquet``), deterministically.

    Rows are sorted by (model, condition, field_id, origin); columns are the required ones then
    any known metadata columns present. Unknown columns are refused. The file is replaced
    atomically (:mod:`rap_benchmark.core.fsio`).
    """
    path = Path(path)
    unknown = [c for c in df.columns if c not in ALL_COLUMNS and c != _LINE]
    if unknown:
        raise ValueError(f"unknown prediction columns: {', '.join(unknown)} (allowed: {', '.join(ALL_COLUMNS)})")
    missing = [c for c in REQUIRED_COLUMNS if c not in df.columns]
    if missing:
        raise ValueError(f"missing prediction columns: {', '.join(missing)}")
    cols = [c for c in ALL_COLUMNS if c in df.columns]
    out = df[cols].sort_values(list(KEY_COLUMNS), kind="stable").reset_index(drop=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix.lower() == ".parquet":
        from rap_benchmark.core.artifacts import write_parquet

        write_parquet(path, _canonical(out), select(PREDICTIONS, cols))
        return path
    if path.suffix.lower() != ".jsonl":
        raise ValueError(f"prediction files are .jsonl or .parquet, got {path.name}")
    int_cols = set(META_INT_COLUMNS)
    with atomic_open(path) as fh:  # a kill mid-write leaves the old file or none, never a cut one
        for rec in out.to_dict(orient="records"):
            row: dict[str, Any] = {}
            for col in cols:
                value = rec[col]
                if isinstance(value, float | np.floating):
                    value = None if math.isnan(value) else float(value)
                    if value is not None and col in int_cols:
                        value = int(value)
                elif isinstance(value, np.bool_ | bool):
                    value = bool(value)
                elif isinstance(value, np.integer):
                    value = int(value)
                row[col] = value
            fh.write(json.dumps(row, ensure_ascii=False, allow_nan=False) + "\n")
    return path


# -- small value checks ------------------------------------------------------------------------


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


# -- checks against an instance ----------------------------------------------------------------


def _episode_table(inst: Instance, split: Split | None, *, pending: bool = False) -> pd.DataFrame:
    """The (field, origin, split) episodes; those whose y is pending only with ``pending``."""
    cols = ["field_id", "origin", "split", *(["flags"] if "flags" in inst.episodes else [])]
    eps = inst.episodes[cols].drop_duplicates(["field_id", "origin"])
    if not pending and "flags" in eps:
        eps = eps[~pending_mask(eps)]
    eps = eps[["field_id", "origin", "split"]].assign(origin=eps["origin"].astype(str).str[:10])
    if split is not None:
        eps = eps[eps["split"] == parse_enum(Split, split).value]
    return eps.sort_values(["field_id", "origin"]).reset_index(drop=True)


def n_expected_episodes(inst: Instance, split: Split | None) -> int:
    """How many (field, origin) episodes a complete prediction file covers for ``split`` (None: all)."""
    return len(_episode_table(inst, split))


def validate_predictions(
    df_or_path: pd.DataFrame | str | Path,
    inst: Instance,
    *,
    expected_conditions: Iterable[Condition | str] | None = None,
    split: Split | None = None,
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> ValidationReport:
    """Validate a prediction file (or an in-memory frame) against a built instance.

    Every problem is named: file-level ones (size, encoding, truncation, bad JSON lines, columns,
    types), unknown conditions, conditions outside ``expected_conditions``, unknown episodes,
    duplicate keys, bad weights on rows that claim to be valid, a manifest hash other than the
    instance's, and missing episodes (counted and listed per model and condition; with ``split``
    only that split's episodes are expected). Never raises: a failure of the validator itself is
    reported as a fatal problem of that file, so other files are still scored.
    """
    try:
        return _validate(df_or_path, inst, expected_conditions, split, max_bytes)
    except Exception as exc:  # noqa: BLE001 - the validator's contract: a message, never an exception
        source = "<frame>" if isinstance(df_or_path, pd.DataFrame) else str(df_or_path)
        problem = Problem(
            ProblemKind.UNREADABLE,
            Severity.FATAL,
            f"could not be validated ({type(exc).__name__}: {_short(str(exc), 200)}); please report this",
        )
        return ValidationReport(source, (problem,), empty_frame(), 0)


def _frame_rows(raw: pd.DataFrame, problems: list[Problem]) -> pd.DataFrame:
    """An in-memory frame through the same row checks as a file (NaN counts as null in a frame)."""
    rows = _Rows(nan_is_null=True)
    line_no = raw[_LINE].to_numpy(np.int64) if _LINE in raw else np.arange(1, len(raw) + 1)
    records = raw.drop(columns=[_LINE], errors="ignore").to_dict(orient="records")
    for line, rec in zip(line_no.tolist(), records, strict=True):
        rows.add({str(k): v for k, v in rec.items()}, line)
    return rows.finish(problems)


def _validate(
    df_or_path: pd.DataFrame | str | Path,
    inst: Instance,
    expected_conditions: Iterable[Condition | str] | None,
    split: Split | None,
    max_bytes: int,
) -> ValidationReport:
    if isinstance(df_or_path, pd.DataFrame):
        source = "<frame>"
        problems: list[Problem] = []
        if not len(df_or_path):
            problems.append(Problem(ProblemKind.EMPTY_FILE, Severity.FATAL, "the frame has no rows"))
            frame = empty_frame()
        else:
            frame = _frame_rows(df_or_path, problems)
        n_read = len(df_or_path)
    else:
        source = str(df_or_path)
        frame, problems = load_predictions(df_or_path, max_bytes=max_bytes)
        n_read = int(frame.attrs.get("n_rows_read", len(frame)))

    if any(p.severity is Severity.FATAL for p in problems):
        return ValidationReport(source, tuple(problems), empty_frame(), n_read)

    lines = frame[_LINE].to_numpy(np.int64)

    # manifest hash: every row must name the instance it was built against
    wrong_hash = (frame["manifest_hash"] != inst.manifest_hash).to_numpy(bool)
    if wrong_hash.any():
        seen = frame.loc[wrong_hash, "manifest_hash"].value_counts()
        listed = _listing([f"{_short(h[:12])}... ({c} rows)" for h, c in seen.items()], total=len(seen))
        problems.append(
            Problem(
                ProblemKind.MANIFEST_HASH,
                Severity.FATAL,
                f"{int(wrong_hash.sum())} row(s) were built against another instance: {listed}; "
                f"this instance is {inst.manifest_hash[:12]}... (rebuild the predictions against it)",
                lines=_line_list(lines[wrong_hash][:MAX_LISTED]),
                count=int(wrong_hash.sum()),
            )
        )
        return ValidationReport(source, tuple(problems), empty_frame(), n_read)

    # expected conditions
    keep = np.ones(len(frame), bool)
    if expected_conditions is not None:
        expected = {Condition(c).value for c in expected_conditions}
        unexpected = ~frame["condition"].isin(expected).to_numpy(bool)
        if unexpected.any():
            bad = lines[unexpected]
            values = sorted(set(frame.loc[unexpected, "condition"]))
            problems.append(
                Problem(
                    ProblemKind.UNEXPECTED_CONDITION,
                    Severity.ERROR,
                    f"{len(bad)} row(s) have condition {_listing(values)}, not among the expected "
                    f"{', '.join(sorted(expected))} (dropped): {_lines(bad[:MAX_LISTED].tolist(), len(bad))}",
                    lines=_line_list(bad[:MAX_LISTED]),
                    count=len(bad),
                )
            )
            keep &= ~unexpected
    else:
        expected = None

    # unknown episodes
    all_eps = _episode_table(inst, None, pending=True)
    known = pd.MultiIndex.from_arrays([all_eps["field_id"].astype(object), all_eps["origin"].astype(object)])
    row_keys = pd.MultiIndex.from_arrays([frame["field_id"], frame["origin"]])
    unknown = ~row_keys.isin(known)
    if unknown.any():
        bad_keys = frame.loc[unknown, ["field_id", "origin"]].drop_duplicates()
        ids = sorted(f"{_echo(f)}@{o}" for f, o in bad_keys.head(1000).itertuples(index=False))
        bad = lines[unknown]
        problems.append(
            Problem(
                ProblemKind.UNKNOWN_EPISODE,
                Severity.ERROR,
                f"{len(bad)} row(s) name {len(bad_keys)} episode(s) the instance does not have (dropped): "
                f"{_listing(ids, total=len(bad_keys))}; {_lines(bad[:MAX_LISTED].tolist(), len(bad))}",
                lines=_line_list(bad[:MAX_LISTED]),
                count=len(bad),
            )
        )
        keep &= ~unknown
    open_eps = _episode_table(inst, None)
    is_open = pd.MultiIndex.from_arrays([open_eps["field_id"].astype(object), open_eps["origin"].astype(object)])
    pending = ~unknown & ~row_keys.isin(is_open)
    if pending.any():
        origins = sorted(set(frame.loc[pending, "origin"].astype(str)))
        bad = lines[pending]
        problems.append(
            Problem(
                ProblemKind.PENDING_EPISODE,
                Severity.ERROR,
                f"{len(bad)} row(s) forecast episodes whose y is pending (origin {', '.join(origins)}; dropped): "
                "a pending window takes sealed forecasts only (rap submit seal), scored on the live track after "
                f"rap resolve; {_lines(bad[:MAX_LISTED].tolist(), len(bad))}",
                lines=_line_list(bad[:MAX_LISTED]),
                count=len(bad),
            )
        )
        keep &= ~pending

    if not keep.all():
        frame = frame.loc[keep]
        lines = frame[_LINE].to_numpy(np.int64)

    # duplicates: every copy is dropped
    dup = frame.duplicated(list(KEY_COLUMNS), keep=False).to_numpy(bool)
    if dup.any():
        copies = frame.loc[dup, [*KEY_COLUMNS, _LINE]].sort_values([*KEY_COLUMNS, _LINE], kind="stable")
        n_keys = int((~copies.duplicated(list(KEY_COLUMNS))).sum())
        detail = []
        for (m, c, f, o), grp in copies.head(MAX_LISTED * 50).groupby(list(KEY_COLUMNS), sort=True):
            if len(detail) == MAX_LISTED:
                break
            ls = grp[_LINE].tolist()
            shown = ", ".join(map(str, ls[:5])) + (f", ... ({len(ls) - 5} more)" if len(ls) > 5 else "")
            detail.append(f"{_echo(m)}/{c}/{_echo(f)}@{o} (lines {shown})")
        problems.append(
            Problem(
                ProblemKind.DUPLICATE,
                Severity.ERROR,
                f"{n_keys} key(s) appear more than once ({int(dup.sum())} rows); every copy was dropped and the "
                f"episode counts as missing: {_listing(detail, total=n_keys)}",
                lines=_line_list(copies[_LINE].head(MAX_LISTED)),
                count=n_keys,
            )
        )
        frame = frame.loc[~dup]
    if not frame.index.equals(pd.RangeIndex(len(frame))):
        frame = frame.reset_index(drop=True)

    # missing episodes, per (model, condition)
    expected_eps = _episode_table(inst, split)
    expected_ids = (expected_eps["field_id"] + "@" + expected_eps["origin"]).tolist()
    expected_keys = list(zip(expected_eps["field_id"], expected_eps["origin"], strict=True))
    missing: dict[tuple[str, str], tuple[str, ...]] = {}
    groups = {k: g for k, g in frame.groupby(["model", "condition"], sort=True)[["field_id", "origin"]]}
    pairs = sorted(groups) if expected is None else sorted({(m, c) for m, _ in groups for c in expected})
    for model, cond in pairs:
        grp = groups.get((model, cond))
        have = set() if grp is None else set(zip(grp["field_id"], grp["origin"], strict=True))
        lacking = tuple(i for i, k in zip(expected_ids, expected_keys, strict=True) if k not in have)
        if lacking:
            missing[(model, cond)] = lacking
    for n, ((model, cond), ids) in enumerate(missing.items()):
        if n == MAX_LISTED:
            rest = len(missing) - MAX_LISTED
            problems.append(
                Problem(
                    ProblemKind.MISSING_EPISODES,
                    Severity.WARNING,
                    f"... and {rest} more (model, condition) pair(s) with missing episodes",
                    count=rest,
                )
            )
            break
        problems.append(
            Problem(
                ProblemKind.MISSING_EPISODES,
                Severity.WARNING,
                f"{_echo(model)} / {cond}: {len(ids)} of {len(expected_ids)} expected episode(s) missing "
                f"(not guessed; excluded from its scores): {_listing(list(ids))}",
                count=len(ids),
            )
        )
    return ValidationReport(source, tuple(problems), frame, n_read, missing)


def keep_first_owner(reports: Sequence[ValidationReport]) -> list[ValidationReport]:
    """Reports where each (model, condition) belongs to the first file that holds it.

    A later file that reuses a (model, condition) of an earlier one loses those rows, with an
    error naming the earlier file: a file can never remove or replace another file's scores.
    """
    owner: dict[tuple[str, str], str] = {}
    out = []
    for rep in reports:
        if not rep.scorable or not len(rep.frame):
            out.append(rep)
            continue
        units = rep.frame[["model", "condition"]].drop_duplicates().itertuples(index=False, name=None)
        taken = {u: owner[u] for u in units if u in owner}
        for u in rep.frame[["model", "condition"]].drop_duplicates().itertuples(index=False, name=None):
            owner.setdefault(u, rep.source)
        if not taken:
            out.append(rep)
            continue
        clash = pd.MultiIndex.from_arrays([rep.frame["model"], rep.frame["condition"]]).isin(list(taken))
        listed = _listing([f"{_echo(m)} / {c} (in {_echo(src)})" for (m, c), src in sorted(taken.items())])
        problem = Problem(
            ProblemKind.REPEATED_UNIT,
            Severity.ERROR,
            f"{int(clash.sum())} row(s) reuse a model and condition of an earlier file: {listed}; the earlier "
            "file keeps them and these rows are not scored (rename the model)",
            lines=_line_list(rep.frame.loc[clash, _LINE].head(MAX_LISTED)),
            count=int(clash.sum()),
        )
        frame = rep.frame.loc[~clash].reset_index(drop=True)
        missing = {k: v for k, v in rep.missing.items() if k not in taken}
        out.append(ValidationReport(rep.source, (*rep.problems, problem), frame, rep.n_rows_read, missing))
    return out


# -- baselines as ordinary prediction files --------------------------------------------------

BASELINE_PREFIX = "baseline/"
UNIFORM_RANDOM = "uniform_random"


def baseline_predictions(
    inst: Instance,
    *,
    tune_dev: bool = False,
    seed: int | None = None,
    policy: Policy = Policy.CANONICAL,
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """The paper's statistical baselines as a prediction frame, plus their ledger.

    Models ``baseline/recent``, ``baseline/ewma``, ``baseline/arima``, ``baseline/holt``,
    ``baseline/ridge_var`` and ``baseline/uniform_random`` (weights drawn uniformly on the
    simplex, Dirichlet(1), from ``seed``; the spec's ``seed`` by default), all under condition A0
    so they join the leaderboard, one row per episode of ``policy`` (all splits). With
    ``tune_dev`` the ARIMA, Holt and ridge-VAR parameters are tuned on Dev episodes only; the
    ledger records the values used, the grids and the Dev scores.
    """
    from rap_benchmark.evaluation.scoring import BASELINE_NAMES, baseline_forecasts, tune_baselines

    spec = inst.spec
    eps = inst.episodes[inst.episodes["policy"].astype(str) == parse_enum(Policy, policy).value]
    eps = eps.sort_values(["field_id", "origin"], kind="stable").reset_index(drop=True)
    tuned = tune_baselines(eps, spec) if tune_dev else None
    forecasts = baseline_forecasts(eps, spec, tuned)
    seed_ = int(spec.seed if seed is None else seed)
    rng = np.random.default_rng(seed_)
    forecasts[UNIFORM_RANDOM] = rng.dirichlet(np.ones(len(DIRECTION_KEYS)), size=len(eps))
    origins = eps["origin"].astype(str).str[:10].to_numpy()
    frames = []
    for name in (*BASELINE_NAMES, UNIFORM_RANDOM):
        w = forecasts[name]
        ok = np.isfinite(w).all(axis=1)
        frames.append(
            pd.DataFrame(
                {
                    "model": BASELINE_PREFIX + name,
                    "condition": Condition.A0.value,
                    "field_id": eps["field_id"].astype(str).to_numpy(),
                    "origin": origins,
                    **{key: np.where(ok, w[:, j], np.nan) for j, key in enumerate(DIRECTION_KEYS)},
                    "valid": ok,
                    "invalid_reason": np.where(ok, None, "no history window has a counted paper"),
                    "manifest_hash": inst.manifest_hash,
                }
            )
        )
    frame = pd.concat(frames, ignore_index=True)
    frame = frame.sort_values(list(KEY_COLUMNS), kind="stable").reset_index(drop=True)
    used = {
        "ewma_weights": list(spec.ewma_weights),
        "arima_phi": spec.arima_phi,
        "holt_alpha": spec.holt_alpha,
        "holt_beta": spec.holt_beta,
        "var_lambda": spec.var_lambda,
    }
    if tuned is not None:
        used.update({k: tuned[k] for k in ("arima_phi", "holt_alpha", "holt_beta", "var_lambda")})
    ledger: dict[str, Any] = {
        "manifest_hash": inst.manifest_hash,
        "benchmark_version": spec.version,
        "policy": policy,
        "condition": Condition.A0.value,
        "models": [BASELINE_PREFIX + n for n in (*BASELINE_NAMES, UNIFORM_RANDOM)],
        "parameters": used,
        "tuned_on_dev": tune_dev,
        "tuning": tuned,
        "uniform_random": {"distribution": "Dirichlet(1, ..., 1)", "seed": seed_},
    }
    return frame, ledger
