"""The CiteCast instance a harness runs on, and its documents (shared by the lm-eval and the
Inspect ``citecast`` tasks; imports neither harness).

The instance folder is, in order: ``citecast_dir``, ``$RAP_CITECAST_DIR``, ``instance_dir`` when
it holds a CiteCast instance (lm-eval's ``--metadata`` is shared by every task of a run, so a RAP
``instance_dir`` is left to the RAP tasks), else the embedded instance built once into the cache
(``$RAP_CACHE_DIR`` or ``~/.cache/rap_benchmark``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

from rap_benchmark.citecast.env import CiteCastEnv
from rap_benchmark.citecast.instance import MANIFEST
from rap_benchmark.core.fsio import build_once
from rap_benchmark.core.spec import CITECAST_VERSION
from rap_benchmark.core.sums import SUMS_FILE
from rap_benchmark.integrations.source import cache_root

CITECAST_DIR_ENV = "RAP_CITECAST_DIR"
DOC_SPLITS = ("train", "test", "all")


def ensure_embedded(root: Path | None = None) -> Path:
    """The cached embedded CiteCast instance of this CiteCast version, built on first use (seconds)."""
    from rap_benchmark.citecast.embedded import build_embedded

    out = (root or cache_root()) / "citecast" / f"embedded-{CITECAST_VERSION}"
    return build_once(out, SUMS_FILE, build_embedded)


def citecast_dir(metadata: Mapping[str, Any] | None = None) -> Path:
    """The CiteCast instance folder the task runs on (see the module docstring for the order)."""
    meta = metadata or {}
    explicit = meta.get("citecast_dir") or os.environ.get(CITECAST_DIR_ENV)
    if explicit:
        return Path(explicit)
    shared = meta.get("instance_dir")
    if shared and (Path(shared) / MANIFEST).is_file():
        return Path(shared)
    return ensure_embedded()


@cache
def _env(path: str) -> CiteCastEnv:
    env = CiteCastEnv.from_instance(path)
    env.warm()
    return env


def citecast_env(metadata: Mapping[str, Any] | None = None) -> CiteCastEnv:
    """The environment (verified instance, search index built) for the task's folder; one per
    process and folder, so its sessions outlive the evaluation and can be inspected."""
    return _env(str(citecast_dir(metadata).resolve()))


def citecast_docs(env: CiteCastEnv, split: str = "test") -> list[dict[str, str]]:
    """One document per task of ``split`` (train, test or all), sorted by task id: the id and its
    split only (what an agent-facing task spec carries)."""
    if split not in DOC_SPLITS:
        raise ValueError(f"split must be one of {', '.join(DOC_SPLITS)}, got {split!r}")
    ids = env.task_ids(None if split == "all" else split)
    return [{"task_id": t, "split": env.tasks[t].split.value} for t in ids]
