"""Writing a prediction frame as JSONL or parquet, deterministically and atomically."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from rap_benchmark.core.canonical import to_plain
from rap_benchmark.core.fsio import atomic_open
from rap_benchmark.core.schemas import PREDICTIONS, select
from rap_benchmark.evaluation.predictions.problems import (
    ALL_COLUMNS,
    KEY_COLUMNS,
    LINE,
    META_INT_COLUMNS,
    REQUIRED_COLUMNS,
    canonical,
)


def write_predictions(df: pd.DataFrame, path: str | Path) -> Path:
    """Write a prediction frame as JSONL (``.jsonl``) or parquet (``.parquet``), deterministically.

    Rows are sorted by (model, condition, field_id, origin); columns are the required ones then
    any known metadata columns present. Unknown columns are refused. The file is replaced
    atomically (:mod:`rap_benchmark.core.fsio`).
    """
    path = Path(path)
    unknown = [c for c in df.columns if c not in ALL_COLUMNS and c != LINE]
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

        write_parquet(path, canonical(out), select(PREDICTIONS, cols))
        return path
    if path.suffix.lower() != ".jsonl":
        raise ValueError(f"prediction files are .jsonl or .parquet, got {path.name}")
    with atomic_open(path) as fh:  # a kill mid-write leaves the old file or none, never a cut one
        for rec in out.to_dict(orient="records"):
            row = {col: to_plain(rec[col]) for col in cols}  # NaN as null, numpy scalars as Python ones
            row.update((col, int(row[col])) for col in META_INT_COLUMNS if row.get(col) is not None)
            fh.write(json.dumps(row, ensure_ascii=False, allow_nan=False) + "\n")
    return path
