"""The Arrow schemas are the artifact tables' contract: checked on write and on load."""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from rap_benchmark.core.artifacts import load_instance, write_parquet
from rap_benchmark.core.schemas import (
    ARTIFACT_TABLES,
    EPISODE_TARGETS,
    EPISODES,
    PREDICTION_META,
    PREDICTION_REQUIRED,
    PREDICTIONS,
    SchemaError,
    check_table,
    conform,
)
from rap_benchmark.core.sums import write_sums


def test_every_table_of_a_built_instance_matches_its_schema(mini_dir: Path) -> None:
    from rap_benchmark.core.artifacts import OPTIONAL_TABLES

    for name, schema in ARTIFACT_TABLES.items():
        path = mini_dir / f"{name}.parquet"
        if name in OPTIONAL_TABLES and name != "truth" and not path.exists():
            continue  # the compact construction's tables (tests/test_llm_batch.py builds one)
        check_table(pq.read_table(path), schema, where=name)


def test_targets_and_prediction_groups_come_from_the_schemas() -> None:
    assert set(EPISODE_TARGETS) <= set(EPISODES.names)
    assert PREDICTION_REQUIRED[-1] == "manifest_hash" and PREDICTION_META[0] == "attempts"
    assert (*PREDICTION_REQUIRED, *PREDICTION_META) == tuple(PREDICTIONS.names)


def _tampered(mini_dir: Path, tmp_path: Path, name: str, frame: pd.DataFrame) -> Path:
    root = tmp_path / "inst"
    shutil.copytree(mini_dir, root)
    write_parquet(root / f"{name}.parquet", frame, None)
    write_sums(root)  # hashes re-recorded: only the schema check can catch the change
    return root


def test_load_names_file_and_column_of_a_wrong_type(mini_dir: Path, tmp_path: Path) -> None:
    frame = pd.read_parquet(mini_dir / "search_manifest.parquet")
    frame["n_papers"] = frame["n_papers"].astype(str)
    root = _tampered(mini_dir, tmp_path, "search_manifest", frame)
    with pytest.raises(SchemaError, match=r"search_manifest\.parquet: column 'n_papers' is string, expected int64"):
        load_instance(root)


def test_load_names_a_missing_column(mini_dir: Path, tmp_path: Path) -> None:
    frame = pd.read_parquet(mini_dir / "episodes.parquet").drop(columns=["n_y"])
    root = _tampered(mini_dir, tmp_path, "episodes", frame)
    with pytest.raises(SchemaError, match=r"episodes\.parquet: missing column\(s\) 'n_y'"):
        load_instance(root)


def test_load_refuses_nulls_where_the_schema_forbids_them(mini_dir: Path, tmp_path: Path) -> None:
    frame = pd.read_parquet(mini_dir / "blocks.parquet")
    frame.loc[0, "split"] = None
    root = _tampered(mini_dir, tmp_path, "blocks", frame)
    with pytest.raises(SchemaError, match=r"blocks\.parquet: column 'split' has 1 null value"):
        load_instance(root)


def test_load_refuses_an_unknown_table(mini_dir: Path, tmp_path: Path) -> None:
    root = _tampered(mini_dir, tmp_path, "extra", pd.DataFrame({"a": [1]}))
    with pytest.raises(SchemaError, match=r"unknown artifact table\(s\) extra\.parquet"):
        load_instance(root)


def test_write_checks_types_names_and_nulls(tmp_path: Path) -> None:
    blocks = ARTIFACT_TABLES["blocks"]
    with pytest.raises(SchemaError, match=r"b\.parquet: unexpected column\(s\) 'x'"):
        write_parquet(
            tmp_path / "b.parquet",
            pd.DataFrame({"field_id": ["f"], "block_id": ["b"], "split": ["dev"], "x": [1]}),
            blocks,
        )
    with pytest.raises(SchemaError, match=r"b\.parquet: column 'block_id' has 1 null"):
        write_parquet(
            tmp_path / "b.parquet", pd.DataFrame({"field_id": ["f"], "block_id": [None], "split": ["dev"]}), blocks
        )
    with pytest.raises(SchemaError, match=r"column 'n_papers' is not int64"):
        conform(
            pd.DataFrame({c: ["x"] for c in ARTIFACT_TABLES["search_manifest"].names}),
            ARTIFACT_TABLES["search_manifest"],
            where="m",
        )
    assert not (tmp_path / "b.parquet").exists()


def test_written_files_keep_the_v1_physical_layout(tmp_path: Path) -> None:
    """Every column stays parquet-optional (what benchmark v1 files hold), so bytes are unchanged."""
    frame = pd.DataFrame({"field_id": ["f"], "block_id": ["b"], "split": ["dev"]})
    write_parquet(tmp_path / "a.parquet", frame, ARTIFACT_TABLES["blocks"])
    write_parquet(tmp_path / "b.parquet", frame, None)
    assert (tmp_path / "a.parquet").read_bytes() == (tmp_path / "b.parquet").read_bytes()
    assert all(f.nullable for f in pq.read_schema(tmp_path / "a.parquet"))
    assert pa.types.is_string(pq.read_schema(tmp_path / "a.parquet").field("split").type)
