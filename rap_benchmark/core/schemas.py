"""One Arrow schema per artifact table: the contract between the stage that writes a table and
every stage that reads it.

Each schema names the table's columns in file order, their Arrow types and whether they may hold
nulls. :func:`conform` checks a frame against its schema before it is written (the writer takes
the schema, see :func:`rap_benchmark.core.artifacts.write_parquet`) and :func:`check_table`
checks a table read back from disk; both raise :class:`SchemaError` naming the file and column.

``nullable=False`` is a checked contract, not a storage detail: parquet files keep every column
``optional`` (the physical layout of benchmark v1 artifacts), and the checks count the nulls.

Column groups other modules need are derived from the schemas here, never retyped:
:data:`EPISODE_TARGETS` (what an agent must never see), :data:`ASSIGNMENT_LABELS` (the
instrument's labels, from which every target is counted) and the prediction file's key, weight
and metadata columns.
"""

from __future__ import annotations

import pandas as pd
import pyarrow as pa

from rap_benchmark.core.errors import UserError
from rap_benchmark.core.records import DIRECTION_KEYS


class SchemaError(UserError, ValueError):
    """A table does not match its schema; the message names the file and the column (on load, a
    malformed or hand-edited artifact: the CLI reports it as one line)."""


def _f(name: str, typ: pa.DataType, nullable: bool = False) -> pa.Field:
    return pa.field(name, typ, nullable=nullable)


_STR = pa.string()
_VEC = pa.list_(pa.float64())  # a composition or count vector over D0..D7

PAPERS = pa.schema(
    [
        _f("arxiv_id", _STR),
        _f("date", _STR),  # v1 submission date, YYYY-MM-DD
        _f("title", _STR),
        _f("abstract", _STR),
        _f("categories", pa.list_(_STR)),
        _f("authors", pa.list_(_STR)),
    ]
)
"""``papers.parquet``: one row per paper, sorted by (date, arxiv_id)."""

ASSIGNMENTS = pa.schema(
    [
        _f("arxiv_id", _STR),
        _f("field_id", _STR),
        _f("date", _STR),  # the paper's v1 date, denormalised
        _f("primary", _STR),  # D0..D7 or "other"
        _f("secondary", _STR, nullable=True),  # D0..D7 or null
        _f("type", _STR),  # AssignmentType
    ]
)
"""``assignments.parquet``: one row per paper-field membership, sorted by (field_id, date, arxiv_id)."""

BLOCKS = pa.schema([_f("field_id", _STR), _f("block_id", _STR), _f("split", _STR)])
"""``blocks.parquet``: each field's dependency block and its split (``Split``)."""

EPISODES = pa.schema(
    [
        _f("field_id", _STR),
        _f("origin", _STR),
        _f("policy", _STR),  # Policy, in enum order within (field_id, origin)
        _f("block_id", _STR),
        _f("split", _STR),
        _f("x", _VEC, nullable=True),  # null when the window holds no counted mass
        _f("y", _VEC, nullable=True),
        _f("history", pa.list_(_VEC)),  # three windows, oldest first, each a composition or null
        _f("x_counts", _VEC),
        _f("y_counts", _VEC),
        _f("history_counts", pa.list_(_VEC)),
        _f("n_x", pa.float64()),
        _f("n_y", pa.float64()),
        _f("flags", pa.list_(_STR)),
    ]
)
"""``episodes.parquet``: one row per (field, origin, policy)."""

SEARCH_MANIFEST = pa.schema(
    [
        _f("field_id", _STR),
        _f("origin", _STR),
        _f("regime", _STR),  # Regime
        _f("start", _STR),
        _f("end", _STR),  # exclusive, = origin
        _f("n_papers", pa.int64()),
        _f("shard_hash", _STR),
    ]
)
"""``search_manifest.parquet``: one row per search universe (field, origin, regime)."""

TRUTH = pa.schema([_f("arxiv_id", _STR), _f("field_id", _STR), _f("true_direction", _STR)])
"""``truth.parquet`` (synthetic instances only): the generator's latent label per membership."""

PARALLEL = pa.schema([_f("arxiv_id", _STR), _f("field_id", _STR), _f("slot", pa.int64())])
"""``parallel.parquet`` (instances built by the compact construction): the parallel instrument's
direction slot (0..7, in its own draft's order) per membership of the fields that have a second,
independently drafted codebook."""

MODEL_LABELS = pa.schema(
    [
        _f("arxiv_id", _STR),
        _f("field_id", _STR),
        _f("draft", _STR),  # "A" (the frozen codebook's) or "B" (the parallel instrument's)
        _f("primary", _STR),
        _f("secondary", _STR, nullable=True),
        _f("type", _STR),  # an assignment type, or "not_in_field"
    ]
)
"""``model_labels.parquet`` (instances built by the compact construction): every label the model
gave, by draft: the labels the distilled labellers were fitted on."""

ARTIFACT_TABLES: dict[str, pa.Schema] = {
    "papers": PAPERS,
    "assignments": ASSIGNMENTS,
    "blocks": BLOCKS,
    "episodes": EPISODES,
    "search_manifest": SEARCH_MANIFEST,
    "truth": TRUTH,
    "parallel": PARALLEL,
    "model_labels": MODEL_LABELS,
}
"""Every parquet table an instance folder may hold, by file stem (``truth``, ``parallel`` and
``model_labels`` are optional)."""

EPISODE_TARGETS: tuple[str, ...] = ("y", "y_counts", "n_y")
"""Episode columns computed from the target window [T, T+w): withheld from agents."""

EPISODE_TARGET_FLAGS: tuple[str, ...] = ("y_empty",)
"""Episode flags that reveal something about the target window's content."""

EPISODE_PENDING_FLAG = "y_pending"
"""The flag of an episode whose target window is not covered by the data yet (``rap extend``):
its ``y`` does not exist; it takes sealed forecasts only, scored after ``rap resolve``."""


def pending_mask(episodes: pd.DataFrame) -> pd.Series:
    """Per episode row: True when its target window is not covered yet (flag ``y_pending``)."""
    if "flags" not in episodes:
        return pd.Series(False, index=episodes.index)
    return episodes["flags"].map(lambda fl: fl is not None and EPISODE_PENDING_FLAG in list(fl)).astype(bool)


ASSIGNMENT_LABELS: tuple[str, ...] = ("primary", "secondary", "type")
"""The instrument's labels: every composition (targets included) is counted from them."""

MEMBERSHIPS = pa.schema([f for f in ASSIGNMENTS if f.name not in ASSIGNMENT_LABELS])
"""Which papers belong to which field (and when), without the labels: what search needs."""

PUBLIC_EPISODES = pa.schema([f for f in EPISODES if f.name not in EPISODE_TARGETS])
"""The episode table an agent may see (flags then exclude :data:`EPISODE_TARGET_FLAGS`)."""

PREDICTION_KEY: tuple[str, ...] = ("model", "condition", "field_id", "origin")

PREDICTIONS = pa.schema(
    [
        _f("model", _STR),
        _f("condition", _STR),  # Condition
        _f("field_id", _STR),
        _f("origin", _STR),
        *(_f(k, pa.float64(), nullable=True) for k in DIRECTION_KEYS),  # null when the unit is invalid
        _f("valid", pa.bool_()),
        _f("invalid_reason", _STR, nullable=True),
        _f("manifest_hash", _STR, nullable=True),
        # optional run metadata: a file may leave any of these out
        _f("attempts", pa.int64(), nullable=True),
        _f("prompt_tokens", pa.int64(), nullable=True),
        _f("completion_tokens", pa.int64(), nullable=True),
        _f("n_search_calls", pa.int64(), nullable=True),
        _f("cost_usd", pa.float64(), nullable=True),
        _f("wall_s", pa.float64(), nullable=True),
        _f("response_model", _STR, nullable=True),
        _f("invalid_detail", _STR, nullable=True),  # in words; invalid_reason holds the InvalidReason value
    ]
)
"""A prediction file (JSONL or parquet): one row per (model, condition, field_id, origin).
The columns after ``manifest_hash`` are optional; see :data:`PREDICTION_REQUIRED`."""

PREDICTION_REQUIRED: tuple[str, ...] = tuple(PREDICTIONS.names[: PREDICTIONS.get_field_index("manifest_hash") + 1])
PREDICTION_META: tuple[str, ...] = tuple(PREDICTIONS.names[len(PREDICTION_REQUIRED) :])


def columns_of(schema: pa.Schema, typ: pa.DataType, names: tuple[str, ...] | None = None) -> tuple[str, ...]:
    """The columns of ``schema`` (restricted to ``names``) whose type is ``typ``, in schema order."""
    return tuple(f.name for f in schema if f.type.equals(typ) and (names is None or f.name in names))


def select(schema: pa.Schema, names: list[str] | tuple[str, ...]) -> pa.Schema:
    """The sub-schema of ``names`` in schema order; an unknown name raises :class:`SchemaError`."""
    unknown = [n for n in names if schema.get_field_index(n) < 0]
    if unknown:
        raise SchemaError(f"unknown columns: {', '.join(unknown)} (allowed: {', '.join(schema.names)})")
    return pa.schema([f for f in schema if f.name in set(names)])


def _check_nulls(table: pa.Table, schema: pa.Schema, where: str) -> None:
    for f in schema:
        if not f.nullable:
            n = table.column(f.name).null_count
            if n:
                raise SchemaError(f"{where}: column {f.name!r} has {n} null value(s) but may not be null")


def _check_names(got: list[str], schema: pa.Schema, where: str) -> None:
    want = schema.names
    if got == want:
        return
    missing = [c for c in want if c not in got]
    extra = [c for c in got if c not in want]
    if missing:
        raise SchemaError(f"{where}: missing column(s) {', '.join(map(repr, missing))}")
    if extra:
        raise SchemaError(f"{where}: unexpected column(s) {', '.join(map(repr, extra))}")
    raise SchemaError(f"{where}: columns out of order: {got} (expected {want})")


def conform(frame: pd.DataFrame, schema: pa.Schema, *, where: str) -> pa.Table:
    """``frame`` as an Arrow table of ``schema``: exactly its columns in its order, each converted
    to its type, no null where the schema forbids one. Raises :class:`SchemaError` otherwise."""
    _check_names([str(c) for c in frame.columns], schema, where)
    arrays = []
    for f in schema:
        column = frame[f.name] if len(frame) else []  # an empty column's pandas dtype says nothing
        try:
            arrays.append(pa.array(column, type=f.type, from_pandas=True))
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, TypeError, ValueError) as exc:
            raise SchemaError(f"{where}: column {f.name!r} is not {f.type}: {exc}") from exc
    stored = pa.schema([f.with_nullable(True) for f in schema])  # the v1 layout; nulls are counted instead
    table = pa.Table.from_arrays(arrays, schema=stored)
    _check_nulls(table, schema, where)
    return table


def check_table(table: pa.Table, schema: pa.Schema, *, where: str) -> None:
    """Check a table read from disk: names in order, each column's type, nulls. Raises
    :class:`SchemaError` naming the first mismatch."""
    _check_names(table.column_names, schema, where)
    for f in schema:
        got = table.schema.field(f.name).type
        if not got.equals(f.type):
            raise SchemaError(f"{where}: column {f.name!r} is {got}, expected {f.type}")
    _check_nulls(table, schema, where)
