"""Turn lm-eval's logged samples (``--log_samples --output_path``) into a prediction file.

Every sample line of a RAP task holds the episode document (field, origin, condition, manifest
hash), the unit's record in ``resps`` and the final answer in ``filtered_resps``. The answer is
parsed with the same parser as ``process_results``, so ``rap score`` on the resulting file sees
exactly the weights lm-eval scored.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pandas as pd

from rap_benchmark.core.records import DIRECTION_KEYS
from rap_benchmark.evaluation.scoring.parse import parse_answer


def find_sample_files(paths: Iterable[str | Path]) -> list[Path]:
    """Sample files named or found (recursively, ``samples_rap*.jsonl``) under the given paths."""
    out: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            out.extend(sorted(p.rglob("samples_rap*.jsonl")))
        elif p.is_file():
            out.append(p)
        else:
            raise FileNotFoundError(f"no samples file or folder at {p}")
    if not out:
        raise FileNotFoundError("no lm-eval samples files (samples_rap*.jsonl) found")
    return out


def unit_record(sample: dict[str, Any]) -> dict[str, Any]:
    resps = sample.get("resps") or []
    first = resps[0] if resps else []
    rec = first[0] if isinstance(first, list) and first else first
    if isinstance(rec, str):
        try:
            rec = json.loads(rec)
        except json.JSONDecodeError:
            return {}
    return rec if isinstance(rec, dict) else {}


def read_samples(paths: Iterable[str | Path]) -> list[dict[str, Any]]:
    rows = []
    for path in find_sample_files(paths):
        with path.open(encoding="utf-8") as fh:
            rows.extend(json.loads(line) for line in fh if line.strip())
    return rows


def samples_to_predictions(paths: Iterable[str | Path], *, model: str) -> pd.DataFrame:
    """A prediction frame (``rap_benchmark.evaluation.predictions`` columns) from lm-eval sample files."""
    return predictions_from_samples(read_samples(paths), model=model)


def predictions_from_samples(samples: Iterable[dict[str, Any]], *, model: str) -> pd.DataFrame:
    """A prediction frame from lm-eval sample dicts (as logged, or as ``simple_evaluate`` returns them)."""
    rows = []
    for s in samples:
        doc = s["doc"]
        answers = s.get("filtered_resps") or [None]
        parsed = parse_answer(answers[0])
        rec = unit_record(s)
        row: dict[str, Any] = {
            "model": model,
            "condition": doc["condition"],
            "field_id": doc["field_id"],
            "origin": doc["origin"],
        }
        for i, d in enumerate(DIRECTION_KEYS):
            row[d] = float(parsed.weights[i]) if parsed.valid and parsed.weights else None
        row["valid"] = bool(parsed.valid)
        row["invalid_reason"] = None if parsed.valid else (rec.get("invalid_reason") or parsed.reason or "invalid")
        row["manifest_hash"] = doc["manifest_hash"]
        row["n_search_calls"] = int(rec.get("n_search_calls", 0))
        row["attempts"] = int(rec.get("attempts", 0))
        rows.append(row)
    frame = pd.DataFrame(rows)
    for d in DIRECTION_KEYS:
        frame[d] = frame[d].astype("float64")
    keys = ["model", "condition", "field_id", "origin"]
    return frame.sort_values(keys, kind="stable").reset_index(drop=True)


def samples_episode_metrics(samples: Iterable[dict[str, Any]]) -> pd.DataFrame:
    """lm-eval's own per-episode metric values (``spearman`` etc.), one row per sample dict."""
    rows = []
    for s in samples:
        doc = s["doc"]
        row = {"condition": doc["condition"], "field_id": doc["field_id"], "origin": doc["origin"]}
        for name in ("spearman", "state_fidelity"):
            if name in s:
                value = s[name]
                row[name] = float("nan") if value[1] is None else float(value[1])
        rows.append(row)
    return pd.DataFrame(rows)
