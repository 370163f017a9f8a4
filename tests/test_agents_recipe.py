"""examples/vllm_recipe.sh: valid bash, and every rap invocation in it parses with the real CLI."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "examples" / "vllm_recipe.sh"


def test_recipe_is_valid_bash():
    subprocess.run(["bash", "-n", str(SCRIPT)], check=True)


@pytest.mark.skipif(shutil.which("shellcheck") is None, reason="shellcheck not installed")
def test_recipe_passes_shellcheck():
    subprocess.run(["shellcheck", str(SCRIPT)], check=True)


def test_recipe_serves_with_tool_calling_and_runs_then_scores():
    text = SCRIPT.read_text(encoding="utf-8")
    assert "--enable-auto-tool-choice" in text and "--tool-call-parser" in text
    assert "/models" in text and '"$RAP" score' in text


def test_recipe_rap_arguments_parse():
    from rap_benchmark.cli import build_parser

    parser = build_parser()
    run = parser.parse_args(
        [
            "run",
            "inst",
            "--backend",
            "openai",
            "--model",
            "M",
            "--base-url",
            "http://127.0.0.1:8000/v1",
            "--conditions",
            "A0,A1,A2,A3,A4",
            "--concurrency",
            "64",
            "--out",
            "runs/x",
            "--max-tokens",
            "16384",
        ]
    )
    assert run.func.__name__ == "cmd_run" and run.max_tokens == 16384
    score = parser.parse_args(["score", "inst", "runs/x/predictions.jsonl"])
    assert callable(score.func)


def test_recipe_usage_error_without_arguments():
    out = subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True, env={"PATH": "/usr/bin:/bin"})
    assert out.returncode == 2 and "usage" in out.stderr
