"""Peak memory of validating a 500 MB prediction file (target <= 1 GiB), beside peers.

The validator accepts files up to 512 MiB (``DEFAULT_MAX_BYTES``); the README's leaderboard
section reports this benchmark's figure for the largest of them. Generates a JSONL
submission of ``--mb`` megabytes (default 500) in a temporary folder: 30 models x 5 conditions
x 10,000 episodes with every metadata column, about 330 bytes a row. Then, each in a fresh
process so that peaks do not mix:

* ours: ``validate_predictions(path, instance)``, the validator of ``rap score`` (streams the
  file, checks each row, keeps the usable ones in Arrow batches and converts them to pandas once);
* ``--also DIR``: the same validator from another checkout (e.g. an older commit's tree made with
  ``git archive``), to compare two implementations side by side;
* peer: ``[json.loads(line) for line in file]``, reading the same file into a list of dicts
  (what a validator that holds the whole file does before any check), under a 12 GiB cap.

Prints the figures, then one JSON line. The temporary file is deleted at the end.

    python benchmarks/validate_bench.py            # 500 MB
    python benchmarks/validate_bench.py --mb 50    # a quick look
    old=$(mktemp -d) && git archive OLD rap_benchmark | tar -x -C "$old" && python benchmarks/validate_bench.py --also "$old"
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
HASH = "c0ffee" + "0" * 58
N_FIELDS, ORIGINS = 2000, ("2024-01-01", "2024-07-01", "2025-01-01", "2025-07-01", "2026-01-01")
CONDITIONS = ("A0", "A1", "A2", "A3", "A4")
PEER_CAP = 12 * 1024**3

_OURS = """
import sys, time
import pandas as pd
from pathlib import Path
from rap_benchmark.core.artifacts import Instance
from rap_benchmark.core.spec import mini_spec
from rap_benchmark.evaluation.predictions import validate_predictions

def hwm():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
fields = [f"f{{i:04d}}" for i in range({n_fields})]
origins = {origins!r}
episodes = pd.DataFrame(
    [dict(field_id=f, origin=o, policy="canonical", split="test") for f in fields for o in origins]
)
empty = pd.DataFrame()
inst = Instance(Path("."), mini_spec(), {{}}, empty, {{}}, empty, empty, episodes, empty, {hash!r})
base = hwm()
t0 = time.perf_counter()
report = validate_predictions(sys.argv[1], inst)
wall = time.perf_counter() - t0
print(base, hwm(), wall, report.n_rows_read, len(report.frame), len(report.problems))
"""

_PEER = """
import json, resource, sys, time
resource.setrlimit(resource.RLIMIT_AS, ({cap}, {cap}))
def hwm():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
base = hwm()
t0 = time.perf_counter()
try:
    with open(sys.argv[1], encoding="utf-8") as fh:
        rows = [json.loads(line) for line in fh]
    n = len(rows)
except MemoryError:
    n = -1
print(base, hwm(), time.perf_counter() - t0, n)
"""


def generate(path: Path, target_bytes: int) -> int:
    """Write unique (model, condition, field, origin) rows until the file reaches ``target_bytes``."""
    n = 0
    size = 0
    with path.open("w", encoding="utf-8") as fh:
        for m in range(10_000):
            model = f"org/model-{m:03d}"
            for cond in CONDITIONS:
                for i in range(N_FIELDS):
                    for origin in ORIGINS:
                        w = [(i * 7 + k * 13 + m) % 97 + 1.25 for k in range(8)]
                        row = {
                            "model": model,
                            "condition": cond,
                            "field_id": f"f{i:04d}",
                            "origin": origin,
                            **{f"D{k}": w[k] for k in range(8)},
                            "valid": True,
                            "invalid_reason": None,
                            "manifest_hash": HASH,
                            "attempts": 1,
                            "prompt_tokens": 1200 + i % 300,
                            "completion_tokens": 400 + i % 90,
                            "cost_usd": 0.00123,
                            "wall_s": 3.5,
                            "n_search_calls": i % 20,
                            "response_model": model,
                        }
                        line = json.dumps(row) + "\n"
                        fh.write(line)
                        size += len(line)
                        n += 1
                        if size >= target_bytes:
                            return n
    return n


def run(code: str, path: Path, root: Path = REPO) -> list[float]:
    env = {**os.environ, "PYTHONPATH": str(root)}
    out = subprocess.run([sys.executable, "-c", code, str(path)], env=env, capture_output=True, text=True, check=True)
    return [float(x) for x in out.stdout.split()]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mb", type=int, default=500, help="file size in megabytes (10^6 bytes)")
    ap.add_argument("--no-peer", action="store_true", help="skip the json.loads peer")
    ap.add_argument("--also", type=Path, help="a second checkout whose validator is measured on the same file")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="rap-validate-bench-") as tmp:
        path = Path(tmp) / "submission.jsonl"
        t0 = time.perf_counter()
        n_rows = generate(path, args.mb * 10**6)
        size = path.stat().st_size
        print(f"generated {size:,} bytes, {n_rows:,} rows in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
        code = _OURS.format(n_fields=N_FIELDS, origins=ORIGINS, hash=HASH)
        base, peak, wall, n_read, n_usable, n_problems = run(code, path)
        print(
            f"ours: validate_predictions peak RSS {peak:,.0f} MiB (after imports {base:,.0f} MiB), {wall:.1f} s, "
            f"{int(n_read):,} rows read, {int(n_usable):,} usable, {int(n_problems)} problem(s)",
            file=sys.stderr,
        )
        also = None
        if args.also is not None:
            a_base, a_peak, a_wall, *_ = run(code, path, args.also.resolve())
            also = {"peak": a_peak, "wall": a_wall}
            print(
                f"also: validate_predictions of {args.also}, peak RSS {a_peak:,.0f} MiB (after imports "
                f"{a_base:,.0f} MiB), {a_wall:.1f} s",
                file=sys.stderr,
            )
        peer = None
        if not args.no_peer:
            p_base, p_peak, p_wall, p_n = run(_PEER.format(cap=PEER_CAP), path)
            peer = {"peak": p_peak, "wall": p_wall, "rows": int(p_n)}
            print(
                f"peer: json.loads per line into a list, peak RSS {p_peak:,.0f} MiB (after imports "
                f"{p_base:,.0f} MiB), {p_wall:.1f} s" + (" (hit the 12 GiB cap)" if p_n < 0 else ""),
                file=sys.stderr,
            )
    result = {
        "benchmark": "validate_submission_rss",
        "file_bytes": size,
        "rows": n_rows,
        "validate_peak_rss_mib": round(peak, 1),
        "validate_wall_s": round(wall, 2),
        "target_mib": 1024,
        "within_target": peak <= 1024,
        "also_peak_rss_mib": None if also is None else round(also["peak"], 1),
        "also_wall_s": None if also is None else round(also["wall"], 2),
        "peer": "json.loads per line into a list of dicts",
        "peer_peak_rss_mib": None if peer is None else round(peer["peak"], 1),
        "peer_wall_s": None if peer is None else round(peer["wall"], 2),
        "rss_ratio_vs_peer": None if peer is None else round(peak / peer["peak"], 3),
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
