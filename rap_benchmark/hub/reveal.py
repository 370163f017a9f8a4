"""Check revealed targets against the salted commitments published with a repo.

A repo's ``<config>_heldout`` configs publish each withheld row's ``key`` and ``target_sha256``;
the reveal publishes the exporter's private folder (``salt.hex`` and
``<repo>/<config>/<split>.parquet``). A row verifies when
``sha256(salt || canonical_json({"key", "target"}))`` equals its committed hash.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from rap_benchmark.core.canonical import commitment, read_salt, target_values
from rap_benchmark.core.errors import FileFormatError
from rap_benchmark.hub.layout import COMMITMENT_COLUMN, SALT_FILE
from rap_benchmark.hub.load import read_manifest


@dataclass(frozen=True)
class RevealReport:
    checked: int
    problems: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return not self.problems and self.checked > 0


def verify_reveal(repo_dir: str | Path, reveal_dir: str | Path) -> RevealReport:
    """Verify every withheld row of the repo at ``repo_dir`` against the revealed folder."""
    repo_dir, reveal_dir = Path(repo_dir), Path(reveal_dir)
    manifest = read_manifest(repo_dir)
    salt_path = reveal_dir / SALT_FILE
    if not salt_path.is_file():
        return RevealReport(0, (f"no {SALT_FILE} in {reveal_dir}",))
    try:
        salt = read_salt(salt_path)
    except FileFormatError as exc:  # a reveal that is not one fails like a missing salt, not as a crash
        return RevealReport(0, (str(exc),))
    repo_name = manifest["repo"].split("/", 1)[1]
    problems: list[str] = []
    checked = 0
    if not manifest["withheld"]:
        problems.append(f"{manifest['repo']} withholds nothing: there is nothing to verify")
    for cfg, splits in manifest["withheld"].items():
        for split, info in splits.items():
            public = pd.read_parquet(repo_dir / manifest["configs"][cfg][split]["path"])
            revealed_path = reveal_dir / repo_name / cfg / f"{split}.parquet"
            if not revealed_path.is_file():
                problems.append(f"{cfg}/{split}: no revealed targets at {revealed_path}")
                continue
            revealed = pd.read_parquet(revealed_path)
            key = info["key_column"]
            missing_cols = [c for c in (key, *info["target_columns"]) if c not in revealed]
            if missing_cols:
                problems.append(f"{cfg}/{split}: revealed file lacks {', '.join(missing_cols)}")
                continue
            by_key = dict(zip(revealed[key], target_values(revealed, info["target_columns"]), strict=True))
            for k, h in zip(public[key], public[COMMITMENT_COLUMN], strict=True):
                checked += 1
                if k not in by_key:
                    problems.append(f"{cfg}/{split}: {k} has no revealed target")
                elif commitment(salt, k, by_key[k]) != h:
                    problems.append(f"{cfg}/{split}: {k}: revealed target does not match its commitment")
            extra = set(by_key) - set(public[key])
            if extra:
                problems.append(f"{cfg}/{split}: {len(extra)} revealed key(s) were never committed")
    return RevealReport(checked, tuple(problems))
