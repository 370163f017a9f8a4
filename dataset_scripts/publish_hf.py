"""Push exported repos to the Hugging Face Hub with ``rap_benchmark.hub.publish``.

python dataset_scripts/publish_hf.py hub/ --org rap --tag v1.0.0 --dry-run
"""

from __future__ import annotations

import argparse
from pathlib import Path

from rap_benchmark.hub import publish


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("hub_dir", type=Path, help="the folder export_hf.py wrote (--out)")
    parser.add_argument("--org", required=True, help="Hub namespace to publish under")
    parser.add_argument("--local-org", default=None, help="folder under HUB_DIR holding the repos (default: --org)")
    parser.add_argument("--tag", required=True, help="version tag, e.g. v1.0.0")
    parser.add_argument("--private", action="store_true", help="create private repos")
    parser.add_argument("--dry-run", action="store_true", help="verify and print the plan; touch nothing")
    args = parser.parse_args(argv)
    steps = publish(
        args.hub_dir, org=args.org, tag=args.tag, private=args.private, local_org=args.local_org, dry_run=args.dry_run
    )
    for step in steps:
        print(f"{'plan' if args.dry_run else 'done'}\t{step.action}\t{step.repo_id}\t{step.detail}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
