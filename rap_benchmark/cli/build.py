"""``rap build``, ``rap verify``, ``rap info`` and ``rap demo``."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from rap_benchmark.core import resources

ARXIV_ENV = "RAP_SHARED_ARXIV"

BUILD_EPILOG = """examples:
  rap build --instance mini --out build/mini
  rap build --instance arxiv-sample --out build/arxiv-sample           # reads ../shared/data/arxiv
  rap build --instance arxiv-sample --out build/as --source /data/arxiv_parquet_folder
  rap build --spec my-spec.json --source arxiv-metadata-oai-snapshot.json --out build/full

The arxiv-sample source defaults to $RAP_SHARED_ARXIV, else ../shared/data/arxiv next to the
repository. --source accepts a folder of parquet files, a metadata snapshot (.jsonl/.json, may be
.gz) or an arXiv API Atom feed (.xml/.atom).
"""

VERIFY_EPILOG = """examples:
  rap verify build/mini          # exit 0 when every file matches SHA256SUMS, else 1 naming each file
"""

INFO_EPILOG = """examples:
  rap info build/mini
  rap info build/arxiv-sample --json > info.json
"""

DEMO_EPILOG = """examples:
  rap demo                       # builds mini into a new temporary folder and runs every step
  rap demo --out build/demo      # keep the instance where you want it
"""


def default_arxiv_source() -> Path | None:
    """$RAP_SHARED_ARXIV, else ``../shared/data/arxiv`` beside the repository (or the cwd)."""
    env = os.environ.get(ARXIV_ENV)
    if env:
        return Path(env)
    repo = resources.REPO_DIR
    for base in (repo, Path.cwd()):
        candidate = base.parent / "shared" / "data" / "arxiv"
        if candidate.is_dir():
            return candidate
    return None


def _cmd_build(args: argparse.Namespace) -> int:
    import time

    from rap_benchmark.core.artifacts import load_instance
    from rap_benchmark.core.spec import BenchmarkSpec, spec_for
    from rap_benchmark.pipeline.build import build_instance, format_info, instance_info

    spec = BenchmarkSpec.from_json(args.spec) if args.spec else spec_for(args.instance or "mini")
    instance = args.instance or spec.name
    source = args.source
    if source is None and instance == "arxiv-sample":
        source = default_arxiv_source()
        if source is None:
            print(f"rap build: no arXiv sample found; pass --source or set ${ARXIV_ENV}", file=sys.stderr)
            return 2
    if source is None and instance != "mini":
        print(f"rap build: instance {instance!r} needs --source (only mini is generated)", file=sys.stderr)
        return 2
    start = time.perf_counter()
    out = build_instance(spec, args.out, source=source, progress=not args.quiet)
    seconds = time.perf_counter() - start
    print(f"built {spec.name} at {out} in {seconds:.1f} s")
    print(format_info(instance_info(load_instance(out))))
    return 0


def _cmd_verify(args: argparse.Namespace) -> int:
    from rap_benchmark.core.artifacts import SUMS_FILE, verify

    root = Path(args.dir)
    problems = verify(root)
    if problems:
        for problem in problems:
            print(f"BAD {problem}")
        print(f"{root}: {len(problems)} problem(s)", file=sys.stderr)
        return 1
    n = len((root / SUMS_FILE).read_text(encoding="utf-8").splitlines())
    print(f"OK {root}: {n} files match {SUMS_FILE}")
    return 0


def _cmd_info(args: argparse.Namespace) -> int:
    import json

    from rap_benchmark.core.artifacts import ArtifactError, load_instance
    from rap_benchmark.pipeline.build import format_info, instance_info

    try:
        inst = load_instance(args.dir)
    except ArtifactError as exc:
        print(f"rap info: {exc}", file=sys.stderr)
        return 1
    info = instance_info(inst)
    print(json.dumps(info, indent=1, sort_keys=True) if args.json else format_info(info))
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    from rap_benchmark.cli.demo_flow import run_demo

    ctx = run_demo(args.out, progress=not args.quiet)
    print(f"\ndemo finished; the instance is at {ctx.out}")
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    fmt = argparse.RawDescriptionHelpFormatter
    p = subparsers.add_parser(
        "build",
        help="build an instance's artifacts (mini, arxiv-sample, or any spec + source)",
        description="Build every artifact of an instance into OUT (replaced atomically).",
        epilog=BUILD_EPILOG,
        formatter_class=fmt,
    )
    p.add_argument("--instance", choices=["mini", "arxiv-sample", "full"], help="named instance (default: mini)")
    p.add_argument("--out", required=True, help="output folder (replaced when it holds a previous build)")
    p.add_argument("--source", help="corpus: parquet folder, snapshot .jsonl/.json(.gz) or Atom .xml")
    p.add_argument("--spec", help="spec JSON file (overrides the named instance's spec)")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.set_defaults(func=_cmd_build)

    p = subparsers.add_parser(
        "verify",
        help="check every artifact against SHA256SUMS",
        description="Check every file of an instance against its SHA256SUMS; exit 1 naming each bad file.",
        epilog=VERIFY_EPILOG,
        formatter_class=fmt,
    )
    p.add_argument("dir", help="instance folder")
    p.set_defaults(func=_cmd_verify)

    p = subparsers.add_parser(
        "info",
        help="figures of a built instance",
        description=(
            "Papers, fields, directions per field, blocks, Dev/Test fields and episodes, assignment-type "
            "shares, and papers per episode window (verifies hashes first)."
        ),
        epilog=INFO_EPILOG,
        formatter_class=fmt,
    )
    p.add_argument("dir", help="instance folder")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    p.set_defaults(func=_cmd_info)

    p = subparsers.add_parser(
        "demo",
        help="build mini and run everything the package can do on it",
        description="Build the embedded mini instance and run every demo step on it, printing a summary per step.",
        epilog=DEMO_EPILOG,
        formatter_class=fmt,
    )
    p.add_argument("--out", help="where to build mini (default: a new temporary folder)")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.set_defaults(func=_cmd_demo)
