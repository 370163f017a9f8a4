"""The README's harness-to-leaderboard flow, run verbatim (commands extracted from README.md).

Regression (issue 16): the documented path failed: ``rap submit validate`` demanded a
``.meta.json`` nothing wrote, and the model name had to match it by hand. The only change made to
the commands is the server's port: the scripted OpenAI-compatible server listens on a free
loopback port instead of 8000.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

pytest.importorskip("lm_eval")
pytest.importorskip("tenacity")

REPO = Path(__file__).resolve().parents[1]
MARK = "<!-- flow:harness-to-leaderboard -->"


def flow_commands(readme: str) -> list[str]:
    """The shell commands of the README's marked flow block (continuation lines joined)."""
    block = readme.split(MARK, 1)[1].split("<!-- /flow -->", 1)[0]
    body = re.search(r"```bash\n(.*?)```", block, re.DOTALL).group(1)
    return [c.strip() for c in body.replace("\\\n", " ").splitlines() if c.strip() and not c.startswith("#")]


def test_readme_flow_extraction() -> None:
    cmds = flow_commands((REPO / "README.md").read_text(encoding="utf-8"))
    assert [c.split()[0] for c in cmds] == ["rap", "lm_eval", "rap", "rap", "rap"]


def test_readme_harness_flow_puts_the_model_on_the_leaderboard(tmp_path: Path) -> None:
    from rap_benchmark.testing.scripted_server import serve

    cmds = flow_commands((REPO / "README.md").read_text(encoding="utf-8"))
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env["PATH"]])
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env["RAP_CACHE_DIR"] = str(tmp_path / "cache")
    with serve(n_searches=1) as url:
        hostport = url.split("//", 1)[1].split("/", 1)[0]
        for cmd in cmds:
            cmd = cmd.replace("127.0.0.1:8000", hostport)
            proc = subprocess.run(
                ["bash", "-c", cmd], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900
            )
            assert proc.returncode == 0, f"{cmd}\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}"
    board = pd.read_csv(tmp_path / "leaderboard" / "leaderboard.csv")
    row = board.loc[(board["model"] == "my-org/my-model") & (board["condition"] == "A1")]
    assert len(row) == 1 and row["n_episodes"].iloc[0] > 0
    assert row["spearman"].notna().all()
    assert "my-org/my-model" in (tmp_path / "leaderboard" / "leaderboard.md").read_text(encoding="utf-8")
