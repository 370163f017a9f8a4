"""Push exported repos to the Hugging Face Hub (a thin wrapper over ``rap publish``).

python dataset_scripts/publish_hf.py hub/ --org rap --tag v1.0.0 --dry-run
"""

from __future__ import annotations

import sys

from rap_benchmark.cli import main

if __name__ == "__main__":
    raise SystemExit(main(["publish", *sys.argv[1:]]))
