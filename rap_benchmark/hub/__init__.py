"""Distribution on the Hugging Face Hub: export a built instance as dataset repos, publish them,
read them back, and check revealed targets against their salted commitments."""

from rap_benchmark.hub.export import DEFAULT_ORG, ExportResult, export_instance, instance_repos
from rap_benchmark.hub.layout import PRIVATE_DIR, REPO_NAMES, RepoTables
from rap_benchmark.hub.load import RepoError, load_repo, load_table, read_manifest, resolve_repo, verify_repo
from rap_benchmark.hub.publish import PublishStep, publish
from rap_benchmark.hub.reveal import RevealReport, verify_reveal

__all__ = [
    "DEFAULT_ORG",
    "PRIVATE_DIR",
    "REPO_NAMES",
    "ExportResult",
    "PublishStep",
    "RepoError",
    "RepoTables",
    "RevealReport",
    "export_instance",
    "instance_repos",
    "load_repo",
    "load_table",
    "publish",
    "read_manifest",
    "resolve_repo",
    "verify_repo",
    "verify_reveal",
]
