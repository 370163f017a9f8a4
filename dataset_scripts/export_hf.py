"""Build an instance's Hugging Face dataset repos (a thin wrapper over ``rap export-hf``).

python dataset_scripts/export_hf.py build/full --out hub/ --withhold-test-targets --citecast build/citecast
"""

from __future__ import annotations

import sys

from rap_benchmark.cli import main

if __name__ == "__main__":
    raise SystemExit(main(["export-hf", *sys.argv[1:]]))
