"""``rap submit push``: a validated submission becomes one commit opened as a pull request on the
board's submissions dataset repo, built from ``huggingface_hub``'s own API objects; ``--dry-run``
prints the files and the pull request and sends nothing. No test here reaches the network:
``HfApi.create_commit`` is replaced, or the Hub is a local server, or offline mode refuses."""

from __future__ import annotations

import hashlib
import http.server
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from rap_benchmark.cli import main

huggingface_hub = pytest.importorskip("huggingface_hub")

REPO_ID = "my-org/rap-submissions"
MODEL = "baseline/ewma"


@pytest.fixture(scope="module")
def submission(mini_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One statistical baseline as a submission, through the stock CLI (rap baselines, rap submit split)."""
    root = tmp_path_factory.mktemp("push")
    assert main(["baselines", str(mini_dir), "--out", str(root / "baselines.jsonl")]) == 0
    assert main(["submit", "split", str(root / "baselines.jsonl"), "--out", str(root / "subs")]) == 0
    path = root / "subs" / "baseline_ewma-4d5e1806.jsonl"
    meta = json.loads(Path(f"{path}.meta.json").read_text(encoding="utf-8"))
    assert meta["model"] == MODEL, "rap submit split names the file by the model's slug"
    return path


@pytest.fixture
def commits(monkeypatch: pytest.MonkeyPatch) -> list[dict]:
    """Every ``HfApi.create_commit`` call (its keyword arguments and the token of its ``HfApi``)."""
    calls: list[dict] = []

    def create_commit(self, **kwargs):
        calls.append({**kwargs, "token": self.token})
        return huggingface_hub.CommitInfo(
            commit_url=f"https://huggingface.co/datasets/{REPO_ID}/commit/abc123",
            commit_message=kwargs["commit_message"],
            commit_description=kwargs["commit_description"],
            oid="abc123",
            pr_url=f"https://huggingface.co/datasets/{REPO_ID}/discussions/7",
        )

    monkeypatch.setattr(huggingface_hub.HfApi, "create_commit", create_commit)
    return calls


def _no_token(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.delenv("HUGGING_FACE_HUB_TOKEN", raising=False)
    monkeypatch.setenv("HF_TOKEN_PATH", str(tmp_path / "no-token"))


def test_push_sends_the_validated_files_as_one_pull_request(
    submission: Path, mini_dir: Path, commits: list[dict], monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    monkeypatch.setenv("HF_TOKEN", "hf_test_token")
    rc = main(["submit", "push", str(submission), "--repo", REPO_ID, "--instance", str(mini_dir)])
    out = capsys.readouterr().out
    assert rc == 0
    assert out.strip().endswith(f"opened https://huggingface.co/datasets/{REPO_ID}/discussions/7")
    assert len(commits) == 1
    call = commits[0]
    assert call["repo_id"] == REPO_ID
    assert call["repo_type"] == "dataset"
    assert call["create_pr"] is True
    assert call["token"] == "hf_test_token"
    ops = call["operations"]
    assert all(isinstance(op, huggingface_hub.CommitOperationAdd) for op in ops)
    meta_file = Path(f"{submission}.meta.json")
    want = {
        "submissions/rap/baseline_ewma-4d5e1806.jsonl": submission.read_bytes(),
        "submissions/rap/baseline_ewma-4d5e1806.jsonl.meta.json": meta_file.read_bytes(),
    }
    assert {op.path_in_repo: op.path_or_fileobj for op in ops} == want
    assert call["commit_message"] == f"Submission: {MODEL} (RAP A0)"
    for data in want.values():  # the description names every file by its sha256
        assert hashlib.sha256(data).hexdigest() in call["commit_description"]
    assert json.loads(meta_file.read_text(encoding="utf-8"))["manifest_hash"] in call["commit_description"]


def test_dry_run_prints_the_files_and_the_pull_request_and_sends_nothing(
    submission: Path, mini_dir: Path, commits: list[dict], monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys
) -> None:
    _no_token(monkeypatch, tmp_path)  # a dry run needs no token
    rc = main(["submit", "push", str(submission), "--repo", REPO_ID, "--instance", str(mini_dir), "--dry-run"])
    out = capsys.readouterr().out
    assert rc == 0
    assert commits == []
    lines = out.splitlines()
    assert lines[0] == "dry run: nothing was sent"
    assert lines[1] == f"pull request on the dataset repo {REPO_ID} (https://huggingface.co/datasets/{REPO_ID})"
    assert lines[2] == f"title: Submission: {MODEL} (RAP A0)"
    for local, in_repo in (
        (submission, "submissions/rap/baseline_ewma-4d5e1806.jsonl"),
        (Path(f"{submission}.meta.json"), "submissions/rap/baseline_ewma-4d5e1806.jsonl.meta.json"),
    ):
        data = local.read_bytes()
        row = next(line for line in lines if line.strip().startswith(in_repo + " "))
        assert row.split() == [in_repo, f"{len(data):,}", "bytes", "sha256", hashlib.sha256(data).hexdigest()]
    assert "  For the maintainers: score it against the withheld targets with `rap leaderboard score`" in out


def test_a_rejected_submission_is_never_sent(
    submission: Path, mini_dir: Path, commits: list[dict], monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys
) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(submission.read_bytes())
    meta = json.loads(Path(f"{submission}.meta.json").read_text(encoding="utf-8"))
    Path(f"{bad}.meta.json").write_text(json.dumps({**meta, "manifest_hash": "0" * 64}), encoding="utf-8")
    monkeypatch.setenv("HF_TOKEN", "hf_test_token")
    rc = main(["submit", "push", str(bad), "--repo", REPO_ID, "--instance", str(mini_dir)])
    err = capsys.readouterr().err
    assert rc == 1
    assert commits == []
    assert "is not this instance's" in err
    assert err.strip().splitlines()[-1] == "rap submit push: rejected, nothing was sent: fix the problems above"


@pytest.mark.parametrize("kind", ["rap", "citecast"])
def test_a_run_folder_given_to_push_names_submit_prepare(
    kind: str, mini_dir: Path, commits: list[dict], tmp_path: Path, capsys
) -> None:
    """Pushing a run folder said "no such submission file: runs/x" (push) and, for a CiteCast run
    given to validate, called it "a RAP submission": a run becomes a submission with rap submit prepare."""
    run = tmp_path / "runs" / "my-model"
    run.mkdir(parents=True)
    (run / "run.json").write_text(json.dumps({"kind": kind}), encoding="utf-8")
    prepare = f"{run} is a run folder, not a submission: rap submit prepare {run} --out subs/my-model.jsonl writes one"
    assert main(["submit", "push", str(run), "--repo", REPO_ID, "--instance", str(mini_dir), "--dry-run"]) == 2
    assert capsys.readouterr().err == f"rap submit push: {prepare}\n"
    assert commits == []
    if kind == "citecast":  # validate names the CiteCast instance it needs first, then prepare
        assert main(["submit", "validate", str(run), "--instance", str(mini_dir)]) == 2
        assert "is a CiteCast submission: give --instance, the CiteCast instance" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--repo", "my-org"], "rap submit push: --repo must be a Hub repo id ORG/NAME"),
        (
            ["--repo", REPO_ID],
            "rap submit push: no Hugging Face token: log in with hf auth login or set HF_TOKEN",
        ),
    ],
)
def test_a_bad_repo_or_no_token_is_one_line(
    argv: list[str], message: str, submission: Path, mini_dir: Path, commits: list[dict], monkeypatch, tmp_path, capsys
) -> None:
    _no_token(monkeypatch, tmp_path)
    rc = main(["submit", "push", str(submission), *argv, "--instance", str(mini_dir)])
    err = capsys.readouterr().err
    assert rc == 2
    assert commits == []
    assert err.count("\n") == 1 and err.startswith(message), err


def test_an_unreachable_hub_is_one_line(submission: Path, mini_dir: Path, monkeypatch, capsys) -> None:
    """The real ``create_commit``, in offline mode (as the test session runs): refused in one line, exit 2."""
    monkeypatch.setenv("HF_TOKEN", "hf_test_token")
    assert os.environ.get("HF_HUB_OFFLINE") == "1"
    rc = main(["submit", "push", str(submission), "--repo", REPO_ID, "--instance", str(mini_dir)])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2
    assert err[-1].startswith(f"rap submit push: could not open a pull request on {REPO_ID} (OfflineModeIsEnabled")
    assert "Traceback" not in "\n".join(err)


class _NoSuchRepo(http.server.BaseHTTPRequestHandler):
    """A Hub that knows no repo: every request gets the Hub's 404 for a missing repository."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        body = b'{"error": "Repository Not Found"}'
        self.send_response(404)
        self.send_header("X-Error-Code", "RepoNotFound")
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST

    def log_message(self, *args: object) -> None:
        return None


def test_a_repo_the_hub_does_not_know_is_one_line(submission: Path, mini_dir: Path, tmp_path: Path) -> None:
    """The stock command against a local stand-in Hub that answers 404: one line naming --repo, exit 2."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _NoSuchRepo)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    env = {
        **os.environ,
        "HF_ENDPOINT": f"http://127.0.0.1:{server.server_address[1]}",
        "HF_HUB_OFFLINE": "0",
        "HF_TOKEN": "hf_test_token",
    }
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "rap_benchmark", "submit", "push", str(submission), "--repo", REPO_ID]
            + ["--instance", str(mini_dir)],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
    finally:
        server.shutdown()
    assert proc.returncode == 2, proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith(f"rap submit push: could not open a pull request on {REPO_ID} (RepositoryNotFoundError")
    assert last.endswith(f"no dataset repo {REPO_ID} that this token can see: check --repo")
    assert "Traceback" not in proc.stderr
