"""An instance assembled from the published Hugging Face datasets, for the harness tasks.

``load_hub_instance("rap")`` (a Hub organisation) or ``load_hub_instance("hub/")`` (a folder
written by ``rap hub export``) reads the ``episodes``, ``fields``, ``splits``, ``papers``,
``assignments`` and ``search_manifests`` repos, every file checked against its repo's
``rap_manifest.json``, and returns an :class:`~rap_benchmark.core.artifacts.Instance` that holds
what a harness needs and no more:

* episodes with ``y`` where the repo publishes it; withheld Test rows come from the ``*_heldout``
  configs with ``y`` (and ``y_counts``, ``n_y``) unknown, so they are run but not scored; the
  ``*_pending`` episodes of a living version (target window not covered yet, flag ``y_pending``)
  likewise, and their forecasts are refused for scoring (they are sealed instead);
* memberships without the withheld rows (the search never needs them: a universe ends at its
  origin, and targets are withheld only from the last origin on);
* the spec the instance was built with (from the manifest), and the instance's manifest hash,
  which prediction files then carry, so ``rap score`` on the full instance accepts them.

The search universes rebuilt from these memberships are compared with the published
``search_manifests`` (paper count and shard hash of every (field, origin, regime)); any
difference is an error. ``root`` is a cache folder keyed by the manifest hash that holds a copy
of the papers table, so the search engine's token cache (``.cache/``) is built once.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from rap_benchmark.core.artifacts import Instance, codebook_from_dict
from rap_benchmark.core.errors import InputError
from rap_benchmark.core.fsio import atomic_path
from rap_benchmark.core.records import Policy
from rap_benchmark.core.spec import BenchmarkSpec
from rap_benchmark.hub.layout import HELDOUT_SUFFIX, MANIFEST_FILE, PENDING_SUFFIX, REPO_NAMES


class HubInstanceError(InputError):
    """The published datasets are incomplete, inconsistent, or differ from their manifests."""


def repo_locations(hub: str | Path, *, revision: str | None = None) -> dict[str, Path]:
    """Local folders of the repos: ``hub`` is an export folder (``<dir>`` holding one org folder,
    or ``<dir>/<org>``), a Hub organisation name (``rap``) or one of its repo ids
    (``rap/episodes``); Hub repos are downloaded once by ``huggingface_hub`` (at ``revision``)."""
    from rap_benchmark.hub.load import resolve_repo

    path = Path(hub)
    if path.is_dir():
        org_dir = path
        if not (org_dir / "episodes" / MANIFEST_FILE).is_file():
            orgs = [d for d in sorted(path.iterdir()) if (d / "episodes" / MANIFEST_FILE).is_file()]
            if len(orgs) != 1:
                raise HubInstanceError(
                    f"{hub}: not an export folder (expected <dir>/<org>/episodes/{MANIFEST_FILE}; found {len(orgs)} orgs)"
                )
            org_dir = orgs[0]
        missing = [r for r in REPO_NAMES if not (org_dir / r / MANIFEST_FILE).is_file()]
        if missing:
            raise HubInstanceError(f"{org_dir}: missing repo(s) {', '.join(missing)} (export them with rap hub export)")
        return {r: org_dir / r for r in REPO_NAMES}
    org = str(hub).strip("/")
    if org.count("/") == 1 and org.split("/")[1] in REPO_NAMES:
        org = org.split("/")[0]  # a repo id such as rap/episodes names its organisation's repos
    if not org or "/" in org:
        raise HubInstanceError(f"{hub}: neither a folder nor a Hub organisation (rap) or repo id (rap/episodes)")
    return {r: resolve_repo(f"{org}/{r}", revision=revision) for r in REPO_NAMES}


def _tables(repo: Path, manifest: dict[str, Any], configs: list[str] | None = None) -> dict[str, pd.DataFrame]:
    """config -> its splits concatenated (each file checked against the manifest)."""
    from rap_benchmark.hub.load import load_table

    out = {}
    for cfg, splits in manifest["configs"].items():
        if configs is not None and cfg not in configs:
            continue
        frames = [load_table(repo, cfg, split) for split in splits]
        out[cfg] = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    return out


def _episodes(repo: Path, manifest: dict[str, Any]) -> pd.DataFrame:
    tables = _tables(repo, manifest)
    frames = []
    for policy in Policy:
        if policy.value not in tables:
            continue
        frames.append(tables[policy.value])
        for suffix in (HELDOUT_SUFFIX, PENDING_SUFFIX):
            held = tables.get(policy.value + suffix)
            if held is not None and len(held):
                held = held.drop(columns=[c for c in ("key", "target_sha256") if c in held]).copy()
                for col in ("y", "y_counts"):
                    held[col] = pd.Series([None] * len(held), dtype=object)
                held["n_y"] = np.nan
                frames.append(held)
    eps = pd.concat(frames, ignore_index=True)
    eps = eps.drop(columns=["episode_id"], errors="ignore")
    order = {p.value: i for i, p in enumerate(Policy)}
    eps["_p"] = eps["policy"].map(order)
    eps = eps.sort_values(["field_id", "origin", "_p"], kind="stable").drop(columns="_p").reset_index(drop=True)
    for col in ("x", "y"):
        eps[col] = eps[col].map(lambda v: None if v is None or (isinstance(v, float) and np.isnan(v)) else v)
    return eps


def _check_universes(
    assignments: pd.DataFrame, fields: list[str], spec: BenchmarkSpec, published: pd.DataFrame
) -> None:
    from rap_benchmark.bm25.engine import universe_problems
    from rap_benchmark.pipeline.episodes import search_manifest

    problems = universe_problems(search_manifest(assignments, fields, spec), published)
    if problems:
        raise HubInstanceError(
            f"{len(problems)} search universe(s) rebuilt from the published papers and assignments differ from "
            f"search_manifests, e.g. {problems[0]}"
        )


def load_hub_instance(hub: str | Path, *, revision: str | None = None, cache: Path) -> Instance:
    """The harness view of the published datasets (see the module docstring)."""
    from rap_benchmark.hub.load import read_manifest

    repos = repo_locations(hub, revision=revision)
    manifests = {name: read_manifest(path) for name, path in repos.items()}
    hashes = {m["manifest_hash"] for m in manifests.values()}
    if len(hashes) != 1:
        raise HubInstanceError(f"{hub}: the repos come from {len(hashes)} different instances (manifest hashes differ)")
    ep_manifest = manifests["episodes"]
    if "spec" not in ep_manifest:
        raise HubInstanceError(f"{repos['episodes']}: the manifest has no spec (exported by an older rap hub export)")
    spec = BenchmarkSpec.from_dict(ep_manifest["spec"])
    manifest_hash = hashes.pop()

    fields = _tables(repos["fields"], manifests["fields"], ["default"])["default"]
    codebooks = {row["field_id"]: codebook_from_dict(row) for row in fields.to_dict(orient="records")}
    blocks = _tables(repos["splits"], manifests["splits"], ["fields"])["fields"]
    blocks = blocks[["field_id", "block_id", "split"]].sort_values("field_id", kind="stable").reset_index(drop=True)
    papers = _tables(repos["papers"], manifests["papers"], ["default"])["default"]
    assignments = _tables(repos["assignments"], manifests["assignments"], ["default"])["default"]
    # Dev rows may name papers past the withholding date, which the papers repo leaves out; no search
    # universe reaches them (every universe ends at its origin), and the check below confirms it
    assignments = assignments.loc[assignments["arxiv_id"].isin(papers["arxiv_id"])]
    assignments = assignments.sort_values(["field_id", "date", "arxiv_id"], kind="stable").reset_index(drop=True)
    search = _tables(repos["search_manifests"], manifests["search_manifests"], ["default"])["default"]
    _check_universes(assignments, sorted(codebooks), spec, search)
    episodes = _episodes(repos["episodes"], ep_manifest)

    root = cache / "hub" / manifest_hash
    papers_file = manifests["papers"]["configs"]["default"]["corpus"]["path"]
    if not (root / "papers.parquet").is_file():
        with atomic_path(root / "papers.parquet") as tmp:
            shutil.copyfile(repos["papers"] / papers_file, tmp)
    return Instance(
        root=root,
        spec=spec,
        ledger={"benchmark_version": ep_manifest["benchmark_version"], "spec": ep_manifest["spec"]},
        papers=papers,
        codebooks=codebooks,
        assignments=assignments,
        blocks=blocks,
        episodes=episodes,
        search_manifest=search,
        manifest_hash=manifest_hash,
    )
