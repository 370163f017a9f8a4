"""Prediction files: the format, reading/writing, and a validator that names every problem.

A prediction file is JSONL or parquet with one row per (model, condition, field_id, origin)
(docs/ARCHITECTURE.md, "Prediction files"):

    model            str, non-empty
    condition        "A0".."A4"
    field_id         str, a field of the instance
    origin           "YYYY-MM-DD", an origin of the instance
    D0..D7           float (null when the unit is invalid)
    valid            bool
    invalid_reason   str or null
    manifest_hash    str, the instance's manifest hash the predictions were built against
    [attempts, prompt_tokens, completion_tokens, n_search_calls]   optional int
    [cost_usd, wall_s]                                              optional float
    [response_model]                                                optional str

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

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import pyarrow as pa

from rap_benchmark.core.fsio import atomic_open
from rap_benchmark.core.records import DIRECTION_KEYS, Condition
from rap_benchmark.core.schemas import (
    PREDICTION_KEY,
    PREDICTION_META,
    PREDICTION_REQUIRED,
    PREDICTIONS,
    columns_of,
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
    DUPLICATE = "duplicate"
    MISSING_EPISODES = "missing_episodes"
    BAD_WEIGHTS = "bad_weights"
    MANIFEST_HASH = "manifest_hash"


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


def _listing(items: Sequence[Any], limit: int = MAX_LISTED) -> str:
    shown = ", ".join(str(i) for i in items[:limit])
    return shown + (f", ... ({len(items) - limit} more)" if len(items) > limit else "")


def _lines(numbers: Sequence[int]) -> str:
    """``line 3`` or ``lines 3, 7, 9``."""
    return f"line {numbers[0]}" if len(numbers) == 1 else f"lines {_listing(numbers)}"


def _line_list(lines: Iterable[int]) -> tuple[int, ...]:
    return tuple(sorted(int(x) for x in lines))


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


# -- reading ---------------------------------------------------------------------------------


def _decode(raw: bytes, problems: list[Problem]) -> str | None:
    if raw.startswith((b"\xff\xfe", b"\xfe\xff")):
        problems.append(
            Problem(ProblemKind.ENCODING, Severity.FATAL, "file is UTF-16 (byte-order mark found); save it as UTF-8")
        )
        return None
    if raw.startswith(b"\xef\xbb\xbf"):
        problems.append(Problem(ProblemKind.ENCODING, Severity.WARNING, "UTF-8 byte-order mark at the start (ignored)"))
        raw = raw[3:]
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        problems.append(
            Problem(
                ProblemKind.ENCODING,
                Severity.FATAL,
                f"not valid UTF-8: byte {raw[exc.start]:#04x} at offset {exc.start} (line {line}); save it as UTF-8",
                lines=(line,),
            )
        )
        return None


def _parse_jsonl(text: str, problems: list[Problem]) -> pd.DataFrame | None:
    records: list[dict[str, Any]] = []
    bad_json: list[tuple[int, str]] = []
    not_object: list[int] = []
    lines = text.split("\n")
    ends_with_newline = text.endswith("\n")
    last_content = max((i for i, s in enumerate(lines) if s.strip()), default=-1)
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        lineno = i + 1
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            if i == last_content and not ends_with_newline:
                problems.append(
                    Problem(
                        ProblemKind.TRUNCATED,
                        Severity.ERROR,
                        f"line {lineno} is cut off (no closing newline, {exc.msg} at column {exc.colno}); "
                        "the file looks truncated",
                        lines=(lineno,),
                    )
                )
            else:
                bad_json.append((lineno, f"{exc.msg} at column {exc.colno}"))
            continue
        if not isinstance(obj, dict):
            not_object.append(lineno)
            continue
        obj[_LINE] = lineno
        records.append(obj)
    if bad_json:
        detail = "; ".join(f"line {n}: {msg}" for n, msg in bad_json[:MAX_LISTED])
        more = f"; ... ({len(bad_json) - MAX_LISTED} more)" if len(bad_json) > MAX_LISTED else ""
        problems.append(
            Problem(
                ProblemKind.BAD_JSON,
                Severity.ERROR,
                f"{len(bad_json)} line(s) are not valid JSON and were skipped: {detail}{more}",
                lines=_line_list(n for n, _ in bad_json),
                count=len(bad_json),
            )
        )
    if not_object:
        problems.append(
            Problem(
                ProblemKind.NOT_AN_OBJECT,
                Severity.ERROR,
                f"{len(not_object)} line(s) are JSON but not objects and were skipped: {_lines(not_object)}",
                lines=_line_list(not_object),
                count=len(not_object),
            )
        )
    if not records:
        problems.append(Problem(ProblemKind.EMPTY_FILE, Severity.FATAL, "no prediction rows could be read"))
        return None
    # Columns as the union of keys, in first-seen order; a key absent from a line becomes NaN
    # and is reported per line by the type checks.
    present: dict[str, None] = {}
    for rec in records:
        present.update(dict.fromkeys(rec))
    frame = pd.DataFrame.from_records(records, columns=list(present))
    absent: dict[str, list[int]] = {}
    for rec in records:
        if len(rec) < len(present):  # only lines lacking some key are inspected key by key
            for col in present:
                if col not in rec:
                    absent.setdefault(col, []).append(rec[_LINE])
    frame.attrs["absent_lines"] = absent
    return frame


def _parse_parquet(path: Path, problems: list[Problem]) -> pd.DataFrame | None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path)
    except (pa.ArrowException, OSError, ValueError) as exc:
        problems.append(
            Problem(ProblemKind.UNREADABLE, Severity.FATAL, f"not a readable parquet file (truncated?): {exc}")
        )
        return None
    if table.num_rows == 0:
        problems.append(Problem(ProblemKind.EMPTY_FILE, Severity.FATAL, "the parquet file has no rows"))
        return None
    frame = table.to_pandas()
    if "origin" in frame and len(frame) and frame["origin"].map(lambda v: hasattr(v, "isoformat")).all():
        frame["origin"] = frame["origin"].map(lambda v: v.isoformat()[:10])  # date32 columns are accepted
    frame[_LINE] = np.arange(1, len(frame) + 1)
    return frame


def load_predictions(path: str | Path, *, max_bytes: int = DEFAULT_MAX_BYTES) -> tuple[pd.DataFrame, list[Problem]]:
    """Read a JSONL or parquet prediction file without ever raising on its content.

    Returns the rows whose types are right (canonical columns, plus ``_line``: the source line or
    row number) and every problem found. Checks against an instance are in
    :func:`validate_predictions`.
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
    if suffix == ".parquet" or magic == b"PAR1":
        raw_frame = _parse_parquet(path, problems)
    elif suffix in (".jsonl", ".json", ".ndjson") or suffix == "":
        text = _decode(path.read_bytes(), problems)
        raw_frame = None if text is None else _parse_jsonl(text, problems)
        if text is not None and raw_frame is None and not text.strip():
            problems[:] = [p for p in problems if p.kind is not ProblemKind.EMPTY_FILE]
            problems.append(Problem(ProblemKind.EMPTY_FILE, Severity.FATAL, "file holds only whitespace"))
    else:
        problems.append(
            Problem(
                ProblemKind.UNKNOWN_FORMAT,
                Severity.FATAL,
                f"unknown extension {suffix!r}: use .jsonl or .parquet",
            )
        )
        raw_frame = None
    if raw_frame is None:
        return empty_frame(), problems
    n_read = len(raw_frame) + sum(
        p.count for p in problems if p.kind in (ProblemKind.BAD_JSON, ProblemKind.NOT_AN_OBJECT, ProblemKind.TRUNCATED)
    )
    frame = _check_columns_and_types(raw_frame, problems)
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


# -- column and type checks (vectorised per column) --------------------------------------------


def _is_object(series: pd.Series) -> bool:
    return series.dtype == object


def _is_str(series: pd.Series) -> np.ndarray:
    if _is_object(series):
        return series.map(lambda v: isinstance(v, str)).to_numpy(bool)
    if pd.api.types.is_string_dtype(series.dtype):
        return series.notna().to_numpy(bool)
    return np.zeros(len(series), bool)


def _is_null(series: pd.Series) -> np.ndarray:
    return series.isna().to_numpy(bool)


def _is_number(series: pd.Series) -> np.ndarray:
    if _is_object(series):
        return series.map(
            lambda v: isinstance(v, int | float | np.integer | np.floating) and not isinstance(v, bool | np.bool_)
        ).to_numpy(bool)
    if pd.api.types.is_numeric_dtype(series.dtype) and not pd.api.types.is_bool_dtype(series.dtype):
        return series.notna().to_numpy(bool)
    return np.zeros(len(series), bool)


def _nonempty_str(series: pd.Series) -> np.ndarray:
    ok = _is_str(series).copy()
    if ok.any():
        text = series[ok].astype(str)
        ok[ok] = (text.str.strip().str.len() > 0).to_numpy(bool)
    return ok


def _by_unique(series: pd.Series, predicate: Any) -> np.ndarray:
    """A predicate evaluated once per distinct value (keys like origins repeat a lot)."""
    codes, uniques = pd.factorize(series, use_na_sentinel=True)
    verdict = np.array([bool(predicate(u)) for u in uniques] + [bool(predicate(None))], bool)
    return verdict[codes]


def _is_integral(v: Any) -> bool:
    if isinstance(v, bool | np.bool_):
        return False
    if isinstance(v, int | np.integer):
        return True
    return isinstance(v, float | np.floating) and math.isfinite(v) and float(v).is_integer()


def _is_bool(series: pd.Series) -> np.ndarray:
    if pd.api.types.is_bool_dtype(series.dtype):
        return series.notna().to_numpy(bool)
    if _is_object(series):
        return series.map(lambda v: isinstance(v, bool | np.bool_)).to_numpy(bool)
    return np.zeros(len(series), bool)


def _check_columns_and_types(raw: pd.DataFrame, problems: list[Problem]) -> pd.DataFrame:
    absent_lines: dict[str, list[int]] = raw.attrs.get("absent_lines", {})
    cols = [c for c in raw.columns if c != _LINE]
    unknown = [c for c in cols if c not in ALL_COLUMNS]
    for col in unknown:
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
                f"unknown column {col!r}{hint}; allowed: {', '.join(ALL_COLUMNS)}",
            )
        )
    missing = [c for c in REQUIRED_COLUMNS if c not in raw.columns]
    if missing:
        problems.append(Problem(ProblemKind.MISSING_COLUMN, Severity.FATAL, f"missing column(s): {', '.join(missing)}"))
    if unknown or missing:
        return empty_frame()

    lines = raw[_LINE].to_numpy(np.int64)
    n = len(raw)
    drop = np.zeros(n, bool)
    invalidate: dict[int, str] = {}

    def report(mask: np.ndarray, kind: ProblemKind, what: str, severity: Severity = Severity.ERROR) -> None:
        if mask.any():
            bad = lines[mask].tolist()
            problems.append(
                Problem(
                    kind,
                    severity,
                    f"{len(bad)} row(s) {what}: {_lines(bad)}",
                    lines=_line_list(bad),
                    count=len(bad),
                )
            )

    for col, lines_absent in absent_lines.items():
        if col in REQUIRED_COLUMNS and col not in ("invalid_reason",):
            problems.append(
                Problem(
                    ProblemKind.MISSING_COLUMN,
                    Severity.ERROR,
                    f"{len(lines_absent)} row(s) lack the key {col!r}: {_lines(lines_absent)}",
                    lines=_line_list(lines_absent),
                    count=len(lines_absent),
                )
            )

    # key columns: non-empty strings, known condition, ISO origin
    for col in ("model", "field_id", "manifest_hash"):
        ok = _nonempty_str(raw[col])
        report(~ok, ProblemKind.BAD_TYPE, f"have a missing, empty or non-string {col!r} (dropped)")
        drop |= ~ok
    cond_str = _is_str(raw["condition"])
    report(~cond_str, ProblemKind.BAD_TYPE, "have a non-string 'condition' (dropped)")
    known_cond = _by_unique(raw["condition"], lambda v: isinstance(v, str) and v in _CONDITIONS)
    bad_cond = cond_str & ~known_cond
    if bad_cond.any():
        values = sorted({str(v) for v in raw.loc[bad_cond, "condition"]})
        report(
            bad_cond,
            ProblemKind.UNKNOWN_CONDITION,
            f"have an unknown condition {_listing(values)} (expected A0..A4; dropped)",
        )
    drop |= ~known_cond
    origin_ok = _by_unique(raw["origin"], _is_iso_date)
    report(~origin_ok, ProblemKind.BAD_ORIGIN, "have an origin that is not a YYYY-MM-DD date string (dropped)")
    drop |= ~origin_ok

    # valid flag
    valid_is_bool = _is_bool(raw["valid"])
    report(~valid_is_bool, ProblemKind.BAD_TYPE, "have a 'valid' that is not true/false (dropped)")
    drop |= ~valid_is_bool
    valid = np.zeros(n, bool)
    valid[valid_is_bool] = raw["valid"][valid_is_bool].astype(bool).to_numpy(bool)

    # weights: numbers or null; the weight checks proper live in _check_weights
    weights = np.full((n, len(DIRECTION_KEYS)), np.nan)
    for j, col in enumerate(DIRECTION_KEYS):
        s = raw[col]
        number = _is_number(s)
        null = _is_null(s)
        wrong = ~(number | null)
        report(wrong, ProblemKind.BAD_TYPE, f"have a non-numeric {col} (the unit is made invalid)")
        for i in np.flatnonzero(wrong):
            invalidate.setdefault(int(i), f"{col} is not a number")
        weights[number, j] = s[number].astype(np.float64).to_numpy()

    reason = raw["invalid_reason"]
    reason_ok = _is_str(reason) | _is_null(reason)
    report(~reason_ok, ProblemKind.BAD_TYPE, "have an 'invalid_reason' that is neither a string nor null (set to null)")

    for col in META_COLUMNS:
        if col not in raw:
            continue
        s = raw[col]
        if col in META_STR_COLUMNS:
            ok = _is_str(s)
        elif col in META_INT_COLUMNS:
            ok = s.map(_is_integral).to_numpy(bool)
        else:
            ok = _is_number(s)
        ok = ok | _is_null(s)
        report(~ok, ProblemKind.BAD_TYPE, f"have a {col!r} of the wrong type (set to null)", Severity.WARNING)
        raw = raw.assign(**{col: s.where(ok, None)})

    frame = pd.DataFrame(
        {
            "model": raw["model"].to_numpy(object),
            "condition": raw["condition"].to_numpy(object),
            "field_id": raw["field_id"].to_numpy(object),
            "origin": raw["origin"].map(lambda v: v if isinstance(v, str) else "").to_numpy(object),
            **{col: weights[:, j] for j, col in enumerate(DIRECTION_KEYS)},
            "valid": valid,
            "invalid_reason": reason.where(reason_ok & ~_is_null(reason), None).to_numpy(object),
            "manifest_hash": raw["manifest_hash"].to_numpy(object),
            **{col: raw[col].to_numpy(object) for col in META_COLUMNS if col in raw},
            _LINE: lines,
        }
    )
    for i, why in invalidate.items():
        if frame.at[i, "valid"]:
            frame.at[i, "valid"] = False
            frame.at[i, "invalid_reason"] = f"validator: {why}"
    return _canonical(frame.loc[~drop])


def _is_iso_date(value: Any) -> bool:
    if not isinstance(value, str) or len(value) != 10:
        return False
    try:
        import datetime as dt

        return dt.date.fromisoformat(value).isoformat() == value
    except ValueError:
        return False


# -- checks against an instance ----------------------------------------------------------------


def _check_weights(frame: pd.DataFrame, problems: list[Problem]) -> pd.DataFrame:
    """Valid rows must carry eight finite nonnegative weights with a positive total."""
    if not len(frame):
        return frame
    w = frame[list(DIRECTION_KEYS)].to_numpy(np.float64)
    valid = frame["valid"].to_numpy(bool)
    lines = frame[_LINE].to_numpy(np.int64)
    present = ~np.isnan(w)
    n_present = present.sum(axis=1)
    checks: list[tuple[np.ndarray, str]] = []
    wrong_count = valid & (n_present < len(DIRECTION_KEYS))
    checks.append((wrong_count, "claim valid but give fewer than eight weights (null or absent D0..D7)"))
    finite = np.where(present, np.isfinite(w), True).all(axis=1)
    checks.append((valid & ~wrong_count & ~finite, "claim valid but have an infinite weight"))
    negative = np.where(present & np.isfinite(w), w < 0, False).any(axis=1)
    checks.append((valid & ~wrong_count & finite & negative, "claim valid but have a negative weight"))
    total = np.where(present & np.isfinite(w), w, 0.0).sum(axis=1)
    zero = valid & ~wrong_count & finite & ~negative & ~(total > 0)
    checks.append((zero, "claim valid but all weights are zero"))
    frame = frame.copy()
    for mask, what in checks:
        if not mask.any():
            continue
        bad = lines[mask].tolist()
        problems.append(
            Problem(
                ProblemKind.BAD_WEIGHTS,
                Severity.ERROR,
                f"{len(bad)} row(s) {what}; kept as invalid units: {_lines(bad)}",
                lines=_line_list(bad),
                count=len(bad),
            )
        )
        frame.loc[mask, "valid"] = False
        frame.loc[mask, "invalid_reason"] = f"validator: {what.removeprefix('claim valid but ')}"
    return frame


def _episode_table(inst: Instance, split: str | None) -> pd.DataFrame:
    eps = inst.episodes[["field_id", "origin", "split"]].drop_duplicates(["field_id", "origin"])
    eps = eps.assign(origin=eps["origin"].astype(str).str[:10])
    if split is not None:
        eps = eps[eps["split"] == split]
    return eps.sort_values(["field_id", "origin"]).reset_index(drop=True)


def validate_predictions(
    df_or_path: pd.DataFrame | str | Path,
    inst: Instance,
    *,
    expected_conditions: Iterable[Condition | str] | None = None,
    split: str | None = None,
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> ValidationReport:
    """Validate a prediction file (or an in-memory frame) against a built instance.

    Every problem is named: file-level ones (size, encoding, truncation, bad JSON lines, columns,
    types), unknown conditions, conditions outside ``expected_conditions``, unknown episodes,
    duplicate keys, bad weights on rows that claim to be valid, a manifest hash other than the
    instance's, and missing episodes (counted and listed per model and condition; with ``split``
    only that split's episodes are expected). Never raises on bad content.
    """
    if isinstance(df_or_path, pd.DataFrame):
        source = "<frame>"
        raw = df_or_path.copy()
        if _LINE not in raw:
            raw[_LINE] = np.arange(1, len(raw) + 1)
        raw[_LINE] = raw[_LINE].astype(np.int64)
        problems: list[Problem] = []
        if not len(raw):
            problems.append(Problem(ProblemKind.EMPTY_FILE, Severity.FATAL, "the frame has no rows"))
            frame = empty_frame()
        else:
            frame = _check_columns_and_types(raw, problems)
        n_read = len(raw)
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
        listed = ", ".join(f"{h[:12]}... ({c} rows)" for h, c in seen.items())
        problems.append(
            Problem(
                ProblemKind.MANIFEST_HASH,
                Severity.FATAL,
                f"{int(wrong_hash.sum())} row(s) were built against another instance: {listed}; "
                f"this instance is {inst.manifest_hash[:12]}... (rebuild the predictions against it)",
                lines=_line_list(lines[wrong_hash][:1000]),
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
            bad = lines[unexpected].tolist()
            values = sorted(set(frame.loc[unexpected, "condition"]))
            problems.append(
                Problem(
                    ProblemKind.UNEXPECTED_CONDITION,
                    Severity.ERROR,
                    f"{len(bad)} row(s) have condition {_listing(values)}, not among the expected "
                    f"{', '.join(sorted(expected))} (dropped): {_lines(bad)}",
                    lines=_line_list(bad),
                    count=len(bad),
                )
            )
            keep &= ~unexpected
    else:
        expected = None

    # unknown episodes
    all_eps = _episode_table(inst, None)
    known_keys = set(zip(all_eps["field_id"], all_eps["origin"], strict=True))
    keys = list(zip(frame["field_id"], frame["origin"], strict=True))
    unknown = np.array([k not in known_keys for k in keys], bool)
    if unknown.any():
        ids = sorted({f"{f}@{o}" for (f, o), u in zip(keys, unknown, strict=True) if u})
        bad = lines[unknown].tolist()
        problems.append(
            Problem(
                ProblemKind.UNKNOWN_EPISODE,
                Severity.ERROR,
                f"{len(bad)} row(s) name {len(ids)} episode(s) the instance does not have (dropped): "
                f"{_listing(ids)}; {_lines(bad)}",
                lines=_line_list(bad),
                count=len(bad),
            )
        )
        keep &= ~unknown

    frame = frame.loc[keep]
    lines = frame[_LINE].to_numpy(np.int64)

    # duplicates: every copy is dropped
    dup = frame.duplicated(list(KEY_COLUMNS), keep=False).to_numpy(bool)
    if dup.any():
        groups = frame.loc[dup].groupby(list(KEY_COLUMNS), sort=True)[_LINE].apply(list)
        detail = [f"{m}/{c}/{f}@{o} (lines {', '.join(map(str, ls))})" for (m, c, f, o), ls in groups.items()]
        problems.append(
            Problem(
                ProblemKind.DUPLICATE,
                Severity.ERROR,
                f"{len(groups)} key(s) appear more than once; every copy was dropped and the episode counts as "
                f"missing: {_listing(detail)}",
                lines=_line_list(lines[dup]),
                count=len(groups),
            )
        )
        frame = frame.loc[~dup]

    frame = _check_weights(frame.reset_index(drop=True), problems)

    # missing episodes, per (model, condition)
    expected_eps = _episode_table(inst, split)
    expected_ids = (expected_eps["field_id"] + "@" + expected_eps["origin"]).to_numpy(object)
    have_ids = (frame["field_id"] + "@" + frame["origin"]).to_numpy(object)
    missing: dict[tuple[str, str], tuple[str, ...]] = {}
    models = sorted(set(frame["model"]))
    for model in models:
        in_model = (frame["model"] == model).to_numpy(bool)
        conds = sorted(expected) if expected is not None else sorted(set(frame.loc[in_model, "condition"]))
        for cond in conds:
            mask = in_model & (frame["condition"] == cond).to_numpy(bool)
            have = set(have_ids[mask].tolist())  # sets: np.setdiff1d on object arrays is quadratic
            lacking = sorted(i for i in expected_ids.tolist() if i not in have)
            if lacking:
                missing[(model, cond)] = tuple(lacking)
    for (model, cond), ids in missing.items():
        problems.append(
            Problem(
                ProblemKind.MISSING_EPISODES,
                Severity.WARNING,
                f"{model} / {cond}: {len(ids)} of {len(expected_ids)} expected episode(s) missing "
                f"(not guessed; excluded from its scores): {_listing(list(ids))}",
                count=len(ids),
            )
        )
    return ValidationReport(source, tuple(problems), frame.reset_index(drop=True), n_read, missing)


# -- baselines as ordinary prediction files --------------------------------------------------

BASELINE_PREFIX = "baseline/"
UNIFORM_RANDOM = "uniform_random"


def baseline_predictions(
    inst: Instance,
    *,
    tune_dev: bool = False,
    seed: int | None = None,
    policy: str = "canonical",
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """The statistical baselines (SPEC 3.11) as a prediction frame, plus their ledger.

    Models ``baseline/recent``, ``baseline/ewma``, ``baseline/arima``, ``baseline/holt``,
    ``baseline/ridge_var`` and ``baseline/uniform_random`` (weights drawn uniformly on the
    simplex, Dirichlet(1), from ``seed``; the spec's ``seed`` by default), all under condition A0
    so they join the leaderboard, one row per episode of ``policy`` (all splits). With
    ``tune_dev`` the ARIMA, Holt and ridge-VAR parameters are tuned on Dev episodes only; the
    ledger records the values used, the grids and the Dev scores.
    """
    from rap_benchmark.evaluation.scoring.baselines import BASELINE_NAMES, baseline_forecasts, tune_baselines

    spec = inst.spec
    eps = inst.episodes[inst.episodes["policy"].astype(str) == policy]
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
