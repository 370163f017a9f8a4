"""examples/cpu_llm_instrument.sh end to end: it starts the server, waits for it, builds through the
stock CLI and stops the server; a model that cannot answer ends the script non-zero in one line
with no instance. `transformers serve` is stood in for by the package's scripted server (the real
one needs model weights; the README reports a run with SmolLM2-135M)."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from rap_benchmark.core.spec import BenchmarkSpec

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "examples" / "cpu_llm_instrument.sh"
pytest.importorskip("uvicorn")


def test_script_is_valid_bash() -> None:
    subprocess.run(["bash", "-n", str(SCRIPT)], check=True)


@pytest.mark.skipif(shutil.which("shellcheck") is None, reason="shellcheck not installed")
def test_script_passes_shellcheck() -> None:
    subprocess.run(["shellcheck", str(SCRIPT)], check=True)


@pytest.fixture(scope="module")
def cut(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    from arxiv_snapshot import write_snapshot

    tmp = tmp_path_factory.mktemp("cut")
    snap = tmp / "snapshot.jsonl"
    write_snapshot(snap, scale=0.002, seed=1, n_fields=3)
    spec = tmp / "spec.json"
    data = BenchmarkSpec().replace(name="tiny", n_fields=3, min_field_papers=40, n_dev_seed_fields=1).to_dict()
    spec.write_text(json.dumps(data))
    return spec, snap


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _run(tmp: Path, spec: Path, snap: Path, mode: str) -> tuple[subprocess.CompletedProcess[str], int]:
    """The script with `transformers serve` replaced by the scripted server in ``mode``."""
    shim = tmp / "transformers"
    shim.write_text(
        "#!/usr/bin/env bash\n"  # serve --host H --port P MODEL: only the port matters here
        f'exec "{sys.executable}" -m rap_benchmark.testing.scripted_server --port "$5" --mode {mode}\n'
    )
    shim.chmod(0o755)
    rap = tmp / "rap"
    rap.write_text(f'#!/usr/bin/env bash\nexec "{sys.executable}" -m rap_benchmark "$@"\n')
    rap.chmod(0o755)
    port = _free_port()
    env = {
        **os.environ,
        "TRANSFORMERS": str(shim),
        "RAP": str(rap),
        "MODEL": "scripted-main",
        "PORT": str(port),
        "RAP_ARGS": "--quiet",
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    res = subprocess.run(
        ["bash", str(SCRIPT), str(spec), str(snap), str(tmp / "inst")],
        env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    return res, port


def _port_closed(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) != 0


def test_script_builds_and_stops_its_server(tmp_path: Path, cut: tuple[Path, Path]) -> None:
    res, port = _run(tmp_path, *cut, mode="chatty")
    assert res.returncode == 0, res.stderr[-2000:]
    assert (tmp_path / "inst" / "SHA256SUMS").is_file()
    assert (tmp_path / "inst.llm-store" / "review.md").is_file()
    assert "review the codebook construction" in res.stderr
    assert _port_closed(port), "the script left its server running"


def test_a_model_that_cannot_answer_ends_the_script_in_one_line(tmp_path: Path, cut: tuple[Path, Path]) -> None:
    res, port = _run(tmp_path, *cut, mode="truncated")
    assert res.returncode == 2
    errors = [line for line in res.stderr.splitlines() if line.startswith("rap build:")]
    assert len(errors) == 1 and "stage field_name" in errors[0], res.stderr[-2000:]
    assert "Traceback" not in res.stderr
    assert not (tmp_path / "inst").exists()
    assert _port_closed(port)
