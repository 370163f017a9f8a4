"""The stand-in server's command line (``python -m rap_benchmark.testing.scripted_server``), which the
README starts in the background on a fixed port for its "Evaluate your model" paths."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_a_port_in_use_is_refused_in_one_line() -> None:
    """Regression (issue 36): a stand-in started on a port another server held died with a
    traceback (``OSError: [Errno 98] Address already in use``) while the README's next commands,
    waiting on that port, went on against the other server."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
        proc = subprocess.run(
            [sys.executable, "-m", "rap_benchmark.testing.scripted_server", "--port", str(port)],
            capture_output=True, text=True, env=env, timeout=120,
        )  # fmt: skip
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.splitlines() == [
        f"scripted_server: cannot listen on 127.0.0.1:{port}: Address already in use"
        " (another server on that port? --port 0 picks a free one)"
    ]
