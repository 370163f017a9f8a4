"""``rap extend`` and ``rap resolve``: new origins as arXiv grows, and their targets once due."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

EPILOG = """examples:
  rap build --instance arxiv-sample --freeze-instrument --out releases/v1   # its last origin: 2026-01-01
  rap extend releases/v1 --source snapshot-2026-06.jsonl.gz --origin 2026-07-01 --out releases/v2
  rap submit seal preds/my-model.jsonl --out seals/my-model.seal.json     # before 2026-07-01
  rap resolve releases/v2 --source snapshot-2027-01.jsonl.gz              # once [T, T+6mo) is covered
  rap leaderboard score preds/*.jsonl --live --seals seals.jsonl --instance releases/v2 --out board/

extend: new papers are read, deduplicated against the parent and labelled with the parent's frozen
instrument (instrument/, written by rap build --freeze-instrument); fields, codebooks, blocks and
splits are the parent's; y stays pending until the data cover [T, T+6mo). The new ledger names the
parent's manifest hash (derived.living). resolve: fills the pending y (refused while the window is
not covered). See docs/LIVING.md for the monthly recipe.
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("extend", help="add a new origin to a built instance (frozen instrument)", epilog=EPILOG)
    p.add_argument("dir", type=Path, help="the parent instance (built with --freeze-instrument)")
    p.add_argument("--source", type=Path, required=True, help="new data: parquet folder, snapshot .jsonl(.gz), Atom")
    p.add_argument("--origin", required=True, help="the new origin T (YYYY-MM-DD)")
    p.add_argument("--out", type=Path, required=True, help="the new version's folder (the parent is never modified)")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.set_defaults(func=cmd_extend)

    p = subparsers.add_parser("resolve", help="fill the pending targets of an extended instance", epilog=EPILOG)
    p.add_argument("dir", type=Path, help="an extended instance with a pending origin")
    p.add_argument("--source", type=Path, required=True, help="newer data covering the pending window")
    p.add_argument("--out", type=Path, default=None, help="write the resolved version here (default: in place)")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.set_defaults(func=cmd_resolve)


def _summary(path: Path) -> str:
    from rap_benchmark.core.artifacts import load_instance

    inst = load_instance(path)
    living = inst.ledger["derived"]["living"]
    pending = living.get("pending_origins") or []
    return (
        f"{path}: origins {', '.join(inst.spec.origins)}; "
        f"pending {', '.join(pending) if pending else 'none'}; manifest {inst.manifest_hash}; "
        f"parent {living['parent_manifest_hash']}"
    )


def cmd_extend(args: argparse.Namespace) -> int:
    from rap_benchmark.pipeline.extend import extend_instance

    out = extend_instance(args.dir, args.source, args.origin, args.out, progress=not args.quiet)
    print(_summary(out))
    return 0


def cmd_resolve(args: argparse.Namespace) -> int:
    from rap_benchmark.pipeline.extend import resolve_instance

    out = resolve_instance(args.dir, args.source, out=args.out, progress=not args.quiet)
    print(_summary(out))
    print("resolved: score sealed forecasts with rap leaderboard score --live", file=sys.stderr)
    return 0
