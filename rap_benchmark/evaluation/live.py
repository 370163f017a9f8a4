"""Sealed forecasts and the Forecast-Live track (the protocol: docs/LIVING.md).

A forecast for a window that has not opened yet is *sealed*: ``rap submit seal PRED.jsonl``
publishes one JSON row (a *seal*) that commits to the prediction file without revealing it. The
commitment is the salted commitment of :mod:`rap_benchmark.core.canonical`,
``sha256(salt || canonical_json({"key": SEAL_KEY, "target": rows}))``, where ``rows`` are the
file's required prediction columns as the validator reads them, sorted by model, condition, field
and origin: JSONL and parquet copies hash the same, and any changed weight, flag or key changes
the hash. The salt (32 secret random bytes, ``PRED.salt.hex`` by default) stays with the
forecaster until the reveal. The leaderboard trusts the published seal log (``--seals``), never
the forecaster: :func:`score_live` scores a reveal (the file, its salt and its ``.meta.json``) on
the Forecast-Live track only when its commitment is in the log and was sealed strictly before
00:00 UTC of every origin it forecasts.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pandas as pd

from rap_benchmark.core.canonical import commitment, new_salt, read_salt, to_plain, write_salt
from rap_benchmark.core.errors import FileFormatError, InputError
from rap_benchmark.core.records import Split
from rap_benchmark.core.schemas import pending_mask
from rap_benchmark.evaluation.predictions import KEY_COLUMNS, REQUIRED_COLUMNS, PredictionFileError, read_predictions
from rap_benchmark.evaluation.predictions.missing import not_a_prediction_file
from rap_benchmark.evaluation.submissions import (
    SubmissionReport,
    board_meta,
    read_metadata,
    score_submission,
    validate_submission,
    write_board_files,
)

SEAL_VERSION = 1
SEAL_KEY = "rap-forecast-seal-v1"
SALT_SUFFIX = ".salt.hex"
LIVE_TRACK = "Forecast-Live"


def prediction_commitment(path: str | Path, salt: bytes) -> tuple[pd.DataFrame, str]:
    """The prediction frame of ``path`` and the salted commitment to its canonical rows."""
    frame, rows = _canonical_rows(path)
    return frame, commitment(salt, SEAL_KEY, rows)


def _canonical_rows(path: str | Path) -> tuple[pd.DataFrame, list[dict[str, Any]]]:
    """The prediction frame of ``path`` (a clean file, or :class:`FileFormatError`) sorted by its
    key, and the rows a commitment hashes: the required columns as plain values."""
    path = Path(path)
    if not path.is_file():
        raise InputError(not_a_prediction_file(path))
    try:
        frame = read_predictions(path)
    except PredictionFileError as exc:
        first = str(exc.problems[0]) if exc.problems else "unreadable"
        raise FileFormatError(path, f"not a clean prediction file: {first}") from None
    frame = frame.sort_values(list(KEY_COLUMNS), kind="stable").reset_index(drop=True)
    return frame, [to_plain(r) for r in frame[list(REQUIRED_COLUMNS)].to_dict(orient="records")]


def utc_stamp(moment: dt.datetime) -> str:
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_stamp(text: str) -> dt.datetime:
    """A UTC timestamp ``YYYY-MM-DDTHH:MM:SSZ`` (an offset other than Z is converted)."""
    try:
        moment = dt.datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    except ValueError:
        raise InputError(f"not a UTC timestamp: {str(text)[:40]!r} (expected YYYY-MM-DDTHH:MM:SSZ)") from None
    if moment.tzinfo is None:
        raise InputError(f"timestamp {text!r} has no time zone (write it in UTC with a trailing Z)")
    return moment.astimezone(dt.UTC)


def seal(
    pred_path: str | Path, *, salt_file: str | Path | None = None, sealed_at: dt.datetime | None = None
) -> tuple[dict[str, Any], Path]:
    """The seal row of a prediction file and the salt file it used (created when absent).

    ``sealed_at`` defaults to now (UTC); a maintainer replaying history may pass another time,
    which is why the leaderboard trusts only the timestamps of the published log.
    """
    pred_path = Path(pred_path)
    salt_path = Path(salt_file) if salt_file is not None else pred_path.with_name(pred_path.name + SALT_SUFFIX)
    fresh = not salt_path.exists()
    salt = new_salt() if fresh else read_salt(salt_path)
    frame, rows = _canonical_rows(pred_path)  # read once, and checked before any salt is written
    digest = commitment(salt, SEAL_KEY, rows)
    if fresh:
        write_salt(salt_path, salt)
    row = {
        "seal_version": SEAL_VERSION,
        "commitment": digest,
        "sealed_at": utc_stamp(sealed_at or dt.datetime.now(dt.UTC)),
        "models": sorted(set(frame["model"])),
        "conditions": sorted(set(frame["condition"])),
        "origins": sorted(set(frame["origin"].astype(str))),
        "n_rows": len(frame),
        "manifest_hash": sorted(set(frame["manifest_hash"])),
    }
    return row, salt_path


def read_seals(paths: list[Path]) -> dict[str, dict[str, Any]]:
    """Seal rows by commitment, from SEAL.json files or JSON-lines logs (the earliest seal wins)."""
    seals: dict[str, dict[str, Any]] = {}
    for path in paths:
        text = Path(path).read_text(encoding="utf-8")
        lines = [text] if text.lstrip().startswith("{") and "\n{" not in text.strip() else text.splitlines()
        for i, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                stamp = parse_stamp(row["sealed_at"])
                digest = str(row["commitment"])
            except (ValueError, KeyError, TypeError) as exc:
                raise FileFormatError(path, f"not a seal row ({type(exc).__name__}: {exc})", line=i) from None
            if digest not in seals or stamp < parse_stamp(seals[digest]["sealed_at"]):
                seals[digest] = row
    return seals


@dataclass(frozen=True)
class LiveVerdict:
    path: Path
    accepted: bool
    message: str


def check_reveal(path: Path, seals: dict[str, dict[str, Any]], salt_file: Path | None = None) -> LiveVerdict:
    """Is the reveal at ``path`` a sealed forecast made before each of its origins? One-line verdict."""
    salt_path = salt_file or path.with_name(path.name + SALT_SUFFIX)
    if not salt_path.is_file():
        return LiveVerdict(path, False, f"no salt at {salt_path.name}: a reveal is the predictions plus their salt")
    try:
        frame, digest = prediction_commitment(path, read_salt(salt_path))
    except FileFormatError as exc:
        return LiveVerdict(path, False, str(exc))
    row = seals.get(digest)
    if row is None:
        return LiveVerdict(
            path, False, "matches no published commitment: the predictions or the salt changed after sealing"
        )
    sealed_at = parse_stamp(row["sealed_at"])
    origins = set(frame["origin"].astype(str))  # a forecast counts when sealed before 00:00 UTC of its origin
    late = sorted(o for o in origins if sealed_at >= dt.datetime.fromisoformat(o[:10]).replace(tzinfo=dt.UTC))
    if late:
        return LiveVerdict(
            path,
            False,
            f"sealed at {utc_stamp(sealed_at)}, not before origin {late[0]}: not a live forecast "
            "(score it on the retrospective tracks)",
        )
    return LiveVerdict(path, True, f"verified: sealed at {utc_stamp(sealed_at)} ({digest[:12]})")


@dataclass(frozen=True)
class LiveResult:
    verdicts: tuple[LiveVerdict, ...]
    board: pd.DataFrame
    meta: dict[str, Any] = field(default_factory=dict)


def score_live(
    paths: list[Path],
    inst: Any,
    seals: dict[str, dict[str, Any]],
    *,
    split: Split | None = Split.TEST,
    n_resamples: int | None = None,
    seed: int | None = None,
) -> LiveResult:
    """Verify every reveal and score the verified ones on the Forecast-Live track.

    Each accepted reveal is scored with the leaderboard's scorer (:func:`score_submission`) on
    the episodes of the origins it forecasts; its ``coverage`` counts those episodes of
    ``split``. Episodes whose ``y`` is still pending are not scored (resolve them first).
    """
    verdicts: list[LiveVerdict] = []
    boards = []
    for path in paths:
        verdict = check_reveal(Path(path), seals)
        if verdict.accepted:
            report = validate_submission(path, _as_sealed_against(inst, Path(path)), split=split)
            if not report.accepted:
                first = next((p for p in report.problems if "[fatal]" in p), "rejected by the validator")
                verdict = LiveVerdict(Path(path), False, first.strip())
            else:
                board = _score_origins(report, inst, split, n_resamples, seed)
                if board.empty:
                    verdict = LiveVerdict(Path(path), False, "no resolved episode to score yet (run rap resolve)")
                else:
                    boards.append(board)
        verdicts.append(verdict)
    board = pd.concat(boards, ignore_index=True) if boards else pd.DataFrame()
    if len(board):
        order = ["condition", "spearman", "model"]
        board = board.sort_values(order, ascending=[True, False, True], kind="stable", ignore_index=True)
        board.insert(0, "track", LIVE_TRACK)
        board.insert(1, "split", split.value if split is not None else "all")
    return LiveResult(tuple(verdicts), board, board_meta(inst, split, n_resamples, seed))


def _as_sealed_against(inst: Any, path: Path) -> Any:
    """``inst`` under the manifest hash the reveal was made against, when that is the pending
    version this resolved instance came from (forecasts are sealed before ``rap resolve``)."""
    resolved = inst.ledger.get("derived", {}).get("living", {}).get("resolved") or {}
    pending_hash = resolved.get("from_manifest_hash")
    meta, _ = read_metadata(path)
    if pending_hash and meta and meta.get("manifest_hash") == pending_hash:
        return replace(inst, manifest_hash=pending_hash)
    return inst


def _score_origins(
    report: SubmissionReport, inst: Any, split: Split | None, n_resamples: int | None, seed: int | None
) -> pd.DataFrame:
    """The reveal's leaderboard rows on the resolved episodes of its origins, with live coverage."""
    assert report.validation is not None
    frame = report.validation.frame
    origins = set(frame["origin"].astype(str))
    eps = inst.episodes
    live = eps[eps["origin"].astype(str).isin(origins)]
    if split is not None:
        live = live[live["split"] == split.value]
    resolved = live[~pending_mask(live)]
    keys = set(zip(resolved["field_id"], resolved["origin"].astype(str), strict=True))
    keep = [(f, o) in keys for f, o in zip(frame["field_id"], frame["origin"].astype(str), strict=True)]
    if not any(keep):
        return pd.DataFrame()
    narrowed = replace(report, validation=replace(report.validation, frame=frame[keep].reset_index(drop=True)))
    board = score_submission(narrowed, inst, split=split, n_resamples=n_resamples, seed=seed)
    n_expected = len(live.drop_duplicates(["field_id", "origin"]))
    board["coverage"] = f"{int(sum(keep))}/{n_expected}"
    board["origins"] = ",".join(sorted(origins))
    return board


def write_live_board(result: LiveResult, out: str | Path, *, page: bool = True) -> Path:
    """``leaderboard_live.csv``, ``leaderboard_live.md``, ``reveals.json`` (every verdict),
    ``board.json`` and, with ``page``, the figures and ``index.html`` of the Forecast-Live track."""
    note = (
        "Each row is a reveal whose salted commitment was published before every origin it forecasts; "
        "coverage counts the resolved episodes of those origins in the split. Sorted per condition by "
        "Spearman; 95% intervals: block bootstrap over dependency blocks; no multiplicity correction."
    )
    return write_board_files(
        out,
        result.board,
        [{"reveal": str(v.path), "accepted": v.accepted, "message": v.message} for v in result.verdicts],
        stem="leaderboard_live",
        verdicts_name="reveals",
        meta=result.meta,
        note=note,
        title=f"RAP leaderboard, {LIVE_TRACK}: {result.meta.get('instance', '')}",
        head=f"## {LIVE_TRACK}\n\nSealed before the origin, scored after `rap resolve`.\n\n",
        page=page,
    )
