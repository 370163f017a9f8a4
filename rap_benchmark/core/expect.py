"""Is this instance the one it claims to be? Compare a folder with an expected manifest.

``verify`` only checks a folder against its own ``SHA256SUMS``: a consistent edit (change
``codebooks.json`` and its line in ``SHA256SUMS``) passes it. An *expected* manifest comes from
outside the folder and catches that:

* a manifest hash (64 hex digits: ``rap info``, a dataset card or a submission's metadata);
* a ``SHA256SUMS`` file, or a folder holding one (e.g. the shipped golden ``manifests/mini``);
* a shipped golden manifest by name (``mini``, ``arxiv-sample``) in a source checkout;
* a file that states ``manifest_hash`` (an exported repo's manifest JSON or its README card).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

from rap_benchmark.core.errors import InputError
from rap_benchmark.core.sums import SUMS_FILE, manifest_hash

_HEX = re.compile(r"[0-9a-f]{64}")
_STATED = re.compile(r"manifest[_ ]hash\W{0,6}([0-9a-f]{64})", re.IGNORECASE)
MAX_MANIFEST_BYTES = 16 * 1024 * 1024


@dataclass(frozen=True)
class Expected:
    """What an instance should be: its manifest hash, and its file digests when known."""

    source: str
    manifest_hash: str
    sums: dict[str, str] | None = None  # relative path -> sha256, when a SHA256SUMS was given


def parse_sums(text: str, source: str) -> dict[str, str]:
    out = {}
    for lineno, line in enumerate(text.splitlines(), 1):
        digest, sep, rel = line.partition("  ")
        if not sep or not _HEX.fullmatch(digest):
            raise InputError(f"{source} line {lineno} is not '<sha256>  <path>'")
        out[rel] = digest
    return out


def golden_dir() -> Path:
    from rap_benchmark.core.resources import REPO_DIR

    return REPO_DIR / "manifests"


def resolve_expected(expect: str | Path) -> Expected:
    """An :class:`Expected` from a hash, a SHA256SUMS file or folder, a golden name, or a card."""
    text = str(expect).strip()
    if _HEX.fullmatch(text.lower()):
        return Expected(text, text.lower())
    path = Path(text)
    if not path.exists() and (golden_dir() / text / "SHA256SUMS").is_file():
        path = golden_dir() / text
    if path.is_dir():
        path = path / "SHA256SUMS"
    if not path.is_file():
        raise InputError(
            f"--expect {text!r} is neither a 64-hex manifest hash, a SHA256SUMS file or folder, nor a shipped "
            f"manifest name ({', '.join(sorted(p.name for p in golden_dir().glob('*'))) or 'none here'})"
        )
    if path.stat().st_size > MAX_MANIFEST_BYTES:
        raise InputError(f"{path} is too large to be a manifest")
    data = path.read_bytes()
    content = data.decode("utf-8", "replace")
    if path.name == "SHA256SUMS":
        return Expected(str(path), hashlib.sha256(data).hexdigest(), parse_sums(content, str(path)))
    stated = {m.lower() for m in _STATED.findall(content)}
    if len(stated) != 1:
        raise InputError(f"{path} states {len(stated)} manifest hashes; expected exactly one")
    return Expected(str(path), stated.pop())


def compare(root: str | Path, expected: Expected) -> list[str]:
    """Problems that make the folder differ from ``expected`` (empty list = it is that instance)."""
    root = Path(root)
    if not (root / SUMS_FILE).is_file():
        return [f"{SUMS_FILE} is missing in {root}"]
    actual = manifest_hash(root)
    if actual == expected.manifest_hash:
        return []
    problems = []
    if expected.sums is not None:
        mine = parse_sums((root / SUMS_FILE).read_text(encoding="utf-8", errors="replace"), str(root / SUMS_FILE))
        for rel in sorted(set(expected.sums) | set(mine)):
            if rel not in mine:
                problems.append(f"{rel}: in the expected manifest but not in this instance")
            elif rel not in expected.sums:
                problems.append(f"{rel}: not in the expected manifest")
            elif mine[rel] != expected.sums[rel]:
                problems.append(f"{rel}: differs from the expected manifest ({expected.source})")
    problems.append(
        f"manifest hash {actual[:12]}... is not the expected {expected.manifest_hash[:12]}... ({expected.source})"
    )
    return problems
