"""The agent-facing task specs of a CiteCast task folder, read as an agent gets them: ids only."""

from __future__ import annotations

from pathlib import Path

from rap_benchmark.citecast.records import TaskSpec, TaskSplit
from rap_benchmark.core.serial import read_jsonl


def load_specs(instance_dir: str | Path, split: TaskSplit | str) -> list[TaskSpec]:
    """The specs of one split; a spec with any key but ``task_id`` is refused."""
    rows = list(read_jsonl(Path(instance_dir) / "specs" / f"{TaskSplit(split).value}.jsonl"))
    for row in rows:
        if set(row) != {"task_id"}:
            raise ValueError(f"a task spec may carry only task_id, got keys {sorted(row)}")
    return [TaskSpec(r["task_id"]) for r in rows]
