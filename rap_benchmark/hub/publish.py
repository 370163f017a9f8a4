"""Push exported repos to the Hugging Face Hub (the only place that writes to the network).

Each repo is created, its folder uploaded in one commit and the version tag created on that
commit, through an ``HfApi``-like object (tests pass a fake); ``_private`` is never touched.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from rap_benchmark.hub.layout import MANIFEST_FILE, PRIVATE_DIR
from rap_benchmark.hub.load import verify_repo


class HubApi(Protocol):
    """The subset of ``huggingface_hub.HfApi`` that publishing uses."""

    def create_repo(self, repo_id: str, *, repo_type: str, private: bool, exist_ok: bool) -> Any: ...

    def upload_folder(
        self, *, repo_id: str, folder_path: str, repo_type: str, commit_message: str, delete_patterns: list[str]
    ) -> Any: ...

    def create_tag(
        self, repo_id: str, *, tag: str, repo_type: str, tag_message: str, revision: str | None, exist_ok: bool
    ) -> Any: ...


@dataclass(frozen=True)
class PublishStep:
    repo_id: str
    folder: Path
    action: str  # "create_repo", "upload_folder", "create_tag"
    detail: str


def find_repos(hub_dir: str | Path, org: str) -> list[Path]:
    """The exported repo folders under ``<hub_dir>/<org>/`` (never ``_private``)."""
    base = Path(hub_dir) / org
    if org == PRIVATE_DIR or not base.is_dir():
        raise FileNotFoundError(f"no exported repos under {base}")
    repos = sorted(p for p in base.iterdir() if p.is_dir() and (p / MANIFEST_FILE).is_file())
    if not repos:
        raise FileNotFoundError(f"no exported repos (folders with {MANIFEST_FILE}) under {base}")
    return repos


def plan(hub_dir: str | Path, *, org: str, tag: str, local_org: str | None = None) -> list[PublishStep]:
    """The calls ``publish`` would make, after verifying every repo against its manifest."""
    steps = []
    for folder in find_repos(hub_dir, local_org or org):
        problems = verify_repo(folder)
        if problems:
            raise RuntimeError(f"{folder} failed verification:\n  " + "\n  ".join(problems))
        repo_id = f"{org}/{folder.name}"
        steps.append(PublishStep(repo_id, folder, "create_repo", "repo_type=dataset"))
        steps.append(PublishStep(repo_id, folder, "upload_folder", str(folder)))
        steps.append(PublishStep(repo_id, folder, "create_tag", tag))
    return steps


def publish(
    hub_dir: str | Path,
    *,
    org: str,
    tag: str,
    private: bool = False,
    api: HubApi | None = None,
    local_org: str | None = None,
    dry_run: bool = False,
) -> list[PublishStep]:
    """Create, upload and tag every repo under ``<hub_dir>/<local_org or org>/`` as ``<org>/<name>``."""
    steps = plan(hub_dir, org=org, tag=tag, local_org=local_org)
    if dry_run:
        return steps
    if api is None:
        from huggingface_hub import HfApi

        api = HfApi()
    commits: dict[str, str | None] = {}
    for step in steps:
        if step.action == "create_repo":
            api.create_repo(step.repo_id, repo_type="dataset", private=private, exist_ok=True)
        elif step.action == "upload_folder":
            info = api.upload_folder(
                repo_id=step.repo_id,
                folder_path=str(step.folder),
                repo_type="dataset",
                commit_message=f"rap hub publish {tag}",
                delete_patterns=["data/**"],  # files of an earlier export that this one no longer has
            )
            commits[step.repo_id] = getattr(info, "oid", None)
        else:
            api.create_tag(
                step.repo_id,
                tag=tag,
                repo_type="dataset",
                tag_message=f"RAP {tag}",
                revision=commits.get(step.repo_id),
                exist_ok=True,
            )
    return steps
