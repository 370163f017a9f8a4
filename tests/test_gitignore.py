""".gitignore covers what the README's commands write (issue 23: ``subs/``, ``logs/``, ``keys.txt``
with API keys, ``*.seal.json``, ``releases/`` and ``board-live/`` were missing), so following the
README in a clone never leaves secrets or outputs to commit by accident."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from test_readme import all_blocks

REPO = Path(__file__).resolve().parents[1]
# what a command writes: --out X, --output_path X, --log-dir X, --store X (a file), > X
WRITES = re.compile(r"(?:--out|--output_path|--log-dir|--store)[ =](\S+)|\s>\s*([\w./-]+)")


def written_paths() -> list[str]:
    """Every path a README or docs command writes, read from the README test's own parse of the
    shell blocks (indented fences and continuation lines included, comments left out)."""
    found = set()
    for block in all_blocks(REPO):
        for command in block.commands:
            for out, redirected in WRITES.findall(command.text):
                path = (out or redirected).strip("\"'")
                if not path or path.startswith(("/", "$", "~", "-")) or "://" in path or path.isupper():
                    continue  # absolute, variable, placeholder (DIR) or a URL (redis://)
                found.add(path)
    return sorted(found)


def test_the_docs_name_outputs() -> None:
    paths = written_paths()
    assert {"subs/", "board-live/", "keys.txt", "my-model.seal.json", "build/mini"} <= set(paths), paths


@pytest.mark.skipif(shutil.which("git") is None or not (REPO / ".git").exists(), reason="not a git checkout")
def test_everything_the_docs_write_is_ignored() -> None:
    paths = written_paths()
    proc = subprocess.run(
        ["git", "check-ignore", "--no-index", "--stdin", "-v", "-n"],
        input="\n".join(paths) + "\n", cwd=REPO, capture_output=True, text=True, check=False,
    )  # fmt: skip
    unignored = [line.split("\t")[-1] for line in proc.stdout.splitlines() if line.startswith("::")]
    assert not unignored, f"README/docs commands write these, which .gitignore does not cover: {unignored}"
