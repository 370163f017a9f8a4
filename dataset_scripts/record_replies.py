"""Record an LLM build's replies in the package, so that the instance rebuilds offline from them.

After ``rap build --instrument llm ...`` finished (over HTTP or batch files), its request store
(``OUT.llm-store/requests.jsonl``) holds every reply the construction used. This writes them,
sorted by request key and xz-compressed, to ``rap_benchmark/data/replies/<name>.jsonl.xz`` and
prints what the replies took (requests, tokens, rounds), to state in the spec's
``extra.llm_instrument.provenance`` beside who wrote them, when and how. With that block in the
spec, ``rap build --instance <name>`` answers every request from the recorded replies and sends
nothing; ``rap build --instance <name> --instrument llm --batch DIR`` writes only the requests
that have none (after a code or prompt change).

python dataset_scripts/record_replies.py build/as-llm.llm-store --name arxiv-sample --batch build/as-llm.batch
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # this checkout's package


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("store", type=Path, help="the build's request store folder (OUT.llm-store)")
    parser.add_argument("--name", required=True, help="the instance (file name of the recorded replies)")
    parser.add_argument("--batch", type=Path, help="the build's batch folder, to count its rounds")
    args = parser.parse_args(argv)
    from rap_benchmark.core import resources
    from rap_benchmark.pipeline.instrument.llm.batch import STATE_FILE
    from rap_benchmark.pipeline.instrument.llm.store import REQUESTS_FILE, read_recorded, read_requests, write_recorded

    records, torn = read_requests(args.store / REQUESTS_FILE)
    if torn or not records:
        print(f"record_replies: {args.store} holds {'a torn last line' if torn else 'no reply'}", file=sys.stderr)
        return 2
    out = resources.DATA_DIR / "replies" / f"{args.name}.jsonl.xz"
    out.parent.mkdir(parents=True, exist_ok=True)
    write_recorded(list(records.values()), out)
    assert read_recorded(out) == records  # what the build replays is what the store holds
    stages: dict[str, int] = {}
    for r in records.values():
        stages[r["stage"]] = stages.get(r["stage"], 0) + 1
    summary = {
        "replies": f"replies/{out.name}",
        "requests": len(records),
        "requests_by_stage": dict(sorted(stages.items())),
        "prompt_tokens": sum(r["prompt_tokens"] for r in records.values()),
        "completion_tokens": sum(r["completion_tokens"] for r in records.values()),
        "response_models": sorted({str(r.get("response_model")) for r in records.values()}),
        "bytes": out.stat().st_size,
    }
    if args.batch is not None:
        summary["rounds"] = len(json.loads((args.batch / STATE_FILE).read_text(encoding="utf-8"))["rounds"])
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
