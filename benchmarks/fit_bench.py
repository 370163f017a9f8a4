"""The offline fit's fast readings against the plain readings they replace, on one corpus.

Each pair reads the same texts in the same process, so the ratio holds under any load:

* ``token_ids_ratio``: ``core.text.token_ids`` (Arrow: one byte-table pass, a split, a dictionary
  encoding) over tokenising each text alone with ``core.text.tokenize``;
* ``phrase_keys_ratio``: ``phrases.phrase_keys`` (ASCII text: one regex split, words joined) over
  reading every phrase of every run span by span (``phrases._runs`` / ``_spans``, the tests' oracle).

Each fast reading is checked to give what its peer gives (exit 1 if not). Ends with ONE JSON line of CPU seconds
and ratios (lower is better; below 1 the fast reading is faster).

    python benchmarks/fit_bench.py --source ../shared/data/arxiv --papers 20000
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from rap_benchmark.core.errors import UserError  # noqa: E402
from rap_benchmark.core.spec import arxiv_sample_spec  # noqa: E402
from rap_benchmark.core.text import token_ids, tokenize  # noqa: E402
from rap_benchmark.pipeline.corpus import read_corpus  # noqa: E402
from rap_benchmark.pipeline.phrases import _runs, _spans, phrase_keys  # noqa: E402


def _cpu(fn):  # noqa: ANN001, ANN202 - a thunk and its result
    start = time.process_time()
    out = fn()
    return out, time.process_time() - start


def _runs_keys(text: str) -> set[str]:
    return {text[a:b].lower() for run in _runs(text) for a, b in _spans(run)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--source", type=Path, required=True, help="an arXiv corpus folder (as rap build --source)")
    parser.add_argument("--papers", type=int, default=20_000, help="papers read (the first, by date and id)")
    args = parser.parse_args(argv)
    if not args.source.exists():
        print(f"fit_bench: {args.source} does not exist", file=sys.stderr)
        return 2
    try:
        papers, _ = read_corpus(args.source, arxiv_sample_spec())
    except UserError as exc:
        print(f"fit_bench: {exc}", file=sys.stderr)
        return 2
    papers = papers.sort_values(["date", "arxiv_id"], kind="stable").head(args.papers).reset_index(drop=True)
    texts = [f"{t} {a}" for t, a in zip(papers["title"].tolist(), papers["abstract"].tolist(), strict=True)]
    out: dict[str, float | int] = {"papers": len(texts)}

    (vocab, lengths, ids), fast = _cpu(lambda: token_ids(texts))
    plain_tokens, plain = _cpu(lambda: [tokenize(t) for t in texts])
    if [vocab[i] for i in ids.tolist()] != [w for d in plain_tokens for w in d] or lengths.tolist() != [
        len(d) for d in plain_tokens
    ]:
        print("fit_bench: token_ids differs from tokenising each text", file=sys.stderr)
        return 1
    out |= {"token_ids_s": fast, "tokenize_each_s": plain, "token_ids_ratio": fast / plain}

    phrase_texts = (papers["title"] + ". " + papers["abstract"]).tolist()
    fast_keys, fast = _cpu(lambda: [phrase_keys(t) for t in phrase_texts])
    plain_keys, plain = _cpu(lambda: [_runs_keys(t) for t in phrase_texts])
    if fast_keys != plain_keys:
        print("fit_bench: phrase_keys differs from reading the runs span by span", file=sys.stderr)
        return 1
    out |= {"phrase_keys_s": fast, "runs_spans_s": plain, "phrase_keys_ratio": fast / plain}

    print(json.dumps({k: round(v, 3) if isinstance(v, float) else v for k, v in out.items()}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
