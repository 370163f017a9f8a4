"""Which instance the lm-eval tasks run on, and their documents (one per episode).

The instance folder is, in order: the task metadata's ``instance_dir`` (``--metadata
'{"instance_dir": "build/mini"}'``), ``$RAP_INSTANCE_DIR``, else the embedded ``mini`` instance
built once into the cache (``$RAP_CACHE_DIR`` or ``~/.cache/rap_benchmark``).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

from rap_benchmark.core.artifacts import SUMS_FILE, Instance, load_instance
from rap_benchmark.core.fsio import remove_stale, temp_name
from rap_benchmark.core.records import Condition, Policy, Task, episode_id
from rap_benchmark.core.spec import BENCHMARK_VERSION

DOC_SPLITS = ("dev", "test", "all")


def cache_root() -> Path:
    return Path(os.environ.get("RAP_CACHE_DIR") or Path.home() / ".cache" / "rap_benchmark")


def cached_build(out: Path, build: Callable[[Path], object]) -> Path:
    """``out`` once it holds a verified build; on first use ``build(tmp)`` fills a temporary
    folder beside it that then atomically replaces ``out`` (another process may win the race)."""
    if (out / SUMS_FILE).is_file():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    remove_stale(out.parent, name=out.name)  # what killed builds left behind
    tmp = temp_name(out, "building")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        build(tmp / "build")
        if not (out / SUMS_FILE).is_file():
            if out.exists():
                shutil.rmtree(out)
            os.replace(tmp / "build", out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def ensure_mini(root: Path | None = None) -> Path:
    """The cached ``mini`` instance of this benchmark version, built on first use (seconds)."""
    from rap_benchmark.core.spec import mini_spec
    from rap_benchmark.pipeline.build import build_instance

    out = (root or cache_root()) / "instances" / f"mini-{BENCHMARK_VERSION}"
    return cached_build(out, lambda tmp: build_instance(mini_spec(), tmp))


def instance_dir(metadata: dict[str, Any] | None = None) -> Path:
    explicit = (metadata or {}).get("instance_dir") or os.environ.get("RAP_INSTANCE_DIR")
    return Path(explicit) if explicit else ensure_mini()


@cache
def _load(path: str) -> Instance:
    return load_instance(path)


def instance_for(metadata: dict[str, Any] | None = None) -> Instance:
    """The verified instance the tasks run on (loaded once per process and folder)."""
    return _load(str(instance_dir(metadata).resolve()))


def episode_docs(inst: Instance, condition: Condition, *, split: str = "test") -> list[dict[str, Any]]:
    """One document per canonical-policy episode of ``split`` (dev, test or all), sorted by
    (field_id, origin). A document never reaches the prompt: the prompt is built from the codebook,
    the origin and the condition only. ``target`` is the composition the task is scored against
    (y for Forecast and State alike: the benchmark's episode score; ``x`` serves State fidelity)."""
    if split not in DOC_SPLITS:
        raise ValueError(f"split must be one of {', '.join(DOC_SPLITS)}, got {split!r}")
    condition = Condition(condition)
    ep = inst.episodes.loc[inst.episodes["policy"] == Policy.CANONICAL.value]
    if split != "all":
        ep = ep.loc[ep["split"] == split]
    ep = ep.sort_values(["field_id", "origin"], kind="stable")
    docs = []
    for row in ep.itertuples(index=False):
        origin = str(row.origin)[:10]
        docs.append(
            {
                "episode_id": episode_id(row.field_id, origin),
                "field_id": str(row.field_id),
                "origin": origin,
                "split": str(row.split),
                "block_id": str(row.block_id),
                "condition": condition.value,
                "task": condition.task.value,
                "manifest_hash": inst.manifest_hash,
                "x": None if row.x is None else [float(v) for v in row.x],
                "y": None if row.y is None else [float(v) for v in row.y],
            }
        )
    return docs


def docs_dataset(docs: list[dict[str, Any]]) -> Any:
    """The documents as a ``datasets.DatasetDict`` with one ``test`` split (what lm-eval reads)."""
    import datasets

    features = datasets.Features(
        {
            "episode_id": datasets.Value("string"),
            "field_id": datasets.Value("string"),
            "origin": datasets.Value("string"),
            "split": datasets.Value("string"),
            "block_id": datasets.Value("string"),
            "condition": datasets.Value("string"),
            "task": datasets.Value("string"),
            "manifest_hash": datasets.Value("string"),
            "x": datasets.Sequence(datasets.Value("float64")),
            "y": datasets.Sequence(datasets.Value("float64")),
        }
    )
    return datasets.DatasetDict({"test": datasets.Dataset.from_list(docs, features=features)})


def is_state(condition: Condition) -> bool:
    return Condition(condition).task is Task.STATE
