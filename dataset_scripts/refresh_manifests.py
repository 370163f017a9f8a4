"""Rebuild the shipped instances and copy their SHA256SUMS and parameter ledgers into manifests/.

Run after a deliberate change to what an instance contains (and bump BENCHMARK_VERSION and the
changelog in cards/CHANGELOG.md); tests/test_manifests.py fails until then.

python dataset_scripts/refresh_manifests.py            # mini only
python dataset_scripts/refresh_manifests.py --arxiv-sample ../shared/data/arxiv
python dataset_scripts/refresh_manifests.py --arxiv-sample-built build/arxiv-sample   # reuse a fresh build
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from pathlib import Path

import rap_benchmark as rap
from rap_benchmark.core.artifacts import LEDGER_FILE
from rap_benchmark.core.spec import spec_for
from rap_benchmark.core.sums import SUMS_FILE

MANIFESTS = Path(__file__).resolve().parents[1] / "manifests"


def refresh(name: str, source: Path | None) -> None:
    with tempfile.TemporaryDirectory(prefix=f"rap-{name}-") as tmp:
        out = rap.build(name, Path(tmp) / name, source=source, progress=True)
        dest = MANIFESTS / name
        dest.mkdir(parents=True, exist_ok=True)
        for fname in (SUMS_FILE, LEDGER_FILE):
            shutil.copyfile(out / fname, dest / fname)
        print(f"{dest}: {(dest / SUMS_FILE).read_text().count(chr(10))} files hashed")


def copy_built(name: str, spec, built: Path) -> None:
    """Copy the manifests of an instance already built with the current code (verified, and
    built from exactly ``spec``) instead of rebuilding it."""
    import json

    from rap_benchmark.core.sums import verify

    problems = verify(built)
    if problems:
        raise SystemExit(f"{built} does not verify: {problems[:3]}")
    ledger = json.loads((built / LEDGER_FILE).read_text())
    if ledger["spec"] != spec.ledger()["spec"]:
        raise SystemExit(f"{built} was built from another spec than the current {name} spec")
    dest = MANIFESTS / name
    dest.mkdir(parents=True, exist_ok=True)
    for fname in (SUMS_FILE, LEDGER_FILE):
        shutil.copyfile(built / fname, dest / fname)
    print(f"{dest}: {(dest / SUMS_FILE).read_text().count(chr(10))} files hashed (from {built})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--arxiv-sample", type=Path, help="also refresh arxiv-sample from this parquet folder")
    parser.add_argument("--arxiv-sample-built", type=Path, help="copy arxiv-sample's manifests from this fresh build")
    args = parser.parse_args()
    refresh("mini", None)
    if args.arxiv_sample:
        refresh("arxiv-sample", args.arxiv_sample)
    elif args.arxiv_sample_built:
        copy_built("arxiv-sample", spec_for("arxiv-sample"), args.arxiv_sample_built)


if __name__ == "__main__":
    main()
