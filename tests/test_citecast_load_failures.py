"""The CiteCast load benchmark fails fast on a broken server (``benchmarks/citecast_load.py``).

Regression: the load generator waited silently on a broken server (a server that died, answered
errors or never answered showed up only as ``test_citecast_server_scale`` hanging until its 600 s
timeout). Now it ends at once with one line naming the problem, ``citecast_load: ...``, exit 2.
Each case runs the benchmark as its own process with its server command swapped for a broken one.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

BROKEN_SERVER = r"""
import http.server, os, socket, sys, time

mode, port, folder = sys.argv[1], int(sys.argv[2]), sys.argv[3]
with open(os.path.join(folder, f"server-{os.getpid()}.pid"), "w") as fh:
    fh.write(str(os.getpid()))
if mode == "exits":
    sys.stderr.write("starting\nerror: the port is taken by another program\n")
    sys.exit(3)
if mode == "silent":  # takes connections (the kernel's backlog), never reads nor replies
    listener = socket.create_server(("127.0.0.1", port))
    time.sleep(3600)


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def reply(self, status, text):
        data = text.encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path == "/health" and mode != "errors":
            self.reply(200, '{"ok": true}')
        else:
            self.broken()

    def do_POST(self):
        self.rfile.read(int(self.headers.get("content-length") or 0))
        self.broken()

    def broken(self):
        if mode == "dies":
            sys.stderr.write("worker crashed: segmentation fault\n")
            sys.stderr.flush()
            os._exit(5)
        if mode == "hangs":
            time.sleep(3600)
        self.reply(500, '{"error": "Internal", "detail": "database is locked"}')

    def log_message(self, *args):
        pass


http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()
"""

WRAPPER = """
import sys
sys.path.insert(0, {bench!r})
import citecast_load
server, mode, folder = {server!r}, {mode!r}, {folder!r}
citecast_load.server_command = lambda layout, instance, port, *_: [sys.executable, server, mode, str(port), folder]
sys.exit(citecast_load.main(sys.argv[1:]))
"""

CASES = {
    "exits": "the legacy server exited with code 3 before it answered GET /health; its stderr ends: starting / "
    "error: the port is taken by another program",
    "errors": 'the legacy server answered GET /health with 500: {"error": "Internal", "detail": "database is locked"}',
    "silent": "the legacy server did not answer GET /health within 10 s (it took connections but did not reply; "
    "--health-timeout-s)",
    "tools-fail": "the legacy server failed a first session: POST /tasks/{task}/start answered 500 (expected 200): "
    '{"error":"Internal","detail":"database is locked"}',
    "dies": "the legacy server exited with code 5 during a first session; its stderr ends: worker crashed: "
    "segmentation fault",
    "hangs": "the legacy server failed a first session: no answer to POST /tasks/{task}/start within 2 s",
}


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


@pytest.mark.timeout(300)
@pytest.mark.parametrize("mode", sorted(CASES))
def test_a_broken_server_ends_the_run_with_one_line(citecast_embedded_dir: Path, tmp_path: Path, mode: str) -> None:
    server = tmp_path / "broken_server.py"
    server.write_text(BROKEN_SERVER, encoding="utf-8")
    code = WRAPPER.format(bench=str(REPO / "benchmarks"), server=str(server), mode=mode, folder=str(tmp_path))
    argv = ["--instance", str(citecast_embedded_dir), "--sessions", "1", "--rounds", "1", "--repeats", "1"]
    argv += ["--health-timeout-s", "10", "--request-timeout-s", "2"]
    proc = subprocess.run(
        [sys.executable, "-c", code, *argv],
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=240,  # a bound on a hang, not on speed: the run ends within seconds
    )
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert not proc.stdout and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    line = proc.stderr.strip().splitlines()[-1]
    (pid_file,) = tmp_path.glob("server-*.pid")
    from rap_benchmark.citecast.instance import load_instance

    tasks = load_instance(citecast_embedded_dir).tasks
    first = sorted(t for t, task in tasks.items() if task.split.value == "train")[0]
    assert line == "citecast_load: " + CASES[mode].replace("{task}", first), line
    assert not _alive(int(pid_file.read_text())), "the broken server was left running"
