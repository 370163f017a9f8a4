"""Code, help and docs cite the paper's sections or docs/ pages, never the working spec
("SPEC 3.9"): that document is not in the repository, so a reader cannot follow the reference."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CITATION = re.compile(r"\bSPEC(\.md)? ?§?[0-9]")


def test_nothing_shipped_or_documented_cites_the_working_spec() -> None:
    places = [
        *sorted((ROOT / "rap_benchmark").rglob("*")),
        *sorted((ROOT / "docs").glob("*.md")),
        *sorted((ROOT / "cards").glob("*.md")),
        *sorted((ROOT / "benchmarks").glob("*.py")),
        *sorted((ROOT / "examples").glob("*")),
        *sorted(p for p in (ROOT / "tests").glob("*.py") if p.name != Path(__file__).name),
        ROOT / "README.md",
    ]
    found = []
    for path in places:
        if not path.is_file() or path.suffix not in {".py", ".md", ".json", ".txt", ".j2", ".yaml", ".sh"}:
            continue
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if CITATION.search(line):
                found.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()[:100]}")
    assert not found, "cites the working spec:\n" + "\n".join(found)


def test_the_pattern_finds_a_citation() -> None:
    assert CITATION.search("episode metrics (SPEC 3.9)")
    assert not CITATION.search("SPECS_DIR = PACKAGE_DIR / 'specs'")
