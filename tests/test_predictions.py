"""Prediction files: round trips, and a corpus of bad files each named by a clear problem."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rap_benchmark.core.artifacts import Instance
from rap_benchmark.core.records import DIRECTION_KEYS
from rap_benchmark.core.spec import mini_spec
from rap_benchmark.evaluation.predictions import (
    REQUIRED_COLUMNS,
    PredictionFileError,
    Problem,
    ProblemKind,
    Severity,
    ValidationReport,
    load_predictions,
    read_predictions,
    validate_predictions,
    write_predictions,
)

HASH = "a" * 64
FIELDS = ("f00", "f01", "f02")
ORIGINS = ("2024-01-01", "2024-07-01")


def of_kind(report: ValidationReport, kind: ProblemKind) -> list[Problem]:
    """The report's problems of one kind."""
    return [p for p in report.problems if p.kind is kind]


def _instance() -> Instance:
    """Just what the validator reads: the episode keys, their split and the manifest hash."""
    rows = [
        {"field_id": f, "origin": o, "policy": p, "split": "dev" if f == "f00" else "test"}
        for f in FIELDS
        for o in ORIGINS
        for p in ("canonical", "single_only")
    ]
    empty = pd.DataFrame()
    return Instance(
        root=Path("."),
        spec=mini_spec(),
        ledger={},
        papers=empty,
        codebooks={},
        assignments=empty,
        blocks=empty,
        episodes=pd.DataFrame(rows),
        search_manifest=empty,
        manifest_hash=HASH,
    )


def _row(field_id: str = "f01", origin: str = "2024-01-01", **over: object) -> dict[str, object]:
    row: dict[str, object] = {
        "model": "m",
        "condition": "A1",
        "field_id": field_id,
        "origin": origin,
        **{k: 12.5 for k in DIRECTION_KEYS},
        "valid": True,
        "invalid_reason": None,
        "manifest_hash": HASH,
    }
    row.update(over)
    return row


def _all_rows(**over: object) -> list[dict[str, object]]:
    return [_row(f, o, **over) for f in FIELDS for o in ORIGINS]


def _jsonl(path: Path, rows: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _kinds(report) -> set[ProblemKind]:
    return {p.kind for p in report.problems}


@pytest.mark.parametrize("suffix", [".jsonl", ".parquet"])
def test_round_trip_and_clean_file_validates(tmp_path: Path, suffix: str) -> None:
    rows = _all_rows(attempts=1, wall_s=0.5, response_model="m-2025")
    rows[0].update(valid=False, invalid_reason="no json", **{k: None for k in DIRECTION_KEYS})
    df = pd.DataFrame(rows)
    path = write_predictions(df, tmp_path / f"p{suffix}")
    back = read_predictions(path)
    assert list(back.columns[: len(REQUIRED_COLUMNS)]) == list(REQUIRED_COLUMNS)
    assert len(back) == len(rows)
    assert back["valid"].sum() == len(rows) - 1
    assert np.isnan(back.loc[~back["valid"], list(DIRECTION_KEYS)].to_numpy()).all()
    report = validate_predictions(path, _instance())
    assert report.ok and report.scorable, report.summary()
    assert report.problems == ()
    assert report.n_invalid_units == 1
    assert len(report.frame) == len(rows)
    # writing is deterministic
    again = write_predictions(back, tmp_path / f"q{suffix}")
    assert again.read_bytes() == path.read_bytes()


def test_frame_input_validates_like_a_file() -> None:
    report = validate_predictions(pd.DataFrame(_all_rows()), _instance())
    assert report.ok, report.summary()
    assert len(report.frame) == len(FIELDS) * len(ORIGINS)


BAD_FILES: dict[str, tuple[object, ProblemKind, str]] = {
    # name: (content: bytes or rows, expected problem kind, a phrase the message must contain)
    "empty": (b"", ProblemKind.EMPTY_FILE, "empty"),
    "whitespace": (b"\n \n", ProblemKind.EMPTY_FILE, "whitespace"),
    "utf16": ("\ufeff" + json.dumps(_row()) + "\n", ProblemKind.ENCODING, "UTF-16"),
    "latin1": (
        json.dumps(_row(model="caf\u00e9"), ensure_ascii=False).encode("latin-1") + b"\n",
        ProblemKind.ENCODING,
        "UTF-8",
    ),
    "bad_json_line": (None, ProblemKind.BAD_JSON, "line 3"),
    "truncated": (None, ProblemKind.TRUNCATED, "truncated"),
    "not_object": (b"[1, 2, 3]\n" + json.dumps(_row()).encode() + b"\n", ProblemKind.NOT_AN_OBJECT, "line 1"),
    "unknown_column": ([{**_row(), "d8": 1.0}], ProblemKind.UNKNOWN_COLUMN, "'d8'"),
    "weights_list": (
        [{**{k: v for k, v in _row().items() if k not in DIRECTION_KEYS}, "weights": [1] * 8}],
        ProblemKind.UNKNOWN_COLUMN,
        "D0..D7",
    ),
    "missing_column": (
        [{k: v for k, v in _row().items() if k != "manifest_hash"}],
        ProblemKind.MISSING_COLUMN,
        "manifest_hash",
    ),
    "unknown_condition": ([_row(condition="A9"), _row(field_id="f02")], ProblemKind.UNKNOWN_CONDITION, "A9"),
    "bad_origin": ([_row(origin="2024/01/01"), _row(field_id="f02")], ProblemKind.BAD_ORIGIN, "YYYY-MM-DD"),
    "bad_type_valid": ([_row(valid="yes"), _row(field_id="f02")], ProblemKind.BAD_TYPE, "'valid'"),
    "string_weight": ([_row(D3="12.5"), _row(field_id="f02")], ProblemKind.BAD_TYPE, "D3"),
    "unknown_episode": ([_row(field_id="f99"), _row()], ProblemKind.UNKNOWN_EPISODE, "f99@2024-01-01"),
    "unknown_origin": ([_row(origin="2023-01-01"), _row()], ProblemKind.UNKNOWN_EPISODE, "f01@2023-01-01"),
    "duplicate": (
        [_row(), _row(D0=50.0), _row(field_id="f02")],
        ProblemKind.DUPLICATE,
        "m/A1/f01@2024-01-01 (lines 1, 2)",
    ),
    "nan_weight": (None, ProblemKind.NON_STANDARD_JSON, "NaN"),
    "inf_weight": (None, ProblemKind.NON_STANDARD_JSON, "Infinity"),
    "negative_weight": ([_row(D2=-1.0), _row(field_id="f02")], ProblemKind.BAD_WEIGHTS, "negative"),
    "all_zero": (
        [_row(**{k: 0.0 for k in DIRECTION_KEYS}), _row(field_id="f02")],
        ProblemKind.BAD_WEIGHTS,
        "all weights are zero",
    ),
    "seven_weights": (
        [{k: v for k, v in _row().items() if k != "D7"}, _row(field_id="f02")],
        ProblemKind.MISSING_COLUMN,
        "'D7'",
    ),
    "wrong_hash": ([_row(manifest_hash="b" * 64)], ProblemKind.MANIFEST_HASH, "another instance"),
    "empty_model": ([_row(model=""), _row(field_id="f02")], ProblemKind.BAD_TYPE, "'model'"),
}


INSTANCE_CHECKS = {
    ProblemKind.UNKNOWN_EPISODE,
    ProblemKind.DUPLICATE,
    ProblemKind.BAD_WEIGHTS,
    ProblemKind.MANIFEST_HASH,
}


def _write_bad(tmp_path: Path, name: str) -> Path:
    content, _, _ = BAD_FILES[name]
    path = tmp_path / f"{name}.jsonl"
    if name == "bad_json_line":
        lines = [json.dumps(_row(f, o)) for f in FIELDS for o in ORIGINS]
        lines[2] = lines[2][:-5] + "}}}"
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    elif name == "truncated":
        text = "".join(json.dumps(r) + "\n" for r in _all_rows())
        path.write_text(text[:-40], encoding="utf-8")
    elif name in ("nan_weight", "inf_weight"):
        bad = "NaN" if name == "nan_weight" else "Infinity"
        text = json.dumps(_row()).replace('"D4": 12.5', f'"D4": {bad}')
        path.write_text(text + "\n" + json.dumps(_row(field_id="f02")) + "\n", encoding="utf-8")
    elif isinstance(content, bytes):
        path.write_bytes(content)
    elif isinstance(content, str):
        path.write_text(content, encoding="utf-16")
    else:
        _jsonl(path, content)  # type: ignore[arg-type]
    return path


@pytest.mark.parametrize("name", sorted(BAD_FILES))
def test_bad_file_corpus_names_each_problem(tmp_path: Path, name: str) -> None:
    path = _write_bad(tmp_path, name)
    _, kind, phrase = BAD_FILES[name]
    report = validate_predictions(path, _instance())  # never raises
    assert not report.ok
    matching = of_kind(report, kind)
    assert matching, f"{name}: expected {kind}, got {report.summary()}"
    assert any(phrase in p.message for p in matching), f"{name}: {phrase!r} not in {report.summary()}"
    assert all(p.message for p in report.problems)
    if kind not in INSTANCE_CHECKS:
        with pytest.raises(PredictionFileError, match=kind.value):
            read_predictions(path)  # the strict reader refuses, naming the same problem


def test_bad_weights_become_invalid_units_not_dropped(tmp_path: Path) -> None:
    rows = _all_rows()
    rows[1]["D2"] = -3.0
    report = validate_predictions(_jsonl(tmp_path / "w.jsonl", rows), _instance())
    assert report.scorable and not report.ok
    assert len(report.frame) == len(rows)
    bad = report.frame[~report.frame["valid"]]
    assert len(bad) == 1 and bad["invalid_reason"].iloc[0].startswith("validator: ")
    assert of_kind(report, ProblemKind.BAD_WEIGHTS)[0].lines == (2,)


def test_duplicates_are_all_dropped_and_counted_missing(tmp_path: Path) -> None:
    rows = [*_all_rows(), _row("f02", "2024-07-01", D0=90.0)]
    report = validate_predictions(_jsonl(tmp_path / "d.jsonl", rows), _instance())
    assert ("f02", "2024-07-01") not in set(zip(report.frame["field_id"], report.frame["origin"], strict=True))
    assert report.missing[("m", "A1")] == ("f02@2024-07-01",)


def test_missing_episodes_counted_and_listed_per_model_and_condition(tmp_path: Path) -> None:
    rows = [_row(f, o) for f in FIELDS for o in ORIGINS if (f, o) != ("f01", "2024-07-01")]
    rows += [_row("f01", "2024-01-01", condition="A0")]
    inst = _instance()
    report = validate_predictions(_jsonl(tmp_path / "m.jsonl", rows), inst)
    assert report.ok  # missing episodes are a warning
    assert report.missing[("m", "A1")] == ("f01@2024-07-01",)
    assert len(report.missing[("m", "A0")]) == 5
    msgs = [p.message for p in of_kind(report, ProblemKind.MISSING_EPISODES)]
    assert any("m / A1: 1 of 6" in m for m in msgs)
    # restricted to Test (f01, f02), and with an expected condition the file lacks entirely
    report = validate_predictions(
        _jsonl(tmp_path / "m.jsonl", rows), inst, split="test", expected_conditions=["A1", "A3"]
    )
    assert report.missing[("m", "A1")] == ("f01@2024-07-01",)
    assert len(report.missing[("m", "A3")]) == 4
    assert of_kind(report, ProblemKind.UNEXPECTED_CONDITION)  # the A0 row


def test_size_limit_refuses_huge_files_unread(tmp_path: Path) -> None:
    path = _jsonl(tmp_path / "big.jsonl", _all_rows())
    report = validate_predictions(path, _instance(), max_bytes=100)
    assert [p.kind for p in report.problems] == [ProblemKind.FILE_TOO_LARGE]
    assert report.problems[0].severity is Severity.FATAL and not report.scorable


def test_truncated_parquet_is_reported(tmp_path: Path) -> None:
    path = write_predictions(pd.DataFrame(_all_rows()), tmp_path / "p.parquet")
    path.write_bytes(path.read_bytes()[:-30])
    frame, problems = load_predictions(path)
    assert [p.kind for p in problems] == [ProblemKind.UNREADABLE] and frame.empty


def test_missing_file_and_unknown_extension(tmp_path: Path) -> None:
    assert load_predictions(tmp_path / "nope.jsonl")[1][0].kind is ProblemKind.FILE_MISSING
    csv = tmp_path / "p.csv"
    csv.write_text("model,condition\n", encoding="utf-8")
    assert load_predictions(csv)[1][0].kind is ProblemKind.UNKNOWN_FORMAT


def test_a_bad_file_does_not_change_a_good_files_frame(tmp_path: Path) -> None:
    inst = _instance()
    good = _jsonl(tmp_path / "good.jsonl", _all_rows())
    before = validate_predictions(good, inst).frame
    for name in BAD_FILES:
        validate_predictions(_write_bad(tmp_path, name), inst)
    after = validate_predictions(good, inst).frame
    pd.testing.assert_frame_equal(before, after)


_weight = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True, width=64),
    st.none(),
    st.text(max_size=3),
    st.booleans(),
)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(FIELDS + ("zz",)),
            st.sampled_from(ORIGINS),
            st.lists(_weight, min_size=8, max_size=8),
            st.booleans(),
        ),
        max_size=8,
    )
)
def test_validator_never_crashes_and_usable_valid_rows_are_clean(rows: list) -> None:
    frame = pd.DataFrame(
        [_row(f, o, valid=v, **dict(zip(DIRECTION_KEYS, w, strict=True))) for f, o, w, v in rows],
        columns=list(REQUIRED_COLUMNS),
    )
    report = validate_predictions(frame, _instance())
    usable = report.frame[report.frame["valid"]]
    w = usable[list(DIRECTION_KEYS)].to_numpy(np.float64)
    assert np.isfinite(w).all() and (w >= 0).all() and (w.sum(axis=1) > 0).all()
    assert not report.frame.duplicated(["model", "condition", "field_id", "origin"]).any()
