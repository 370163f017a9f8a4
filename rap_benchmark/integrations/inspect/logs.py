"""Turn Inspect evaluation logs of the RAP tasks into a prediction file.

Each sample of ``rap_forecast``/``rap_state`` holds the episode keys in its metadata and the full
episode record in its store (``rap_record``: messages, search calls, answer); the answer is parsed
with the scorer's parser, so ``rap score`` on the file sees the weights the Inspect scorer
scored. The model name is the served model: Inspect's ``provider/model`` without the provider
(``vllm/Qwen/Qwen3-4B`` -> ``Qwen/Qwen3-4B``; ``openai-api/<service>/<model>`` -> ``<model>``).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pandas as pd

from rap_benchmark.core.errors import InputError, one_line
from rap_benchmark.integrations.submission import prediction_frame, prediction_row

RAP_TASKS = ("rap_forecast", "rap_state")
SERVICE_PROVIDERS = ("openai-api", "openai-api-completions")
"""Providers whose model names carry a service segment: ``openai-api/<service>/<model>``."""


def served_model_name(inspect_model: str) -> str:
    """The model name without Inspect's provider prefix (see the module docstring)."""
    provider, _, rest = inspect_model.partition("/")
    if not rest:
        return inspect_model
    if provider in SERVICE_PROVIDERS:
        _, _, rest = rest.partition("/")
    return rest or inspect_model


def find_logs(paths: Iterable[str | Path]) -> list[Path]:
    """Log files named, or found under folders (``*.eval`` and ``*.json`` logs, as Inspect lists
    them: an eval-set folder's ``logs.json`` and ``eval-set.json`` are not logs)."""
    from urllib.parse import unquote, urlparse

    from inspect_ai.log import list_eval_logs

    out: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            found = (urlparse(info.name) for info in list_eval_logs(str(p), recursive=True))
            out.extend(sorted(Path(unquote(u.path)) if u.scheme == "file" else Path(u.geturl()) for u in found))
        elif p.is_file():
            out.append(p)
        else:
            raise FileNotFoundError(f"no Inspect log or folder at {p}")
    if not out:
        raise FileNotFoundError("no Inspect logs (*.eval, *.json) found")
    return out


def _task_name(log: Any) -> str:
    return str(log.eval.task).rsplit("/", 1)[-1]


def log_predictions(paths: Iterable[str | Path], *, model: str | None = None) -> pd.DataFrame:
    """A prediction frame (``rap_benchmark.evaluation.predictions`` columns) from Inspect logs of
    the RAP tasks. When several logs hold the same episode and condition, the newest log wins
    (a rerun supersedes)."""
    from inspect_ai.log import read_eval_log

    rows: dict[tuple[str, str, str, str], tuple[str, dict[str, Any]]] = {}
    errored: dict[tuple[str, str, str, str], str] = {}
    names = set()
    for path in find_logs(paths):
        log = read_eval_log(str(path))
        if _task_name(log) not in RAP_TASKS or log.samples is None:
            continue
        name = model or served_model_name(str(log.eval.model))
        names.add(name)
        for sample in log.samples:
            record = (sample.store or {}).get("rap_record") or {}
            row = prediction_row(name, sample.metadata or {}, record.get("answer_text"), record)
            key = (name, row["condition"], row["field_id"], row["origin"])
            if sample.error is not None:  # a model or tool error is not an answer: never an invalid row
                errored[key] = str(sample.error.message)
                continue
            stamp = str(log.eval.created)
            if key not in rows or stamp >= rows[key][0]:
                rows[key] = (stamp, row)
    lost = [why for key, why in errored.items() if key not in rows]
    if lost:
        raise InputError(
            f"{len(lost)} sample(s) ended in an error, not an answer (first: {one_line(lost[0], 200)}); "
            "rerun them (inspect eval-retry LOG) and convert again"
        )
    if not rows:
        raise InputError("the logs hold no samples of the RAP tasks (rap_forecast, rap_state)")
    if len(names) > 1:
        raise InputError(f"the logs come from several models ({', '.join(sorted(names))}); convert each on its own")
    return prediction_frame([r for _, r in rows.values()])
