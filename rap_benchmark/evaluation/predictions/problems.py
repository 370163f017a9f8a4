"""The prediction file's columns and limits, and what the validator reports: kinds, severities,
problems and the validation report (messages stay short however bad the input)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from rap_benchmark.core.records import DIRECTION_KEYS
from rap_benchmark.core.schemas import PREDICTION_KEY, PREDICTION_META, PREDICTION_REQUIRED, PREDICTIONS, columns_of

# Column groups of the prediction file, all read off its schema (rap_benchmark.core.schemas.PREDICTIONS).
KEY_COLUMNS: tuple[str, ...] = PREDICTION_KEY
REQUIRED_COLUMNS: tuple[str, ...] = PREDICTION_REQUIRED
META_INT_COLUMNS: tuple[str, ...] = columns_of(PREDICTIONS, pa.int64(), PREDICTION_META)
META_FLOAT_COLUMNS: tuple[str, ...] = columns_of(PREDICTIONS, pa.float64(), PREDICTION_META)
META_STR_COLUMNS: tuple[str, ...] = columns_of(PREDICTIONS, pa.string(), PREDICTION_META)
META_COLUMNS: tuple[str, ...] = PREDICTION_META
ALL_COLUMNS: tuple[str, ...] = tuple(PREDICTIONS.names)
LINE = "_line"
"""A column of read frames: the 1-based source line (JSONL) or row (parquet), kept for messages."""

DEFAULT_MAX_BYTES = 512 * 1024 * 1024
"""Files larger than this are refused unread (40k episodes x 5 conditions is about 60 MB)."""
MAX_LISTED = 20
"""How many offending keys or line numbers a problem message lists before summarising."""
MAX_EXAMPLES = 5
"""How many distinct examples (values, parse errors) a problem message shows."""
MAX_ECHO = 80
"""Echoed input is cut to this many characters (a 200 MB model name stays one short line)."""


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


# -- messages ----------------------------------------------------------------------------------


def short(value: Any, limit: int = MAX_ECHO) -> str:
    """``repr(value)`` cut to ``limit`` characters: echoed input never floods a message."""
    if isinstance(value, str) and len(value) > limit * 4:
        value = value[: limit * 4]  # repr of a 200 MB string is never built
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def echo(text: str) -> str:
    """A string as it may be echoed in a message: escaped (no control characters or surrogates) and cut."""
    return short(str(text))[1:-1]


def listing(items: Sequence[Any], limit: int = MAX_LISTED, total: int | None = None) -> str:
    total = len(items) if total is None else total
    shown = ", ".join(str(i) for i in items[:limit])
    return shown + (f", ... ({total - min(limit, len(items))} more)" if total > min(limit, len(items)) else "")


def lines_text(numbers: Sequence[int], total: int | None = None) -> str:
    """``line 3`` or ``lines 3, 7, 9`` (at most MAX_LISTED numbers, then how many more)."""
    total = len(numbers) if total is None else total
    return f"line {numbers[0]}" if total == 1 else f"lines {listing(list(numbers), total=total)}"


def line_list(lines: Iterable[int]) -> tuple[int, ...]:
    """The first MAX_LISTED line numbers, sorted (a problem never carries millions of them)."""
    return tuple(sorted(int(x) for x in lines)[:MAX_LISTED])


class Tally:
    """Row problems grouped by (kind, severity, what): a count, the first line numbers and a few
    examples each, so a million bad rows make one short message."""

    def __init__(self) -> None:
        self._items: dict[tuple[ProblemKind, Severity, str], list[Any]] = {}

    def add(
        self, kind: ProblemKind, what: str, line: int, severity: Severity = Severity.ERROR, example: str | None = None
    ) -> None:
        entry = self._items.setdefault((kind, severity, what), [0, [], []])
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
            message = f"{count} row(s) {what}{shown}: {lines_text(lines, count)}"
            out.append(Problem(kind, severity, message, lines=line_list(lines), count=count))
        return out


# -- frames ------------------------------------------------------------------------------------


def canonical(df: pd.DataFrame) -> pd.DataFrame:
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
    if LINE in df:
        out[LINE] = df[LINE].astype(np.int64)
    return out.reset_index(drop=True)


def empty_frame() -> pd.DataFrame:
    """A prediction frame with the required columns and no rows."""
    return canonical(pd.DataFrame({c: [] for c in REQUIRED_COLUMNS}))
