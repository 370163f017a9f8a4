"""From a harness run to a leaderboard submission: the prediction file plus its metadata.

Both converters (``rap harness lm-eval-predictions`` and ``rap harness inspect-predictions``) end here, so a
harness run becomes exactly what ``rap submit validate`` and ``rap leaderboard score`` read: the
prediction file and ``<file>.meta.json`` beside it, whose ``model``, ``conditions`` and
``manifest_hash`` are read from the rows themselves (one model, one instance), so they cannot
disagree with them. The metadata's ``usage`` (tokens, Search calls, cost per condition) is summed
from the episode records the harness logged: Inspect reports each reply's tokens, lm-eval does
not (its tokens are unknown, never 0); the cost comes from the packaged price table and is
unknown for a model it does not list.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pandas as pd

from rap_benchmark.core.records import DIRECTION_KEYS, InvalidReason, is_count
from rap_benchmark.core.schemas import PREDICTION_KEY


def prediction_row(model: str, episode: dict[str, Any], answer: str | None, record: dict[str, Any]) -> dict[str, Any]:
    """One prediction row from a harness's episode: ``episode`` holds ``condition``,
    ``field_id``, ``origin`` and ``manifest_hash``, ``answer`` the final answer text (parsed
    here with the scorer's parser, as the harness metric did) and ``record`` the episode loop's
    record (invalid reason and detail, search calls, attempts)."""
    from rap_benchmark.evaluation.scoring import parse_answer

    parsed = parse_answer(answer)
    row: dict[str, Any] = {"model": model, **{k: episode[k] for k in ("condition", "field_id", "origin")}}
    for i, d in enumerate(DIRECTION_KEYS):
        row[d] = float(parsed.weights[i]) if parsed.valid and parsed.weights else None
    row["valid"] = bool(parsed.valid)
    row["invalid_reason"] = (
        None if parsed.valid else (record.get("invalid_reason") or InvalidReason.INVALID_ANSWER.value)
    )
    row["invalid_detail"] = None if parsed.valid else (record.get("invalid_detail") or parsed.reason)
    row["manifest_hash"] = episode["manifest_hash"]
    row["n_search_calls"] = int(record.get("n_search_calls", 0))
    row["attempts"] = int(record.get("attempts", 0))
    for column in ("prompt_tokens", "completion_tokens"):
        value = record.get(column)
        row[column] = value if is_count(value) else None  # a negative or fractional count is unknown
    return row


def prediction_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """Rows of :func:`prediction_row` as a prediction frame, sorted by its key."""
    frame = pd.DataFrame(rows)
    for d in DIRECTION_KEYS:
        frame[d] = frame[d].astype("float64")
    return frame.sort_values(list(PREDICTION_KEY), kind="stable").reset_index(drop=True)


def submission_meta(
    frame: pd.DataFrame, *, source: str, knowledge_cutoff: str | dt.date | None = None, tokens_known: bool = True
) -> dict[str, Any]:
    """The metadata of a converted prediction frame (the keys ``rap submit validate`` checks),
    with its ``usage`` summed from the rows (tokens unknown unless ``tokens_known``)."""
    from rap_benchmark.evaluation.submissions import meta_from_rows
    from rap_benchmark.evaluation.usage import usage_from_rows
    from rap_benchmark.llmclient.pricing import default_prices

    meta = meta_from_rows(frame, usage={}, knowledge_cutoff=knowledge_cutoff, notes=f"converted from {source}")
    meta["usage"] = usage_from_rows(frame, source=source, prices=default_prices(), tokens_known=tokens_known)
    return meta


def write_submission(
    frame: pd.DataFrame,
    out: str | Path,
    *,
    source: str,
    knowledge_cutoff: str | dt.date | None = None,
    tokens_known: bool = True,
) -> tuple[Path, Path]:
    """Write the prediction file ``out`` and ``out.meta.json``; return both paths.

    ``tokens_known`` False (a harness that does not count tokens, e.g. lm-eval): the rows' token
    columns are written as null and the usage states them as unknown. The metadata is checked
    before anything is written, and each file is replaced atomically."""
    from rap_benchmark.evaluation import submissions

    if not tokens_known:
        frame = frame.assign(
            **{c: pd.array([None] * len(frame), "Int64") for c in ("prompt_tokens", "completion_tokens") if c in frame}
        )
    meta = submission_meta(frame, source=source, knowledge_cutoff=knowledge_cutoff, tokens_known=tokens_known)
    return submissions.write_submission(frame, out, meta)
