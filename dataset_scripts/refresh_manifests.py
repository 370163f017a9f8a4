"""Rebuild the shipped instances and copy their SHA256SUMS and parameter ledgers into manifests/.

Run after a deliberate change to what an instance contains (and bump BENCHMARK_VERSION and the
changelog in cards/CHANGELOG.md); tests/test_manifests.py fails until then.

python dataset_scripts/refresh_manifests.py            # mini only
python dataset_scripts/refresh_manifests.py --arxiv-sample ../shared/data/arxiv
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from pathlib import Path

import rap_benchmark as rap
from rap_benchmark.core.artifacts import LEDGER_FILE, SUMS_FILE

MANIFESTS = Path(__file__).resolve().parents[1] / "manifests"


def refresh(name: str, source: Path | None) -> None:
    with tempfile.TemporaryDirectory(prefix=f"rap-{name}-") as tmp:
        out = rap.build(name, Path(tmp) / name, source=source, progress=True)
        dest = MANIFESTS / name
        dest.mkdir(parents=True, exist_ok=True)
        for fname in (SUMS_FILE, LEDGER_FILE):
            shutil.copyfile(out / fname, dest / fname)
        print(f"{dest}: {(dest / SUMS_FILE).read_text().count(chr(10))} files hashed")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--arxiv-sample", type=Path, help="also refresh arxiv-sample from this parquet folder")
    args = parser.parse_args()
    refresh("mini", None)
    if args.arxiv_sample:
        refresh("arxiv-sample", args.arxiv_sample)


if __name__ == "__main__":
    main()
