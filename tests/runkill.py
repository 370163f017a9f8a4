"""Start a ``rap`` run in a subprocess and SIGKILL it once some units are done (the kill-and-resume
tests of RAP and CiteCast runs share this)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

from rap_benchmark.agents.store import RunStore

REPO = Path(__file__).resolve().parents[1]


def kill_after_done(argv: list[str], run_dir: Path, *, n_done: int = 5, timeout_s: float = 120) -> set[str]:
    """Run ``argv`` (which writes the run folder ``run_dir``), SIGKILL it after ``n_done`` units are
    logged done, and return the ids of the units done before the kill."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(argv, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    store = RunStore(run_dir)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if sum(e["event"] == "done" for e in store.events()) >= n_done or proc.poll() is not None:
            break
        time.sleep(0.05)
    assert proc.poll() is None, "the run finished before it could be killed; slow it down"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    return {e["unit_id"] for e in store.events() if e["event"] == "done"}
