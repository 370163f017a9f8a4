"""``rap extend`` with 10,000 new papers vs a full rebuild of the same data, side by side.

The parent is arxiv-sample cut at 2026-01-01 (built once with ``--freeze-instrument``, untimed).
The new data is the cut plus ``--new`` papers drawn (seeded) from [2026-01-01, 2026-07-01), the
newest among them, so the window of origin 2026-01-01 is covered and every new paper is
labelled. Timed through the stock CLI, each in its own process:

* ``extend_s``: ``rap extend PARENT --source NEW --origin 2026-01-01 --out V2`` (reads the
  whole new snapshot, deduplicates, labels the new papers with the frozen instrument, episodes);
* ``rebuild_s``: ``rap build --source NEW --spec SPEC --no-cache`` of the same data from scratch
  (the instrument cache would otherwise reuse the parent's fit: the new papers all fall after the
  eligibility frame).

Ends with ONE JSON line; ``ratio`` = extend_s / rebuild_s. Target (2 cores): extend_s <= 60.

    python benchmarks/extend_bench.py [--source ../shared/data/arxiv] [--new 10000]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
RAP = [sys.executable, "-m", "rap_benchmark"]
T = "2026-01-01"


def _write(papers, folder: Path) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from rap_benchmark.core.schemas import PAPERS

    folder.mkdir(parents=True)
    table = pa.Table.from_pandas(papers[list(PAPERS.names)].reset_index(drop=True), schema=PAPERS, preserve_index=False)
    pq.write_table(table, folder / "papers.parquet")
    return folder


def _timed(args: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run([*RAP, *args], check=True, env=ENV, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> None:
    default = Path(os.environ.get("RAP_SHARED_ARXIV", REPO.parent / "shared" / "data" / "arxiv"))
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--source", type=Path, default=default, help="the arXiv sample folder")
    ap.add_argument("--new", type=int, default=10_000, help="new papers in the extension (default 10,000)")
    ap.add_argument("--seed", type=int, default=17)
    args = ap.parse_args()

    from rap_benchmark.core.spec import arxiv_sample_spec
    from rap_benchmark.pipeline.build import normalise_papers
    from rap_benchmark.pipeline.corpus import read_corpus

    spec = arxiv_sample_spec()
    papers = normalise_papers(read_corpus(args.source, spec)[0])
    dates = papers["date"].astype(str)
    old, later = papers[dates < T], papers[dates >= T]
    pick = later.sample(n=min(args.new, len(later)) - 1, random_state=args.seed)
    newest = later[later["date"].astype(str) == later["date"].astype(str).max()].head(1)
    new = later.loc[sorted(set(pick.index) | set(newest.index))]
    with tempfile.TemporaryDirectory(prefix="extend-bench-") as tmp:
        root = Path(tmp)
        cut = _write(old, root / "cut")
        grown = _write(normalise_papers(papers.loc[sorted(set(old.index) | set(new.index))]), root / "grown")
        parent_spec = dataclasses.replace(spec, origins=tuple(o for o in spec.origins if o < T), date_end=T)
        (root / "parent.json").write_text(json.dumps(parent_spec.to_dict()), encoding="utf-8")
        (root / "full.json").write_text(json.dumps(spec.to_dict()), encoding="utf-8")
        build = ["build", "--quiet", "--spec"]
        subprocess.run(
            [
                *RAP,
                *build,
                str(root / "parent.json"),
                "--source",
                str(cut),
                "--freeze-instrument",
                "--out",
                str(root / "v1"),
            ],
            check=True,
            env=ENV,
            stdout=subprocess.DEVNULL,
        )
        extend_s = _timed(
            ["extend", str(root / "v1"), "--source", str(grown), "--origin", T, "--out", str(root / "v2"), "--quiet"]
        )
        # --no-cache: the grown data's eligibility frame is the parent's, so a cached instrument would
        # turn the rebuild into a relabelling; the peer is a build from scratch
        rebuild_s = _timed(
            [*build, str(root / "full.json"), "--source", str(grown), "--out", str(root / "full"), "--no-cache"]
        )
        from rap_benchmark.core.artifacts import load_instance

        v2 = load_instance(root / "v2")
        living = v2.ledger["derived"]["living"]
    print(
        json.dumps(
            {
                "bench": "extend",
                "new_papers": living["new_papers"],
                "pending": bool(living["pending_origins"]),
                "extend_s": round(extend_s, 2),
                "rebuild_s": round(rebuild_s, 2),
                "ratio": round(extend_s / rebuild_s, 4),
                "target_extend_s": 60,
                "cpus": os.cpu_count(),
            }
        )
    )


if __name__ == "__main__":
    main()
