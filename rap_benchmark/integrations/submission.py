"""From a harness run to a leaderboard submission: the prediction file plus its metadata.

Both converters (``rap lm-eval-predictions`` and ``rap inspect-predictions``) end here, so a
harness run becomes exactly what ``rap submit validate`` and ``rap leaderboard score`` read: the
prediction file and ``<file>.meta.json`` beside it, whose ``model``, ``conditions`` and
``manifest_hash`` are read from the rows themselves (one model, one instance), so they cannot
disagree with them.
"""

from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path
from typing import Any

import pandas as pd

from rap_benchmark.core.records import Condition
from rap_benchmark.core.spec import BENCHMARK_VERSION


def submission_meta(
    frame: pd.DataFrame, *, source: str, knowledge_cutoff: str | dt.date | None = None
) -> dict[str, Any]:
    """The metadata of a converted prediction frame (the keys ``rap submit validate`` checks)."""
    from rap_benchmark.evaluation.submissions import SubmissionMeta

    if not len(frame):
        raise ValueError("no predictions to submit")
    models = sorted(set(frame["model"].astype(str)))
    hashes = sorted(set(frame["manifest_hash"].astype(str)))
    if len(models) != 1:
        raise ValueError(f"one submission is one model, the rows name {', '.join(models)}")
    if len(hashes) != 1:
        raise ValueError(
            f"the rows come from {len(hashes)} instances (manifest hashes {', '.join(h[:12] for h in hashes)}); "
            "convert each instance's run on its own"
        )
    conditions = tuple(sorted({Condition(c) for c in frame["condition"]}, key=lambda c: c.value))
    cutoff = None if knowledge_cutoff is None else dt.date.fromisoformat(str(knowledge_cutoff))
    meta = SubmissionMeta(
        model=models[0],
        conditions=conditions,
        manifest_hash=hashes[0],
        knowledge_cutoff=cutoff,
        tools=("search",) if any(c.regime is not None for c in conditions) else (),
        attempts=1,
        notes=f"converted from {source}",
        benchmark_version=BENCHMARK_VERSION,
    )
    return meta.to_dict()


def write_submission(
    frame: pd.DataFrame, out: str | Path, *, source: str, knowledge_cutoff: str | dt.date | None = None
) -> tuple[Path, Path]:
    """Write the prediction file ``out`` and ``out.meta.json``; return both paths.

    The metadata is checked before anything is written, and each file is replaced atomically."""
    from rap_benchmark.evaluation.predictions import write_predictions
    from rap_benchmark.evaluation.submissions import META_SUFFIX

    out = Path(out)
    meta = submission_meta(frame, source=source, knowledge_cutoff=knowledge_cutoff)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.stem}.tmp{out.suffix}")
    write_predictions(frame, tmp)
    os.replace(tmp, out)
    meta_path = out.with_name(out.name + META_SUFFIX)
    tmp_meta = meta_path.with_name("." + meta_path.name + ".tmp")
    tmp_meta.write_text(json.dumps(meta, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(tmp_meta, meta_path)
    return out, meta_path
