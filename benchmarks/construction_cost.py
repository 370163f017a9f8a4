"""What a capable model's directions cost: the paper's construction and the compact one, side by side.

Reads the corpus and fits the candidate fields once, then walks each construction with the dry
run's typical stand-in replies (``rap build --instrument llm --dry-run``: nothing is sent): per
construction the requests, prompt and completion tokens, rounds (one batch file each), and the
price at a stated rate, synchronous and at a batch API's half price. Ends with ONE JSON line:
both tables and the compact construction's ratios to the paper's (requests per field, tokens).

    python benchmarks/construction_cost.py --instance arxiv-sample
    python benchmarks/construction_cost.py --spec rehearsal.json --source snapshot.jsonl   # e.g. the 2.4M rehearsal
    (rate: --input-per-1m 3 --output-per-1m 15, USD per 1M tokens; the defaults)
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # this checkout's package, not an installed one

MODEL = "costed-model"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--instance", default="arxiv-sample", help="named instance whose spec to use")
    p.add_argument("--spec", help="a spec JSON file instead of the named instance's")
    p.add_argument("--source", help="the corpus (default: the instance's data folder)")
    p.add_argument("--input-per-1m", type=float, default=3.0, help="USD per 1M prompt tokens (default 3)")
    p.add_argument("--output-per-1m", type=float, default=15.0, help="USD per 1M completion tokens (default 15)")
    args = p.parse_args(argv)

    from rap_benchmark.core.spec import BenchmarkSpec, spec_for
    from rap_benchmark.pipeline.build import normalise_papers
    from rap_benchmark.pipeline.corpus import read_corpus
    from rap_benchmark.pipeline.fields import build_fields
    from rap_benchmark.pipeline.instrument.llm import PipelineConfig, estimate

    spec = BenchmarkSpec.from_json(args.spec) if args.spec else spec_for(args.instance)
    source = args.source
    if source is None:
        from rap_benchmark.cli.build import default_arxiv_source

        source = default_arxiv_source()
        if source is None:
            print("construction_cost: no arXiv sample found; pass --source", file=sys.stderr)
            return 2
    t0 = time.perf_counter()
    papers, _ = read_corpus(Path(source), spec)
    papers = normalise_papers(papers)
    memberships, candidates = build_fields(papers, spec)
    print(
        f"{len(papers):,} papers, {len(candidates)} candidate fields ({time.perf_counter() - t0:.0f} s)",
        file=sys.stderr,
    )
    rate = {"models": {MODEL: {"input_per_1m": args.input_per_1m, "output_per_1m": args.output_per_1m}}}
    tables = {}
    with tempfile.TemporaryDirectory() as tmp:
        prices = Path(tmp) / "prices.json"
        prices.write_text(json.dumps(rate))
        for construction in ("paper", "compact"):
            t = time.perf_counter()
            config = PipelineConfig(model=MODEL, draft_models=(MODEL, MODEL), construction=construction)
            tables[construction] = estimate(papers, memberships, candidates, spec, config, prices_path=str(prices))
            print(f"{construction}: estimated in {time.perf_counter() - t:.0f} s", file=sys.stderr)
    header = f"{'construction':<13}{'requests':>10}{'per field':>10}{'prompt tok':>14}{'compl. tok':>13}{'rounds':>8}"
    print(header + f"{'USD':>12}{'USD batch':>12}", file=sys.stderr)
    rows = {}
    for name, table in tables.items():
        t = table["total"]
        rows[name] = {
            "requests": t["requests"],
            "requests_per_field": round(t["requests"] / len(candidates), 3),
            "prompt_tokens": t["prompt_tokens"],
            "completion_tokens": t["completion_tokens"],
            "rounds": t["rounds"],
            "usd": t["cost_usd"],
            "usd_batch": None if t["cost_usd"] is None else round(t["cost_usd"] / 2, 2),
            "stages": {k: v["requests"] for k, v in table.items() if k != "total"},
        }
        r = rows[name]
        print(
            f"{name:<13}{r['requests']:>10,}{r['requests_per_field']:>10.2f}{r['prompt_tokens']:>14,}"
            f"{r['completion_tokens']:>13,}{r['rounds']:>8}{r['usd']:>12,.2f}{r['usd_batch']:>12,.2f}",
            file=sys.stderr,
        )
    paper, compact = rows["paper"], rows["compact"]
    tokens = lambda r: r["prompt_tokens"] + r["completion_tokens"]  # noqa: E731
    print(
        json.dumps(
            {
                "corpus": str(source),
                "papers": len(papers),
                "candidate_fields": len(candidates),
                "rate_usd_per_1m": [args.input_per_1m, args.output_per_1m],
                "paper": paper,
                "compact": compact,
                "compact_requests_per_field": compact["requests_per_field"],
                "compact_token_share_of_paper": round(tokens(compact) / tokens(paper), 4),
            }
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
