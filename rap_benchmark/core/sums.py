"""A folder's ``SHA256SUMS``: write it, verify against it, and the manifest hash (the sha256 of
that file, an instance's identity). ``.cache/`` is never hashed."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from pathlib import Path

from rap_benchmark.core.fsio import atomic_write_text

SUMS_FILE = "SHA256SUMS"
CACHE_DIR = ".cache"


def sha256_file(path: Path) -> str:
    with path.open("rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def _hashed_files(root: Path) -> list[Path]:
    files = []
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if not path.is_file() or rel.parts[0] == CACHE_DIR or rel.as_posix() == SUMS_FILE:
            continue
        files.append(path)
    return files


def write_sums(root: str | Path) -> Path:
    """Write ``SHA256SUMS`` over every file in ``root`` (sorted by path, ``.cache/`` excluded)."""
    root = Path(root)
    lines = [f"{sha256_file(p)}  {p.relative_to(root).as_posix()}\n" for p in _hashed_files(root)]
    return atomic_write_text(root / SUMS_FILE, "".join(lines))


def shard_hash(arxiv_ids: Iterable[str]) -> str:
    """A search universe's identity in ``search_manifest.parquet``: sha256 of its arxiv ids,
    sorted, joined by newlines (the empty universe hashes the empty string)."""
    return hashlib.sha256("\n".join(sorted(str(i) for i in arxiv_ids)).encode("utf-8")).hexdigest()


def manifest_hash(root: str | Path) -> str:
    """The instance's identity: sha256 of its SHA256SUMS file."""
    return sha256_file(Path(root) / SUMS_FILE)


def verify(root: str | Path) -> list[str]:
    """Check every file against ``SHA256SUMS``; return the problems (empty list = verified)."""
    root = Path(root)
    sums = root / SUMS_FILE
    if not sums.is_file():
        return [f"{SUMS_FILE} is missing in {root}"]
    problems: list[str] = []
    recorded: dict[str, str] = {}
    for lineno, line in enumerate(sums.read_text(encoding="utf-8").splitlines(), 1):
        digest, sep, rel = line.partition("  ")
        if not sep or len(digest) != 64:
            problems.append(f"{SUMS_FILE} line {lineno} is malformed: {line!r}")
            continue
        recorded[rel] = digest
    for rel, digest in recorded.items():
        path = root / rel
        if not path.is_file():
            problems.append(f"{rel}: missing")
        elif sha256_file(path) != digest:
            problems.append(f"{rel}: sha256 mismatch (file changed after the build)")
    for path in _hashed_files(root):
        rel = path.relative_to(root).as_posix()
        if rel not in recorded:
            problems.append(f"{rel}: not listed in {SUMS_FILE}")
    return problems


def listed_sha256(root: Path, rel: str) -> str:
    """A file's sha256 as SHA256SUMS records it (hashed afresh when it is not listed)."""
    sums = root / SUMS_FILE
    if sums.is_file():
        for line in sums.read_text(encoding="utf-8").splitlines():
            digest, _, name = line.partition("  ")
            if name == rel:
                return digest
    return sha256_file(root / rel)
