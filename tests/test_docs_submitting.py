"""docs/SUBMITTING.md, run verbatim: every shell block in order, in an empty folder, on mini.

Blocks marked ``# needs: gpu``, ``# needs: network`` or ``# needs: hf-token`` are skipped (and
counted, so that a guide made only of skipped blocks fails). ``rap`` is this checkout's CLI."""

from __future__ import annotations

import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

REPO = Path(__file__).resolve().parents[1]
GUIDE = REPO / "docs" / "SUBMITTING.md"
NEEDS = re.compile(r"^# needs: (gpu|network|hf-token)\s*$", re.MULTILINE)


def shell_blocks(text: str) -> list[str]:
    return re.findall(r"```bash\n(.*?)```", text, re.DOTALL)


@pytest.mark.slow
def test_every_shell_block_of_the_guide_runs_on_mini(tmp_path: Path) -> None:
    blocks = shell_blocks(GUIDE.read_text(encoding="utf-8"))
    runnable = [b for b in blocks if not NEEDS.search(b)]
    assert len(runnable) >= 6 and len(blocks) > len(runnable)
    shim = tmp_path / "bin" / "rap"
    shim.parent.mkdir()
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m rap_benchmark "$@"\n', encoding="utf-8")
    shim.chmod(shim.stat().st_mode | stat.S_IEXEC)
    env = {**os.environ, "PATH": f"{shim.parent}{os.pathsep}{os.environ['PATH']}", "PYTHONPATH": str(REPO)}
    work = tmp_path / "work"
    work.mkdir()
    for block in runnable:
        proc = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", block], cwd=work, env=env, capture_output=True, text=True, check=False
        )
        assert proc.returncode == 0, f"{block}\n--- stderr ---\n{proc.stderr[-3000:]}"
    board = pd.read_csv(work / "board" / "leaderboard.csv")
    assert {"reference/search-hits", "baseline/ewma"} <= set(board["model"])
    ref = board[(board["model"] == "reference/search-hits") & (board["condition"] == "A1")].iloc[0]
    assert ref["search_calls"] > 0 and ref["strict_cells"] + ref["exposed_cells"] == ref["n_episodes"]
    live = pd.read_csv(work / "board-live" / "leaderboard_live.csv")
    assert list(live["track"]) == ["Forecast-Live"]
    assert (work / "hub" / "rap" / "leaderboard" / "data" / "forecast_live").is_dir()
    assert (work / "board" / "index.html").is_file() and (work / "board-live" / "index.html").is_file()
