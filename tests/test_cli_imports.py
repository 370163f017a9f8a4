"""``rap`` starts without the data stack: a command imports pandas, numpy, pyarrow, an HTTP client
or a model library only when it reads tables or calls a model.

Every ``rap`` invocation builds the whole parser (every command module is imported to register its
subcommands), so one module-level ``import pandas`` in ``rap_benchmark/__init__.py``, ``api.py``
or ``cli/`` made each command, even ``rap --help`` or a mistyped flag, pay for it (0.5 s of CPU of
0.6 s on the test machine). The tests and the README start the CLI many times in subprocesses."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

HEAVY = (
    "pandas",
    "numpy",
    "pyarrow",
    "scipy",
    "sklearn",
    "openai",
    "httpx",
    "torch",
    "transformers",
    "datasets",
    "huggingface_hub",
    "matplotlib",
    "jinja2",
    "fastapi",
    "uvicorn",
)

PROBE = """
import json, sys
first = sorted(m for m in {heavy} if m in sys.modules)  # what the interpreter itself brought
import rap_benchmark
from rap_benchmark.cli import main
after_import = sorted(m for m in {heavy} if m in sys.modules and m not in first)
codes = []
for argv in {argvs}:
    try:
        codes.append(main(argv))
    except SystemExit as exc:
        codes.append(exc.code)
after_commands = sorted(m for m in {heavy} if m in sys.modules and m not in first)
print(json.dumps({{"import": after_import, "commands": after_commands, "codes": codes}}))
"""


def _probe(argvs: list[list[str]]) -> dict:
    code = PROBE.format(heavy=HEAVY, argvs=argvs)
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, env=_env(), timeout=300, check=True
    )
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _env() -> dict[str, str]:
    import os

    return {**os.environ, "PYTHONPATH": str(REPO)}


def test_import_and_help_load_no_heavy_library() -> None:
    """``import rap_benchmark`` and the parser-only paths: help, the version, an unknown command, a
    bad flag. (``rap --version`` imported the whole CiteCast package for its version: 0.9 s of CPU.)"""
    got = _probe([["--help"], ["run", "--help"], ["--version"], ["frobnicate"], ["score", "--no-such-flag"]])
    assert got["import"] == [] and got["commands"] == [], got
    assert got["codes"] == [0, 0, 0, 2, 2], got


def test_verify_hashes_without_reading_tables(mini_dir: Path) -> None:
    """``rap verify`` checks SHA256SUMS: file hashes only, no table is read (so no pandas)."""
    got = _probe([["verify", str(mini_dir)]])
    assert got["codes"] == [0] and got["commands"] == [], got


def test_the_lazy_exports_still_resolve() -> None:
    """The types ``import rap_benchmark`` no longer loads eagerly are there on first use."""
    import rap_benchmark
    from rap_benchmark.core.artifacts import Instance, PublicInstance

    assert rap_benchmark.Instance is Instance and rap_benchmark.PublicInstance is PublicInstance
    assert {"Instance", "PublicInstance"} <= set(rap_benchmark.__all__)
