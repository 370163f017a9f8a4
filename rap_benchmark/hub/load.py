"""Read exported repos back: a Hub id (``rap/assignments``) or a local folder.

A local folder is used as is; anything else is fetched with ``huggingface_hub.snapshot_download``
(the only network call, at the edge). Files are checked against the repo's ``rap_manifest.json``
before they are used.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

from rap_benchmark.core.sums import sha256_file
from rap_benchmark.hub.layout import MANIFEST_FILE


class RepoError(RuntimeError):
    """A repo is missing, incomplete, or a file differs from its manifest."""


def resolve_repo(repo: str | Path, *, revision: str | None = None) -> Path:
    """A local folder for ``repo``: the folder itself, or a snapshot of the Hub dataset repo."""
    path = Path(repo)
    if path.is_dir():
        return path
    if isinstance(repo, Path) or str(repo).count("/") != 1 or str(repo).startswith((".", "/")):
        raise RepoError(f"{repo}: not a folder and not a Hub id of the form org/name")
    from huggingface_hub import snapshot_download

    return Path(snapshot_download(repo_id=str(repo), repo_type="dataset", revision=revision))


def read_manifest(repo_dir: str | Path) -> dict[str, Any]:
    path = Path(repo_dir) / MANIFEST_FILE
    if not path.is_file():
        raise RepoError(f"{repo_dir}: no {MANIFEST_FILE} (not a repo written by rap hub export)")
    return json.loads(path.read_text(encoding="utf-8"))


def verify_repo(repo_dir: str | Path) -> list[str]:
    """Check every data file against the manifest; return the problems (empty = verified)."""
    repo_dir = Path(repo_dir)
    manifest = read_manifest(repo_dir)
    problems = []
    for cfg, splits in manifest["configs"].items():
        for split, info in splits.items():
            path = repo_dir / info["path"]
            if not path.is_file():
                problems.append(f"{cfg}/{split}: {info['path']} is missing")
            elif sha256_file(path) != info["sha256"]:
                problems.append(f"{cfg}/{split}: {info['path']} differs from its manifest sha256")
    return problems


def load_repo(
    repo: str | Path,
    config: str | None = None,
    split: str | None = None,
    *,
    revision: str | None = None,
    verify: bool = True,
) -> Any:
    """``datasets.load_dataset`` on a verified local copy of ``repo`` (Hub id or folder)."""
    import datasets

    local = resolve_repo(repo, revision=revision)
    if verify:
        problems = verify_repo(local)
        if problems:
            raise RepoError(f"{repo} failed verification:\n  " + "\n  ".join(problems))
    return datasets.load_dataset(str(local), config, split=split)


def load_table(repo: str | Path, config: str, split: str, *, revision: str | None = None) -> pd.DataFrame:
    """One (config, split) as a pandas frame, read straight from its parquet file (verified)."""
    local = resolve_repo(repo, revision=revision)
    manifest = read_manifest(local)
    try:
        info = manifest["configs"][config][split]
    except KeyError as exc:
        raise RepoError(f"{repo}: no config/split {config}/{split}") from exc
    path = local / info["path"]
    if sha256_file(path) != info["sha256"]:
        raise RepoError(f"{path} differs from its manifest sha256")
    return pd.read_parquet(path)
