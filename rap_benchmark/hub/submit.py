"""A submission as a pull request on the board's submissions dataset repo on the Hugging Face Hub.

``rap submit push`` validates a submission, then sends its files in one commit with
``create_pr=True``: the prediction file to ``submissions/<track>/<model slug><suffix>`` and its
metadata beside it (``<that>.meta.json``), where ``<track>`` is ``rap`` or ``citecast``. The pull
request's description states what was validated (model, conditions or tasks, instance manifest
hash, knowledge cutoff, warnings) and each file's size and sha256. :func:`open_pull_request` is
the only function here that touches the network; the plan (:func:`submission_pull_request`) needs
neither ``huggingface_hub`` nor a token, so ``--dry-run`` works offline.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rap_benchmark.core.errors import InputError, ServiceError, one_line
from rap_benchmark.core.fsio import slug
from rap_benchmark.core.spec import package_version
from rap_benchmark.evaluation.citecast_submissions import CITECAST, CiteCastReport
from rap_benchmark.evaluation.submissions import META_SUFFIX, SubmissionReport

REPO_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,95}/[A-Za-z0-9][A-Za-z0-9._-]{0,95}")
SUBMISSIONS_DIR = "submissions"
NETWORK_MODULES = frozenset({"huggingface_hub", "httpx", "httpx2", "requests", "urllib3"})
"""An exception raised from these packages during the commit is the Hub failing, said in one line."""


def check_repo_id(text: str) -> str:
    """``ORG/NAME`` of a dataset repo, or an :class:`InputError` naming the expected form."""
    if not REPO_ID.fullmatch(text) or ".." in text or text.endswith((".", "-")):
        raise InputError(f"--repo must be a Hub repo id ORG/NAME (e.g. my-org/rap-submissions), got {text!r}")
    return text


@dataclass(frozen=True)
class UploadFile:
    """One file of the commit: where it goes in the repo and the exact bytes that were validated."""

    path_in_repo: str
    source: Path
    data: bytes = field(repr=False)

    @property
    def size(self) -> int:
        return len(self.data)

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.data).hexdigest()


@dataclass(frozen=True)
class PullRequest:
    """What ``rap submit push`` sends: one commit of ``files`` opened as a pull request on ``repo_id``."""

    repo_id: str
    title: str
    description: str
    files: tuple[UploadFile, ...]

    @property
    def url(self) -> str:
        return f"https://huggingface.co/datasets/{self.repo_id}"

    def plan_text(self) -> str:
        """The dry run's report: the repo, the title, every file (path in the repo, bytes, sha256), the description."""
        width = max(len(f.path_in_repo) for f in self.files)
        lines = [
            f"pull request on the dataset repo {self.repo_id} ({self.url})",
            f"title: {self.title}",
            "files:",
            *(f"  {f.path_in_repo:<{width}}  {f.size:>10,} bytes  sha256 {f.sha256}" for f in self.files),
            "description:",
            *(f"  {line}".rstrip() for line in self.description.splitlines()),
        ]
        return "\n".join(lines)


def _facts(report: SubmissionReport | CiteCastReport) -> tuple[str, str, list[tuple[str, str]]]:
    """The track, the title's scope and the description's (label, value) rows of a validated submission."""
    meta = report.meta
    assert meta is not None
    cutoff = meta.knowledge_cutoff.isoformat() if meta.knowledge_cutoff else "not stated"
    if isinstance(report, CiteCastReport):
        covered = f"{len(report.predictions)} of {report.n_test_tasks} Test tasks"
        rows = [("benchmark", "CiteCast"), ("tasks", covered)]
        track, scope = CITECAST, f"CiteCast, {covered}"
    else:
        conditions = ", ".join(c.value for c in meta.conditions)
        rows = [("benchmark", "RAP, retrospective track"), ("conditions", conditions)]
        track, scope = "rap", f"RAP {conditions}"
    rows = [("model", f"`{meta.model}`"), *rows, ("instance manifest hash", f"`{meta.manifest_hash}`")]
    rows += [("knowledge cutoff", cutoff), ("submitter", meta.submitter or "not stated")]
    return track, scope, rows


def submission_pull_request(
    report: SubmissionReport | CiteCastReport, repo_id: str, *, meta_path: str | Path | None = None
) -> PullRequest:
    """The pull request of an accepted submission: its file and metadata file (the sidecar, or
    ``meta_path``; a parquet file holding its own metadata goes alone), their bytes read once."""
    if not report.accepted or report.meta is None:
        raise InputError(f"{report.path} was rejected: fix it first (rap submit validate names each problem)")
    track, scope, rows = _facts(report)
    name = slug(report.meta.model) + report.path.suffix.lower()
    base = f"{SUBMISSIONS_DIR}/{track}/{name}"
    files = [UploadFile(base, report.path, report.path.read_bytes())]
    sidecar = Path(meta_path) if meta_path else report.path.with_name(report.path.name + META_SUFFIX)
    if sidecar.is_file():
        files.append(UploadFile(base + META_SUFFIX, sidecar, sidecar.read_bytes()))
    notes = [p for p in report.problems if not p.startswith("[fatal]")]
    lines = [
        f"A submission to the {'CiteCast' if track == CITECAST else 'RAP'} board, opened with `rap submit push` "
        f"(rap_benchmark {package_version()}).",
        "",
        "| | |",
        "| --- | --- |",
        *(f"| {label} | {value} |" for label, value in rows),
        f"| validation | accepted{f', {len(notes)} note(s) below' if notes else ', no problem found'} |",
        "",
        "Files:",
        "",
        *(f"- `{f.path_in_repo}`: {f.size:,} bytes, sha256 `{f.sha256}`" for f in files),
    ]
    if notes:
        lines += ["", "Validation notes:", "", *(f"- {p}" for p in notes)]
    lines += [
        "",
        "For the maintainers: score it against the withheld targets with `rap leaderboard score`, then merge "
        "(docs/SUBMITTING.md in rap_benchmark).",
    ]
    return PullRequest(repo_id, f"Submission: {report.meta.model} ({scope})", "\n".join(lines), tuple(files))


def _hub_failure(exc: Exception, repo_id: str) -> ServiceError:
    """One line for an exception the Hub (or the way to it) raised while the pull request was opened."""
    status = getattr(getattr(exc, "response", None), "status_code", None)
    first = one_line(str(exc).split("\n", 1)[0], 200)
    hint = {
        401: "the token was refused: log in again (hf auth login) or set HF_TOKEN",
        403: "the token may not write to it: use a token with write access",
        404: f"no dataset repo {repo_id} that this token can see: check --repo",
    }.get(status or 0, "check the network, or try again later")
    return ServiceError(f"could not open a pull request on {repo_id} ({type(exc).__name__}: {first}); {hint}")


def _hf() -> Any:
    try:
        import huggingface_hub
    except ImportError:
        raise InputError(
            "needs huggingface_hub: pip install 'rap_benchmark[hf]' (--dry-run works without it)"
        ) from None
    return huggingface_hub


def hub_token() -> str:
    """The usual Hugging Face token (``HF_TOKEN``, or the one ``hf auth login`` saved); its
    absence is an :class:`InputError` naming both ways to give one. Asked before anything else."""
    token = _hf().get_token()
    if not token:
        raise InputError(
            "no Hugging Face token: log in with hf auth login or set HF_TOKEN "
            "(--dry-run shows what would be sent, without one)"
        )
    return str(token)


def open_pull_request(pr: PullRequest, *, token: str | None = None) -> str:
    """Send ``pr``'s files in one commit opened as a pull request; return its URL. The token is
    ``token``, else :func:`hub_token`'s."""
    hf = _hf()
    token = token or hub_token()
    operations = [hf.CommitOperationAdd(path_in_repo=f.path_in_repo, path_or_fileobj=f.data) for f in pr.files]
    try:
        info: Any = hf.HfApi(token=token).create_commit(
            repo_id=pr.repo_id,
            repo_type="dataset",
            operations=operations,
            commit_message=pr.title,
            commit_description=pr.description,
            create_pr=True,
        )
    except Exception as exc:
        if isinstance(exc, OSError) or type(exc).__module__.split(".")[0] in NETWORK_MODULES:
            raise _hub_failure(exc, pr.repo_id) from exc
        raise
    return str(getattr(info, "pr_url", None) or getattr(info, "commit_url", None) or pr.url)
