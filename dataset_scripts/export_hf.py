"""Build an instance's Hugging Face dataset repos with ``rap_benchmark.export``.

python dataset_scripts/export_hf.py build/full --out hub/ --withhold-test-targets --citecast build/citecast
"""

from __future__ import annotations

import argparse
from pathlib import Path

import rap_benchmark as rap


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("instance", type=Path, help="a built instance folder")
    parser.add_argument("--out", type=Path, required=True, help="hub folder (repos go to OUT/<org>/<name>)")
    parser.add_argument("--org", default="rap", help="organisation folder / Hub namespace (default rap)")
    parser.add_argument("--withhold-test-targets", action="store_true", help="withhold Test targets (last origin on)")
    parser.add_argument("--withhold-from", default=None, help="withhold Test targets from this date instead")
    parser.add_argument("--citecast", type=Path, default=None, help="a built CiteCast task folder")
    args = parser.parse_args(argv)
    result = rap.export(
        rap.load(args.instance),
        args.out,
        org=args.org,
        withhold_test_targets=args.withhold_test_targets,
        withhold_from=args.withhold_from,
        citecast=args.citecast,
    )
    for name, path in result.repos.items():
        print(f"{name}\t{path}")
    if result.private_dir is not None:
        print(f"private targets and salt (do not publish): {result.private_dir}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
