"""What to say when the path given as a prediction file is not one: where the file most likely
is (a run folder's ``predictions.jsonl``, a name one typo away), or what writes one."""

from __future__ import annotations

import json
from pathlib import Path

from rap_benchmark.core.suggest import nearby

RUN_PREDICTIONS = "predictions.jsonl"
"""The prediction file a run folder holds (``rap run --out RUN`` writes ``RUN/predictions.jsonl``)."""
RUN_RECORD = "run.json"
"""What makes a folder a run folder."""
SUFFIXES = (".jsonl", ".parquet")

WRITERS = "rap run --out RUN writes RUN/predictions.jsonl, rap baselines --out FILE the baselines'"


def not_a_prediction_file(path: str | Path) -> str:
    """``no such prediction file: PATH``, then the next step: ``did you mean RUN/predictions.jsonl?``
    for a run folder, how to finish a run that has none yet, the one prediction file of a folder,
    the file beside PATH whose name is closest, or the commands that write one."""
    path = Path(path)
    said = f"no such prediction file: {path}"
    if path.is_dir():
        inside = path / RUN_PREDICTIONS
        if (path / RUN_RECORD).is_file():
            if run_kind(path) == "citecast":
                return f"{said} (a CiteCast run folder: its rewards are in {inside}, not a RAP prediction file)"
            if inside.is_file():
                return f"{said} (a run folder); did you mean {inside}?"
            return (
                f"{said} (a run folder without {RUN_PREDICTIONS} yet); run the same rap run command again to "
                f"finish it (finished units are kept), then give {inside}"
            )
        files = sorted(p for p in path.glob("*") if p.suffix in SUFFIXES and p.is_file())
        if len(files) == 1:
            return f"{said} (a folder); did you mean {files[0]}?"
        return (
            f"{said} (a folder of {len(files)} prediction files: give one)"
            if files
            else f"{said} (a folder; {WRITERS})"
        )
    near = nearby(path, lambda p: (p.suffix in SUFFIXES and p.is_file()) or (p / RUN_PREDICTIONS).is_file())
    if near is not None:
        return f"{said}; did you mean {near / RUN_PREDICTIONS if near.is_dir() else near}?"
    return f"{said} ({WRITERS})"


def run_kind(run: Path) -> str | None:
    """The ``kind`` its ``run.json`` states (``citecast`` for a ``rap citecast run`` folder)."""
    try:
        return json.loads((run / RUN_RECORD).read_text(encoding="utf-8")).get("kind")
    except (OSError, ValueError, AttributeError):
        return None
