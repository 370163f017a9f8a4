"""Every failure says so (issue 23): each of these ran into a traceback, a misleading message or
exit 0 before. Each is run as a user runs it, in a real process: one line on stderr, no
traceback, non-zero exit, nothing written.

Exit statuses: 2 when the input is unusable (a bad flag or value, a missing or damaged file or
folder, an endpoint that cannot be reached); 1 when the command did its job and the answer is
"no" (a run whose every unit failed, a file with problems, a tampered instance under verify).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def rap(*argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "-m", "rap_benchmark", *argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )


def one_line_failure(proc: subprocess.CompletedProcess[str], prog: str, needle: str, code: int = 2) -> str:
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == code, (proc.returncode, proc.stderr[-2000:])
    assert "Traceback" not in proc.stderr
    assert len(lines) == 1 and lines[0].startswith(f"{prog}: "), proc.stderr
    assert needle in lines[0], lines[0]
    return lines[0]


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class _Endpoint(BaseHTTPRequestHandler):
    """An OpenAI-compatible endpoint that lists ``served`` and answers every completion with 500."""

    served: tuple[str, ...] = ("served-model",)

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        if self.path.rstrip("/").endswith("/models"):
            self._send(200, {"object": "list", "data": [{"id": m, "object": "model"} for m in self.served]})
        else:
            self._send(404, {"error": "not found"})

    def do_POST(self) -> None:  # noqa: N802
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self._send(500, {"error": {"message": "the GPU is on fire", "type": "server_error"}})

    def _send(self, status: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def endpoint() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Endpoint)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


def test_a_typo_in_the_reference_model_is_one_line(mini_dir: Path, tmp_path: Path) -> None:
    """Regression: ``--model reference/search-hit`` printed a ValueError traceback."""
    proc = rap(
        "run", str(mini_dir), "--backend", "reference", "--model", "reference/search-hit", "--out", "r", cwd=tmp_path
    )
    one_line_failure(proc, "rap run", "reference/search-hits")
    assert not (tmp_path / "r").exists()


def test_an_unreachable_endpoint_is_refused_before_the_first_unit(mini_dir: Path, tmp_path: Path) -> None:
    """Regression: the run retried every unit 12 times, recorded backend_error and exited 0."""
    url = f"http://127.0.0.1:{closed_port()}/v1"
    proc = rap(
        "run", str(mini_dir), "--backend", "openai", "--base-url", url, "--model", "x", "--out", "r", cwd=tmp_path
    )
    one_line_failure(proc, "rap run", f"cannot reach {url}")
    assert not (tmp_path / "r").exists()


def test_a_model_the_endpoint_does_not_serve_is_refused(mini_dir: Path, tmp_path: Path, endpoint: str) -> None:
    proc = rap(
        "run", str(mini_dir), "--backend", "openai", "--base-url", endpoint, "--model", "x", "--out", "r", cwd=tmp_path
    )
    line = one_line_failure(proc, "rap run", "does not serve model 'x'")
    assert "served-model" in line
    assert not (tmp_path / "r").exists()


def test_a_run_whose_every_unit_failed_exits_1_naming_the_cause(mini_dir: Path, tmp_path: Path, endpoint: str) -> None:
    proc = rap(
        "run", str(mini_dir), "--backend", "openai", "--base-url", endpoint, "--model", "served-model",
        "--conditions", "A0", "--limit", "2", "--max-attempts", "1", "--backoff", "0", "--no-progress", "--out", "r",
        cwd=tmp_path,
    )  # fmt: skip
    line = one_line_failure(proc, "rap run", "every unit failed (2 of 2)", code=1)
    assert "backend_error" in line
    assert "run now: 0 valid, 2 invalid (2 backend_error)" in proc.stdout and "next:" not in proc.stdout


def test_a_missing_prediction_file_is_one_line(mini_dir: Path, tmp_path: Path) -> None:
    one_line_failure(rap("score", str(mini_dir), "missing.jsonl", cwd=tmp_path), "rap score", "missing.jsonl")


def test_split_names_a_missing_file_as_missing(tmp_path: Path) -> None:
    """Regression: ``rap submit split nothere.jsonl`` said it "cannot be split: fix it first"."""
    proc = rap("submit", "split", "missing.jsonl", "--out", "subs", cwd=tmp_path)
    line = one_line_failure(proc, "rap submit split", "no such prediction file: missing.jsonl")
    assert "fix it first" not in line
    assert not (tmp_path / "subs").exists()


def test_json_errors_do_not_say_at_at(mini_dir: Path, tmp_path: Path) -> None:
    """Regression: "Unterminated string starting at at column 250" (Python's message ends in "at")."""
    (tmp_path / "p.jsonl").write_text('{"model": "m", "answer": "a reply cut at the budget', encoding="utf-8")
    proc = rap("score", str(mini_dir), "p.jsonl", cwd=tmp_path)
    assert "Unterminated string starting at column" in proc.stderr and "at at" not in proc.stderr


def test_inspect_sample_errors_stay_errors(mini_dir: Path, tmp_path: Path) -> None:
    """Regression: with every sample's model call failing (mockllm's tokenizer download, offline),
    ``inspect eval`` scored each as an invalid answer ("valid 0.000", "spearman nan"). Now the
    model error is the sample's error: the stock CLI reports it and ends the task in error, and
    ``inspect eval-set`` exits non-zero, as for any Inspect task; the converter refuses errored
    samples instead of turning them into invalid predictions."""
    pytest.importorskip("inspect_ai")
    inspect = str(Path(sys.executable).with_name("inspect"))
    dead = f"http://127.0.0.1:{closed_port()}"
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "TIKTOKEN_CACHE_DIR": str(tmp_path / "tiktoken"),  # empty: mockllm must download its encoding
        "HTTPS_PROXY": dead,
        "HTTP_PROXY": dead,
        "https_proxy": dead,
        "http_proxy": dead,
    }
    task = f"{REPO}/rap_benchmark/integrations/inspect/tasks.py@rap_forecast"
    argv = [task, "--model", "mockllm/model", "-T", f"instance_dir={mini_dir}", "--limit", "2", "--display", "plain"]
    proc = subprocess.run(
        [inspect, "eval-set", *argv, "--log-dir", "logs", "--retry-attempts", "1", "--retry-wait", "1"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out[-3000:]
    assert "valid 0.000" not in out and "Task interrupted" in out
    from inspect_ai.log import list_eval_logs, read_eval_log

    logs = [read_eval_log(info) for info in list_eval_logs(str(tmp_path / "logs"))]
    assert logs and all(log.status == "error" for log in logs)
    converted = rap("harness", "inspect-predictions", "logs", "--out", "preds.jsonl", cwd=tmp_path)
    if "no samples" not in converted.stderr:  # a log that stopped before any sample was saved
        one_line_failure(converted, "rap harness inspect-predictions", "ended in an error")
    assert not (tmp_path / "preds.jsonl").exists()


def test_rap_run_ends_with_a_summary_and_the_next_command(mini_dir: Path, tmp_path: Path, capsys) -> None:
    """Regression: ``rap run`` ended in a raw JSON dict (``--json`` still prints it)."""
    from rap_benchmark.cli import main

    argv = [
        "run",
        str(mini_dir),
        "--backend",
        "reference",
        "--conditions",
        "A0",
        "--no-progress",
        "--out",
        str(tmp_path / "r"),
    ]
    assert main([*argv, "--limit", "3"]) == 0
    first = capsys.readouterr().out.splitlines()
    n = int(first[0].split()[1])  # units selected
    assert first[0] == f"units: {n} selected, 3 run now, 0 already done (reused), {n - 3} not run yet (--limit)"
    assert first[1] == "run now: 3 valid, 0 invalid"
    assert f"predictions: {tmp_path / 'r' / 'predictions.jsonl'} (3 rows)" in first
    assert f"next: the same command again runs the {n - 3} units not run yet (valid ones are reused)" in first
    assert first[-1] == f"next: rap score {mini_dir} {tmp_path / 'r' / 'predictions.jsonl'}"
    assert main([*argv, "--json"]) == 0
    tallies = json.loads(capsys.readouterr().out)
    assert tallies["skipped"] == 3 and tallies["executed"] == tallies["selected"] - 3 and tallies["invalid"] == 0
