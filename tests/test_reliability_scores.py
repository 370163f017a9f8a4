"""Prediction files and the leaderboard under hostile input (issue 14, "Prediction files and the
leaderboard"): a fuzz test of the validator and scorer, and one regression test per problem."""

from __future__ import annotations

import json
import tempfile
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rap_benchmark.core.records import DIRECTION_KEYS
from rap_benchmark.evaluation.predictions import (
    MAX_LISTED,
    Problem,
    ProblemKind,
    Severity,
    ValidationReport,
    combine_validated,
    keep_first_owner,
    validate_predictions,
    write_predictions,
)
from rap_benchmark.evaluation.report.aggregates import leaderboard
from rap_benchmark.evaluation.scoring import baseline_predictions, score_predictions

GOOD_MODEL = "baseline/ewma"
K = ProblemKind


def of_kind(report: ValidationReport, kind: ProblemKind) -> list[Problem]:
    """The report's problems of one kind."""
    return [p for p in report.problems if p.kind is kind]


@pytest.fixture(scope="module")
def good_frame(mini) -> pd.DataFrame:
    frame, _ = baseline_predictions(mini)
    return frame[frame["model"] == GOOD_MODEL].reset_index(drop=True)


@pytest.fixture(scope="module")
def good_file(good_frame, tmp_path_factory) -> Path:
    return write_predictions(good_frame, tmp_path_factory.mktemp("good") / "good.jsonl")


@pytest.fixture(scope="module")
def good_board(mini, good_file) -> pd.DataFrame:
    """The valid file's leaderboard on its own, computed once for every fuzzed file to be checked against."""
    return _board(mini, [good_file])


def _row(mini, i: int = 0, **over) -> dict:
    eps = mini.episodes[["field_id", "origin"]].drop_duplicates().sort_values(["field_id", "origin"])
    f, o = eps.iloc[i % len(eps)]
    row = {
        "model": "fuzz/m",
        "condition": "A1",
        "field_id": str(f),
        "origin": str(o)[:10],
        **{k: 12.5 for k in DIRECTION_KEYS},
        "valid": True,
        "invalid_reason": None,
        "manifest_hash": mini.manifest_hash,
    }
    row.update(over)
    return row


def _line(row: dict) -> bytes:
    return json.dumps(row).encode() + b"\n"


def _board(mini, files: list[Path]) -> pd.DataFrame:
    """What ``rap score`` computes: validate each file, first owner keeps a unit, score, rank."""
    reports = keep_first_owner([validate_predictions(f, mini, split=None) for f in files])
    preds, _ = combine_validated(reports)
    if not len(preds):
        return pd.DataFrame()
    return leaderboard(score_predictions(mini, preds), mini, n_resamples=50, seed=1, split=None)


def _kinds(report) -> set[ProblemKind]:
    return {p.kind for p in report.problems}


# -- the fuzz test -----------------------------------------------------------------------------------


def _defect_lines(mini):
    """(line bytes, the problem kind it must produce, or None when any outcome is fine)."""
    r = lambda **kw: _row(mini, 3, **kw)  # noqa: E731
    nested = st.integers(33, 20000).map(lambda n: (b"[" * n + b"]" * n + b"\n", K.TOO_DEEP))
    deep_obj = st.integers(33, 8000).map(lambda n: (b'{"a":' * n + b"1" + b"}" * n + b"\n", K.TOO_DEEP))
    binary = st.binary(min_size=1, max_size=300).map(lambda b: (b.replace(b"\n", b"") + b"\n", None))
    latin1 = st.just((json.dumps(r(model="caf\u00e9"), ensure_ascii=False).encode("latin-1") + b"\n", K.ENCODING))
    surrogate = st.just((_line(r()).replace(b'"fuzz/m"', b'"fuzz\\ud800"'), K.ENCODING))
    dup_key = st.sampled_from(DIRECTION_KEYS).map(
        lambda d: (_line(r()).replace(f'"{d}": 12.5'.encode(), f'"{d}": 12.5, "{d}": 99.0'.encode()), K.DUPLICATE_KEY)
    )
    constants = st.sampled_from(["NaN", "Infinity", "-Infinity"]).map(
        lambda c: (_line(r()).replace(b'"D4": 12.5', f'"D4": {c}'.encode()), K.NON_STANDARD_JSON)
    )
    huge = st.sampled_from([1e308, -1e308, 1e300, 10**40]).map(lambda v: (_line(r(D0=v)), K.BAD_WEIGHTS))
    digits = st.integers(5000, 20000).map(
        lambda n: (_line(r()).replace(b'"D0": 12.5', b'"D0": ' + b"9" * n), K.BAD_JSON)
    )
    long_value = st.integers(70_000, 300_000).map(lambda n: (_line(r(model="x" * n)), K.LINE_TOO_LONG))
    no_reason = st.just((_line(r(valid=False, **dict.fromkeys(DIRECTION_KEYS))), K.NO_REASON))
    not_object = st.sampled_from([b"[1, 2]\n", b'"text"\n', b"42\n", b"null\n"]).map(lambda b: (b, K.NOT_AN_OBJECT))
    wrong_types = st.sampled_from(
        [
            {"valid": "yes"},
            {"D3": "12"},
            {"origin": "2024/01/01"},
            {"condition": "A9"},
            {"wall_s": 10**400},
            {"attempts": 10**400},
            {"D5": 10**400},
            {"field_id": ["f000"]},
            {"invalid_reason": {"a": 1}},
        ]
    )
    typed = wrong_types.map(lambda over: (_line(r(**over)), None))
    return (
        st.one_of(
            nested,
            deep_obj,
            binary,
            latin1,
            surrogate,
            dup_key,
            constants,
            huge,
            digits,
            long_value,
            no_reason,
            not_object,
        )
        | typed
    )


@st.composite
def _malformed_file(draw, mini):
    """A file body plus the kinds it must produce; whole-file damage (array, UTF-16, truncation) on top."""
    defects = draw(st.lists(_defect_lines(mini), min_size=1, max_size=5))
    owner = draw(st.sampled_from(["fuzz/m", GOOD_MODEL]))
    good = [_line(_row(mini, i, model=owner)) for i in range(draw(st.integers(1, 6)))]
    lines = [good[0], *[d for d, _ in defects], *good[1:]]  # a good first line: no whole-file guess
    body = b"".join(lines)
    expected = {k for _, k in defects if k is not None}
    damage = draw(st.sampled_from(["none", "none", "truncate", "array", "utf16"]))
    if damage == "truncate":
        cut = draw(st.integers(1, len(body) - 1))
        # a cut inside a line truncates; one on a line's edge leaves whole lines (the last may lack
        # its newline, which is not a cut)
        inside = body[cut - 1 : cut] != b"\n" and body[cut : cut + 1] != b"\n"
        body, expected = body[:cut], ({K.TRUNCATED} if inside else set())
    elif damage == "array":
        body = b"[\n" + b",\n".join(x.rstrip(b"\n") for x in good) + b"\n]\n"
        expected = {K.JSON_ARRAY}
    elif damage == "utf16":
        body = body.decode("utf-8", "replace").encode("utf-16")
        expected = {K.ENCODING}
    return body, expected


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
@given(data=st.data())
def test_fuzzed_files_never_raise_name_each_problem_and_leave_a_valid_file_alone(mini, good_file, good_board, data):
    body, expected = data.draw(_malformed_file(mini))
    with tempfile.TemporaryDirectory() as tmp:
        bad = Path(tmp) / "fuzz.jsonl"
        bad.write_bytes(body)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # no numpy overflow warning either
            report = validate_predictions(bad, mini, split=None)
            together = _board(mini, [good_file, bad])
    kinds = _kinds(report)
    assert not any("could not be validated" in p.message for p in report.problems)  # no internal failure
    assert expected <= kinds, f"expected {expected}, got {report.summary()[:2000]}"
    assert report.problems or not expected
    for p in report.problems:
        assert p.message and len(p.message) < 4000 and len(p.lines) <= MAX_LISTED
    if any(p.severity is Severity.FATAL for p in report.problems):
        assert report.frame.empty
    mine = together[(together["model"] == GOOD_MODEL) & (together["condition"] == "A0")].reset_index(drop=True)
    pd.testing.assert_frame_equal(mine, good_board)  # a fuzz row may add GOOD_MODEL / A1, never touch A0


# -- one regression test per problem -----------------------------------------------------------------


def _write(path: Path, lines: list[bytes]) -> Path:
    path.write_bytes(b"".join(lines))
    return path


def test_deep_nesting_and_lone_surrogate_do_not_stop_a_valid_file_from_being_scored(
    mini, mini_dir, good_file, good_board, tmp_path, capsys
):
    """Bug: rap score crashed on a deeply nested line (RecursionError) and on a lone surrogate
    (UnicodeEncodeError from pyarrow); the valid file scored with them got no score."""
    from rap_benchmark.cli import main

    nested = _write(tmp_path / "nested.jsonl", [_line(_row(mini, 0)), b"[" * 50_000 + b"]" * 50_000 + b"\n"])
    sur = _write(tmp_path / "sur.jsonl", [_line(_row(mini, 0)).replace(b'"fuzz/m"', b'"m\\udc80"')])
    assert K.LINE_TOO_LONG in _kinds(validate_predictions(nested, mini))  # 100 kB: skipped unread
    deep = _write(tmp_path / "deep.jsonl", [_line(_row(mini, 0)), b"[" * 20_000 + b"]" * 20_000 + b"\n"])
    assert K.TOO_DEEP in _kinds(validate_predictions(deep, mini))
    assert K.ENCODING in _kinds(validate_predictions(sur, mini))
    capsys.readouterr()
    argv = ["score", str(mini_dir), str(deep), str(sur), str(good_file), "--split", "all", "--json"]
    code = main([*argv, "--resamples", "50"])
    out = json.loads(capsys.readouterr().out)
    assert code == 1
    (mine,) = [r for r in out["leaderboard"] if r["model"] == GOOD_MODEL]
    assert mine["n_episodes"] == good_board["n_episodes"].iloc[0]
    assert mine["spearman"] == pytest.approx(good_board["spearman"].iloc[0], rel=1e-9)  # JSON keeps 10 digits


def test_a_file_cannot_remove_another_by_reusing_its_model_name(
    mini, mini_dir, good_file, good_board, tmp_path, capsys
):
    """Bug: a second file with the same model name excluded both files from the board, exit 0."""
    from rap_benchmark.cli import main

    frame = pd.read_json(good_file, lines=True)
    frame[list(DIRECTION_KEYS)] = 1.0
    frame["D0"] = 90.0
    copycat = write_predictions(frame, tmp_path / "copycat.jsonl")
    capsys.readouterr()
    code = main(["score", str(mini_dir), str(good_file), str(copycat), "--split", "all", "--json", "--resamples", "50"])
    out = json.loads(capsys.readouterr().out)
    assert code == 1
    rows = [r for r in out["leaderboard"] if r["model"] == GOOD_MODEL]
    assert len(rows) == 1
    assert rows[0]["spearman"] == pytest.approx(good_board["spearman"].iloc[0], rel=1e-9)  # the first file's score
    assert any("reuse a model and condition of an earlier file" in p and "copycat" in p for p in out["problems"])


def test_valid_false_without_reason_is_refused(mini, tmp_path):
    """Bug: valid: false with no invalid_reason was accepted without a message."""
    path = _write(tmp_path / "p.jsonl", [_line(_row(mini, 0, valid=False, **dict.fromkeys(DIRECTION_KEYS)))])
    report = validate_predictions(path, mini)
    (p,) = of_kind(report, K.NO_REASON)
    assert p.severity is Severity.ERROR and not report.ok


def test_weights_of_1e308_are_out_of_range_without_a_numpy_warning(mini, tmp_path):
    """Bug: weights of 1e308 were accepted with only a numpy overflow warning."""
    path = _write(tmp_path / "p.jsonl", [_line(_row(mini, 0, **dict.fromkeys(DIRECTION_KEYS, 1e308)))])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        report = validate_predictions(path, mini)
    (p,) = of_kind(report, K.BAD_WEIGHTS)
    assert "out of range" in p.message and not report.frame["valid"].any()


def test_duplicate_keys_inside_a_row_are_named(mini, tmp_path):
    """Bug: duplicate keys inside one row were accepted; the last value silently won."""
    line = _line(_row(mini, 0)).replace(b'"D2": 12.5', b'"D2": 12.5, "D2": 80.0')
    report = validate_predictions(_write(tmp_path / "p.jsonl", [line]), mini)
    (p,) = of_kind(report, K.DUPLICATE_KEY)
    assert "'D2'" in p.message and report.frame.empty


def test_nan_weight_is_reported_as_nan(mini, tmp_path):
    """Bug: a NaN weight was reported as "null or absent"."""
    line = _line(_row(mini, 0)).replace(b'"D1": 12.5', b'"D1": NaN')
    (p,) = of_kind(validate_predictions(_write(tmp_path / "p.jsonl", [line]), mini), K.NON_STANDARD_JSON)
    assert "NaN" in p.message and "null or absent" not in p.message
    import pyarrow as pa
    import pyarrow.parquet as pq

    row = _row(mini, 0)
    table = pa.table({k: pa.array([v], from_pandas=False) for k, v in row.items() if k != "D1"})
    table = table.append_column("D1", pa.array([float("nan")], pa.float64(), from_pandas=False))
    pq.write_table(table, tmp_path / "p.parquet")
    (p,) = of_kind(validate_predictions(tmp_path / "p.parquet", mini), K.BAD_WEIGHTS)
    assert "NaN weight" in p.message


@pytest.mark.parametrize(("old", "new"), [(b'"D4": 12.5', b'"D4": NaN'), (b'"D2": 12.5', b'"D2": 12.5, "D2": 1')])
def test_a_last_line_cut_after_nan_or_a_repeated_key_is_truncation(mini, tmp_path, old, new):
    """Bug (found by the fuzz test): a file cut right after a NaN was reported as one row with a
    NaN, and the rest of the file was scored as if whole. A repeated key, which the strict reader
    also stops at, must not hide the cut either."""
    cut = _line(_row(mini, 1)).replace(old, new).split(new)[0] + new
    report = validate_predictions(_write(tmp_path / "p.jsonl", [_line(_row(mini, 0)), cut]), mini)
    assert [p.kind for p in report.problems] == [K.TRUNCATED] and report.frame.empty
    whole = validate_predictions(_write(tmp_path / "q.jsonl", [_line(_row(mini, 0)), cut + b"}"]), mini)
    assert K.TRUNCATED not in _kinds(whole)  # a whole last line without its newline is not a cut


def test_json_array_is_reported_as_one(mini, good_frame, tmp_path):
    """Bug: a JSON array was reported as "truncated" plus 1,021 bad lines."""
    rows = json.loads(good_frame.to_json(orient="records"))
    path = tmp_path / "array.json"
    path.write_text(json.dumps(rows, indent=2))
    report = validate_predictions(path, mini)
    assert [p.kind for p in report.problems] == [K.JSON_ARRAY]


def test_huge_values_and_duplicates_give_bounded_messages(mini, tmp_path):
    """Bug: a 200 MB model name was echoed in full (210 MB stderr, 3.1 GB peak) and 1.2 M duplicate
    rows listed every line number (10 MB stderr, 4.5 GB peak). Scaled down: a 5 MB name, 60 k
    duplicate rows."""
    name = _line(_row(mini, 0, model="n" * 5_000_000))
    dups = [_line(_row(mini, 0))] * 60_000
    report = validate_predictions(_write(tmp_path / "p.jsonl", [name, *dups]), mini)
    text = report.summary()
    assert len(text) < 5000, len(text)
    assert of_kind(report, K.LINE_TOO_LONG) and of_kind(report, K.DUPLICATE)[0].count == 1
    assert all(len(p.lines) <= MAX_LISTED for p in report.problems)


def test_truncated_file_yields_no_leaderboard_row(mini, mini_dir, good_file, tmp_path, capsys):
    """Bug: on a cut predictions.jsonl rap score printed "truncated", exited 1 and still printed a
    leaderboard row for 8 episodes."""
    from rap_benchmark.cli import main

    cut = tmp_path / "cut.jsonl"
    data = good_file.read_bytes().replace(GOOD_MODEL.encode(), b"cut/model")
    cut.write_bytes(data[: len(data) // 2 - 7])
    assert main(["score", str(mini_dir), str(cut), "--split", "all"]) == 1
    captured = capsys.readouterr()
    assert "truncated" in captured.err and "cut/model" not in captured.out


def test_partial_run_is_reported_but_not_ranked(mini, mini_dir, good_file, tmp_path, capsys):
    """Bug: a 2-episode --limit run (one field) was accepted and ranked."""
    from rap_benchmark.cli import main

    frame = pd.read_json(good_file, lines=True, dtype={"origin": str})
    part = write_predictions(frame.head(2).assign(model="partial/m"), tmp_path / "partial.jsonl")
    capsys.readouterr()
    main(["score", str(mini_dir), str(good_file), str(part), "--split", "all", "--json", "--resamples", "50"])
    board = {r["model"]: r for r in json.loads(capsys.readouterr().out)["leaderboard"]}
    assert board["partial/m"]["rank"] is None and board["partial/m"]["coverage"].startswith("2/")
    assert board[GOOD_MODEL]["rank"] == 1


def test_baselines_file_splits_into_submissions(mini, mini_dir, tmp_path):
    """Bug: the output of rap baselines could not be submitted ("mixed models") and could not be split."""
    from rap_benchmark.cli import main
    from rap_benchmark.evaluation.submissions import score_submissions, split_by_model, validate_submission

    frame, _ = baseline_predictions(mini)
    path = write_predictions(frame, tmp_path / "baselines.jsonl")
    assert not validate_submission(path, mini, split=None).accepted
    parts = split_by_model(path, tmp_path / "subs")
    assert len(parts) == frame["model"].nunique()
    assert all(validate_submission(p, mini, split=None).accepted for p in parts)
    result = score_submissions(parts, mini, split=None, n_resamples=50, seed=1)
    assert sorted(result.board["model"]) == sorted(set(frame["model"]))
    assert result.board["rank"].tolist() == list(range(1, len(parts) + 1))
    code = main(
        ["leaderboard", "score", str(path), "--split-models", "--instance", str(mini_dir), "--out", str(tmp_path / "b")]
        + ["--split", "all", "--resamples", "50"]
    )
    assert code == 0


def test_split_writes_the_metadata_prepare_writes_and_refuses_two_instances(mini, tmp_path):
    """split_by_model's sidecars are meta_from_rows's (the one .meta.json format); one model's rows
    from two instances are refused before anything is written."""
    from rap_benchmark.core.errors import InputError
    from rap_benchmark.evaluation.predictions import read_predictions
    from rap_benchmark.evaluation.submissions import META_SUFFIX, meta_from_rows, split_by_model

    frame, _ = baseline_predictions(mini)
    path = write_predictions(frame, tmp_path / "baselines.jsonl")
    parts = split_by_model(path, tmp_path / "subs", meta={"notes": "réglé", "attempts": 2, "tools": ["x"]})
    written = json.loads((parts[0].parent / (parts[0].name + META_SUFFIX)).read_text(encoding="utf-8"))
    rows = read_predictions(parts[0])
    expected = meta_from_rows(rows, usage=written["usage"], notes="réglé", attempts=2)
    assert written == {**expected, "benchmark_version": None}  # the rows do not say which version
    assert "réglé" in (parts[0].parent / (parts[0].name + META_SUFFIX)).read_text(encoding="utf-8")
    mixed = frame.copy()
    first = mixed["model"] == mixed["model"].iloc[0]
    mixed.loc[first & (mixed.index % 2 == 0), "manifest_hash"] = "0" * 64
    path = write_predictions(mixed, tmp_path / "mixed.jsonl")
    with pytest.raises(InputError, match="2 instances"):
        split_by_model(path, tmp_path / "mixed")
    assert not (tmp_path / "mixed").exists()


def test_state_conditions_are_ranked_against_their_state_target(mini, tmp_path):
    """Bug: State conditions (A2, A4) were ranked by Spearman against y instead of their State target x."""
    from scipy.stats import spearmanr

    from rap_benchmark.evaluation.submissions import score_submissions

    eps = mini.episodes[mini.episodes["policy"] == "canonical"]
    eps = eps[[x is not None for x in eps["x"]]]
    rows = [
        _row(mini, 0, model="state/m", condition="A2", field_id=r.field_id, origin=str(r.origin)[:10])
        | dict(zip(DIRECTION_KEYS, (np.asarray(r.x) * 100 + 0.01).tolist(), strict=True))
        for r in eps.itertuples()
    ]
    path = write_predictions(pd.DataFrame(rows), tmp_path / "state.jsonl")
    meta = {"model": "state/m", "conditions": ["A2"], "tools": ["search"], "manifest_hash": mini.manifest_hash}
    (tmp_path / "state.jsonl.meta.json").write_text(json.dumps(meta))
    board = score_submissions([path], mini, split=None, n_resamples=50, seed=1).board
    (row,) = board.to_dict(orient="records")
    assert row["target"] == "x" and row["spearman"] == pytest.approx(1.0)  # a State output equal to x
    rho_y = np.mean([spearmanr(r.x, r.y).statistic for r in eps.itertuples() if r.y is not None])
    assert row["state_as_forecast"] < 0.999 and abs(row["state_as_forecast"] - rho_y) < 0.2
