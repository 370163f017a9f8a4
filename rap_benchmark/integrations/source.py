"""Which instance a harness task (lm-eval, Inspect) runs on, and its documents (one per episode).

The instance is, in order:

1. ``hub`` (task metadata / parameter) or ``$RAP_HUB``: the published Hugging Face datasets, a
   Hub organisation (``rap``; add ``hub_revision`` for a tag) or a folder written by ``rap hub
   export`` (``hub/`` or ``hub/rap``). No build is needed
   (:mod:`rap_benchmark.integrations.hub_instance`): withheld Test targets stay unknown (those
   episodes are run, recorded and left unscored), and the search index is built locally on first
   use, every universe checked against the published ``search_manifests``;
2. ``instance_dir`` or ``$RAP_INSTANCE_DIR``: a built instance folder (verified);
3. else the embedded ``mini`` instance built once into the cache, the CPU smoke test.

The cache is ``$RAP_CACHE_DIR`` or ``~/.cache/rap_benchmark``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import Any

from rap_benchmark.core.artifacts import Instance, load_instance
from rap_benchmark.core.fsio import build_once
from rap_benchmark.core.records import Condition, Policy, episode_id
from rap_benchmark.core.spec import BENCHMARK_VERSION
from rap_benchmark.core.sums import SUMS_FILE

DOC_SPLITS = ("dev", "test", "all")


def cache_root() -> Path:
    return Path(os.environ.get("RAP_CACHE_DIR") or Path.home() / ".cache" / "rap_benchmark")


def ensure_mini(root: Path | None = None) -> Path:
    """The cached ``mini`` instance of this benchmark version, built on first use (seconds)."""
    from rap_benchmark.core.spec import mini_spec
    from rap_benchmark.pipeline.build import build_instance

    out = (root or cache_root()) / "instances" / f"mini-{BENCHMARK_VERSION}"
    return build_once(out, SUMS_FILE, lambda folder: build_instance(mini_spec(), folder))


def instance_dir(metadata: dict[str, Any] | None = None) -> Path:
    explicit = (metadata or {}).get("instance_dir") or os.environ.get("RAP_INSTANCE_DIR")
    return Path(explicit) if explicit else ensure_mini()


@cache
def _load(path: str) -> Instance:
    return load_instance(path)


@cache
def _load_hub(hub: str, revision: str | None) -> Instance:
    from rap_benchmark.integrations.hub_instance import load_hub_instance

    return load_hub_instance(hub, revision=revision, cache=cache_root())


def instance_for(metadata: dict[str, Any] | None = None) -> Instance:
    """The instance the tasks run on (see the module docstring; loaded once per process)."""
    meta = metadata or {}
    hub = meta.get("hub") or (None if meta.get("instance_dir") else os.environ.get("RAP_HUB"))
    if hub:
        return _load_hub(str(hub), meta.get("hub_revision"))
    return _load(str(instance_dir(meta).resolve()))


def open_source(
    *, instance_dir: str | None = None, hub: str | None = None, hub_revision: str | None = None
) -> Instance:
    """:func:`instance_for` with keyword arguments (the Inspect tasks' parameters)."""
    return instance_for({"instance_dir": instance_dir, "hub": hub, "hub_revision": hub_revision})


def episode_docs(inst: Instance, condition: Condition | str, *, split: str = "test") -> list[dict[str, Any]]:
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


EPISODE_DOC_STRINGS = ("episode_id", "field_id", "origin", "split", "block_id", "condition", "task", "manifest_hash")


def docs_dataset(
    docs: list[dict[str, Any]], strings: Sequence[str] = EPISODE_DOC_STRINGS, vectors: Sequence[str] = ("x", "y")
) -> Any:
    """The documents as a ``datasets.DatasetDict`` with one ``test`` split (what lm-eval reads):
    ``strings`` columns of text, ``vectors`` columns of float64 lists."""
    import datasets

    features = {c: datasets.Value("string") for c in strings}
    features |= {c: datasets.Sequence(datasets.Value("float64")) for c in vectors}
    return datasets.DatasetDict({"test": datasets.Dataset.from_list(docs, features=datasets.Features(features))})
