"""Search benchmark: exactness and latency vs bm25s and rank_bm25, build time and
memory, the paper-scale case (356k papers, 278 fields, 2,780 universes) and an 86k-call audit.

One command::

    .venv/bin/python benchmarks/search_bench.py                      # mini + paper scale
    .venv/bin/python benchmarks/search_bench.py --instance build/arxiv-sample
    .venv/bin/python benchmarks/search_bench.py --quick              # about a minute

What is measured, side by side in one run, on the same universes and the same queries:

* exactness: every (field, origin, regime) universe of the instance gets a freshly built float64
  ``bm25s`` index (method ``lucene``, k1=1.5, b=0.75) over exactly its papers (same token lists);
  a query is exact when ids, order and total_hits are identical and scores agree to 1e-9.
* latency per call, from the query string to ranked ids (tokenisation included on every side):
  this engine (``SearchEngine.ranked``) vs bm25s (``get_scores`` + exact top-8 with id
  tie-break + hit count) vs rank_bm25 ``BM25Okapi`` (same params; its IDF differs, so latency
  only, on every 4th universe because it is slow). Each call is timed REPEATS times per system,
  alternating which system goes first, and the minimum is kept (the same rule for every system;
  it filters out other processes on a shared machine).
* build: a fresh process makes every universe servable from the cached tokens (and cached
  display text); wall time, RSS after the build (= serving memory) and peak RSS.
* paper scale: a generated Zipfian corpus of 356,357 papers in 278 fields (2,780 universes;
  ``tests/search_synthetic.py``): a fresh process builds from cached tokens and records
  86,284 calls (a fifth of them date-narrowed); another fresh process re-executes them all from
  the JSONL file (audit); then a seeded sample of 40 universes is compared with bm25s as above.
  ``--quick`` divides papers, fields and calls by 10.

The last line printed is one JSON object with every figure, among them exact_fraction,
p50_ratio_vs_bm25s, p95_ratio_vs_bm25s, p50_ratio_vs_rank_bm25 (instance), build_all_universes_s,
serve_rss_mib, audit_86k_s (paper scale) and the targets' inputs (p50_us, bm25s_p50_us, ...).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
PAPER_PAPERS = 356_357
PAPER_FIELDS = 278
PAPER_CALLS = 86_284
REPEATS = 3  # timings per call and system; the minimum is kept


def _rss_mib() -> tuple[float, float]:
    """(current RSS, peak RSS) of this process in MiB, from /proc/self/status."""
    fields = {}
    with open("/proc/self/status", encoding="ascii") as fh:
        for line in fh:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                fields[key] = int(value.split()[0]) / 1024
    return fields.get("VmRSS", float("nan")), fields.get("VmHWM", float("nan"))


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# -- workers (fresh processes) ----------------------------------------------------------------


def _worker_build(root: str) -> dict:
    from rap_benchmark.bm25 import SearchEngine

    base_rss, _ = _rss_mib()
    t0 = time.perf_counter()
    engine = SearchEngine.from_dir(root)
    build_s = time.perf_counter() - t0
    # the first query compiles nothing (numba kernels are cached on disk) but touches the code path
    engine.ranked(engine.field_ids[0], engine.spec.origins[-1], "expanding", "model")
    gc.collect()
    rss, peak = _rss_mib()
    n_universes = sum(1 for _ in engine.universes())
    return {
        "build_s": build_s,
        "rss_mib": rss,
        "peak_rss_mib": peak,
        "baseline_rss_mib": base_rss,
        "index_mib": engine.nbytes / 2**20,
        "n_universes": n_universes,
        "n_fields": len(engine.fields),
        "n_memberships": int(sum(len(ix) for ix in engine.fields.values())),
        "_engine": engine,
    }


def _worker_record(root: str, calls_path: str, n_calls: int, seed: int) -> dict:
    """Build from cached tokens, then record ``n_calls`` realistic calls to ``calls_path``."""
    import pandas as pd

    from rap_benchmark.bm25.audit import record_call
    from rap_benchmark.core.serial import to_dict
    from rap_benchmark.core.text import tokenize

    out = _worker_build(root)
    engine = out.pop("_engine")
    titles = pd.read_parquet(Path(root) / "papers.parquet", columns=["title"])["title"].tolist()
    rng = np.random.default_rng(seed)
    universes = list(engine.universes())
    lat = np.empty(n_calls, dtype=np.float64)
    with open(calls_path, "w", encoding="utf-8") as fh:
        for i in range(n_calls):
            field_id, origin, regime = universes[int(rng.integers(len(universes)))]
            index = engine.index(field_id)
            row = int(index.rows[int(rng.integers(len(index.rows)))])
            words = tokenize(titles[row])
            query = " ".join(rng.choice(words, size=min(len(words), int(rng.integers(2, 6))), replace=False))
            start = end = None
            if i % 5 == 0:
                end = f"{int(origin[:4]) - 1}-{int(rng.integers(1, 13)):02d}-15"
            t0 = time.perf_counter_ns()
            call = record_call(engine, field_id, origin, regime, query, start=start, end=end)
            lat[i] = time.perf_counter_ns() - t0
            fh.write(json.dumps(to_dict(call), sort_keys=True) + "\n")
    out["record_p50_us"] = float(np.percentile(lat, 50) / 1e3)
    out["record_p95_us"] = float(np.percentile(lat, 95) / 1e3)
    return out


def _worker_audit(root: str, calls_path: str) -> dict:
    from rap_benchmark.bm25.audit import audit_calls, read_calls

    out = _worker_build(root)
    engine = out.pop("_engine")
    t0 = time.perf_counter()
    report = audit_calls(engine, read_calls(calls_path))
    out["audit_s"] = time.perf_counter() - t0
    out["audit_calls"] = report.n_calls
    out["audit_mismatches"] = len(report.mismatches)
    return out


def _run_worker(*args: str) -> dict:
    env = {**os.environ, "PYTHONHASHSEED": "random"}
    proc = subprocess.run(
        [sys.executable, __file__, "--_worker", *args], capture_output=True, text=True, env=env, check=False
    )
    if proc.returncode != 0:
        raise RuntimeError(f"worker {args[0]} failed:\n{proc.stderr[-4000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


# -- side-by-side latency and exactness on the instance's universes ----------------------------


def _percentiles(values: list[float]) -> tuple[float, float]:
    arr = np.asarray(values, dtype=np.float64)
    return float(np.percentile(arr, 50)), float(np.percentile(arr, 95))


def _compare_instance(
    root: Path, n_queries: int, rank_every: int | None, seed: int, max_universes: int | None = None
) -> dict:
    """Exactness and latency side by side on every universe (or a seeded sample of
    ``max_universes``); rank_bm25 runs on every ``rank_every``-th universe (None: never)."""
    import bm25s
    import pandas as pd
    from rank_bm25 import BM25Okapi
    from tqdm import tqdm

    from rap_benchmark.bm25 import SearchEngine
    from rap_benchmark.core.text import query_terms, tokenize

    engine = SearchEngine.from_dir(root)
    papers = pd.read_parquet(root / "papers.parquet", columns=["arxiv_id", "date", "title", "abstract"])
    row_of = {p: i for i, p in enumerate(papers["arxiv_id"].tolist())}
    texts = (papers["title"] + "\n" + papers["abstract"]).tolist()
    rng = np.random.default_rng(seed)
    k = engine.spec.top_k
    k1, b = engine.spec.bm25_k1, engine.spec.bm25_b
    ours, ref, okapi = [], [], []
    n_exact = n_total = 0
    sizes = []
    universes = list(engine.universes())
    if max_universes is not None and max_universes < len(universes):
        pick = np.random.default_rng(seed).choice(len(universes), size=max_universes, replace=False)
        universes = [universes[i] for i in sorted(pick.tolist())]
    for u, (field_id, origin, regime) in enumerate(tqdm(universes, desc="universes", unit="univ", file=sys.stderr)):
        ids = engine.universe_ids(field_id, origin, regime)
        if not ids:
            continue
        sizes.append(len(ids))
        tokens = [tokenize(texts[row_of[p]]) for p in ids]
        vocab = {t: i for i, t in enumerate(sorted({t for doc in tokens for t in doc}))}
        model = bm25s.BM25(method="lucene", k1=k1, b=b, dtype="float64")
        model.index(([[vocab[t] for t in doc] for doc in tokens], dict(vocab)), show_progress=False)
        id_arr = np.asarray(ids, dtype=object)
        id_rank = np.empty(len(ids), dtype=np.int64)
        id_rank[np.argsort(id_arr, kind="stable")] = np.arange(len(ids))
        okapi_model = BM25Okapi(tokens, k1=k1, b=b) if rank_every and u % rank_every == 0 else None
        queries = []
        for _ in range(n_queries):
            doc = tokens[int(rng.integers(len(tokens)))] or ["model"]
            queries.append(" ".join(doc[int(j)] for j in rng.integers(len(doc), size=int(rng.integers(1, 6)))))

        def bm25s_call(q: str, model=model, vocab=vocab, id_arr=id_arr, id_rank=id_rank):
            qids = [vocab[t] for t in query_terms(q) if t in vocab]
            if not qids:
                return [], [], 0
            scores = model.get_scores(qids)
            total = int(np.count_nonzero(scores > 0))
            if total > k:
                kth = np.partition(scores, len(scores) - k)[len(scores) - k]
                cand = np.flatnonzero(scores >= kth)
            else:
                cand = np.flatnonzero(scores > 0)
            order = cand[np.lexsort((id_rank[cand], -scores[cand]))][:k]
            return id_arr[order].tolist(), scores[order].tolist(), total

        def okapi_call(q: str, okapi_model=okapi_model, id_arr=id_arr):
            terms = query_terms(q)
            scores = okapi_model.get_scores(terms)
            total = int(np.count_nonzero(scores))  # rank_bm25 has no hit count; latency only
            top = np.argsort(-scores, kind="stable")[:k]
            return id_arr[top].tolist(), total

        for q in queries[:2]:  # warm caches on both sides
            engine.ranked(field_id, origin, regime, q)
            bm25s_call(q)
        for qi, q in enumerate(queries):
            # REPEATS timings per call, alternating which system goes first; the per-call figure is
            # the minimum (robust to other processes on a shared machine, same rule for both)
            t_ours, t_ref = [], []
            for rep in range(REPEATS):
                for side in (0, 1) if (qi + rep) % 2 == 0 else (1, 0):
                    t0 = time.perf_counter_ns()
                    if side == 0:
                        got = engine.ranked(field_id, origin, regime, q)
                        t_ours.append(time.perf_counter_ns() - t0)
                    else:
                        want_ids, want_scores, want_total = bm25s_call(q)
                        t_ref.append(time.perf_counter_ns() - t0)
            ours.append(min(t_ours) / 1e3)
            ref.append(min(t_ref) / 1e3)
            n_total += 1
            if (
                got.ids == want_ids
                and got.total_hits == want_total
                and np.allclose(got.scores, want_scores, rtol=0, atol=1e-9)
            ):
                n_exact += 1
            if okapi_model is not None and qi < 5:
                t3 = time.perf_counter_ns()
                okapi_call(q)
                okapi.append((time.perf_counter_ns() - t3) / 1e3)
    ours_p50, ours_p95 = _percentiles(ours)
    ref_p50, ref_p95 = _percentiles(ref)
    okapi_p50, _ = _percentiles(okapi) if okapi else (float("nan"), float("nan"))
    return {
        "n_universes": len(sizes),
        "universe_docs_mean": float(np.mean(sizes)),
        "universe_docs_max": int(np.max(sizes)),
        "n_queries": n_total,
        "exact_fraction": n_exact / n_total,
        "p50_us": ours_p50,
        "p95_us": ours_p95,
        "bm25s_p50_us": ref_p50,
        "bm25s_p95_us": ref_p95,
        "rank_bm25_p50_us": okapi_p50,
        "rank_bm25_queries": len(okapi),
        "p50_ratio_vs_bm25s": ours_p50 / ref_p50,
        "p95_ratio_vs_bm25s": ours_p95 / ref_p95,
        "p50_ratio_vs_rank_bm25": ours_p50 / okapi_p50,
    }


# -- instances --------------------------------------------------------------------------------


def _instance_dir(name: str, work: Path) -> Path:
    if Path(name).is_dir():
        return Path(name)
    from rap_benchmark.core.spec import spec_for
    from rap_benchmark.pipeline.build import build_instance

    out = work / name
    _log(f"building instance {name} into {out} ...")
    kwargs = {}
    if name == "arxiv-sample":
        kwargs["source"] = Path(os.environ.get("RAP_SHARED_ARXIV", REPO.parent / "shared" / "data" / "arxiv"))
    build_instance(spec_for(name), out, **kwargs)
    return out


def _paper_scale_dir(work: Path, n_papers: int, n_fields: int, seed: int) -> tuple[Path, dict]:
    from rap_benchmark.bm25 import SearchEngine

    sys.path.insert(0, str(REPO / "tests"))  # the generator is test code, kept with the tests
    from search_synthetic import zipf_corpus

    from rap_benchmark.core.artifacts import LEDGER_FILE, write_json, write_table
    from rap_benchmark.core.spec import BenchmarkSpec
    from rap_benchmark.core.sums import write_sums

    root = work / f"paper-scale-{n_papers}"
    root.mkdir(parents=True, exist_ok=True)
    _log(f"generating a {n_papers:,}-paper Zipfian corpus in {n_fields} fields ...")
    t0 = time.perf_counter()
    papers, assignments = zipf_corpus(n_papers, n_fields, seed=seed, vocab_size=200_000)
    gen_s = time.perf_counter() - t0
    write_table(root, "papers", papers)
    write_table(root, "assignments", assignments)
    write_json(root / LEDGER_FILE, BenchmarkSpec().ledger())
    write_sums(root)
    n_memberships = len(assignments)
    del papers, assignments
    gc.collect()
    _log("tokenising once into .cache/ ...")
    t0 = time.perf_counter()
    SearchEngine.from_dir(root, progress=True)
    first_build_s = time.perf_counter() - t0
    return root, {"generate_s": gen_s, "first_build_with_tokenize_s": first_build_s, "memberships": n_memberships}


PAPER_KEYS = (
    "paper_papers", "paper_fields", "paper_memberships", "paper_universes", "paper_generate_s",
    "paper_first_build_with_tokenize_s", "build_all_universes_s", "serve_rss_mib", "serve_peak_rss_mib",
    "serve_baseline_rss_mib", "serve_index_mib", "paper_record_p50_us", "paper_record_p95_us",
    "paper_sampled_universes", "paper_exact_fraction", "paper_p50_us", "paper_p95_us", "paper_bm25s_p50_us",
    "paper_bm25s_p95_us", "paper_p50_ratio_vs_bm25s", "paper_p95_ratio_vs_bm25s", "audit_calls",
    "audit_mismatches", "audit_86k_s", "audit_86k_with_build_s",
)  # fmt: skip


def _paper_scale(work: Path, scale: int, n_queries: int, seed: int, *, quick: bool) -> dict:
    """The paper-scale case (every figure in PAPER_KEYS)."""
    n_papers, n_fields, n_calls = PAPER_PAPERS // scale, PAPER_FIELDS // scale, PAPER_CALLS // scale
    paper_root, gen = _paper_scale_dir(work, n_papers, n_fields, seed)
    calls_path = work / "paper_calls.jsonl"
    _log(f"paper scale: fresh-process build + recording {n_calls:,} calls ...")
    rec = _run_worker("record", str(paper_root), str(calls_path), str(n_calls), str(seed))
    _log("paper scale: fresh-process audit of the recorded calls ...")
    aud = _run_worker("audit", str(paper_root), str(calls_path))
    _log("paper scale: exactness and latency vs bm25s on sampled universes ...")
    paper_cmp = _compare_instance(
        paper_root, max(5, n_queries // 2), rank_every=None, seed=seed, max_universes=10 if quick else 40
    )
    out = {
        "paper_papers": n_papers,
        "paper_fields": n_fields,
        "paper_memberships": gen["memberships"],
        "paper_universes": rec["n_universes"],
        "paper_generate_s": gen["generate_s"],
        "paper_first_build_with_tokenize_s": gen["first_build_with_tokenize_s"],
        "build_all_universes_s": rec["build_s"],
        "serve_rss_mib": rec["rss_mib"],
        "serve_peak_rss_mib": rec["peak_rss_mib"],
        "serve_baseline_rss_mib": rec["baseline_rss_mib"],
        "serve_index_mib": rec["index_mib"],
        "paper_record_p50_us": rec["record_p50_us"],
        "paper_record_p95_us": rec["record_p95_us"],
        "paper_sampled_universes": paper_cmp["n_universes"],
        "paper_exact_fraction": paper_cmp["exact_fraction"],
        "paper_p50_us": paper_cmp["p50_us"],
        "paper_p95_us": paper_cmp["p95_us"],
        "paper_bm25s_p50_us": paper_cmp["bm25s_p50_us"],
        "paper_bm25s_p95_us": paper_cmp["bm25s_p95_us"],
        "paper_p50_ratio_vs_bm25s": paper_cmp["p50_ratio_vs_bm25s"],
        "paper_p95_ratio_vs_bm25s": paper_cmp["p95_ratio_vs_bm25s"],
        "audit_calls": aud["audit_calls"],
        "audit_mismatches": aud["audit_mismatches"],
        "audit_86k_s": aud["audit_s"],
        "audit_86k_with_build_s": aud["audit_s"] + aud["build_s"],
    }
    assert set(out) == set(PAPER_KEYS)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--instance", default="mini", help="mini, arxiv-sample or a built instance folder")
    parser.add_argument("--quick", action="store_true", help="fewer queries and a 10x smaller paper-scale case")
    parser.add_argument("--queries", type=int, default=None, help="queries per universe (default 20; quick 5)")
    parser.add_argument("--max-universes", type=int, default=None, help="sample this many instance universes")
    parser.add_argument("--no-paper-scale", action="store_true", help="only the instance part (paper keys null)")
    parser.add_argument("--seed", type=int, default=20260101)
    parser.add_argument("--workdir", default=None, help="keep generated data here (default: a temp dir)")
    parser.add_argument("--_worker", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args._worker:
        kind, *rest = args._worker
        if kind == "build":
            out = _worker_build(rest[0])
            out.pop("_engine")
        elif kind == "record":
            out = _worker_record(rest[0], rest[1], int(rest[2]), int(rest[3]))
        else:
            out = _worker_audit(rest[0], rest[1])
        print(json.dumps(out))
        return 0

    n_queries = args.queries or (5 if args.quick else 20)
    scale = 10 if args.quick else 1
    tmp = None
    if args.workdir:
        work = Path(args.workdir)
        work.mkdir(parents=True, exist_ok=True)
    else:
        tmp = tempfile.TemporaryDirectory(prefix="rap-search-bench-")
        work = Path(tmp.name)
    try:
        root = _instance_dir(args.instance, work)
        from rap_benchmark.bm25 import SearchEngine

        SearchEngine.from_dir(root)  # make sure the token cache exists
        _log("instance: fresh-process build from cached tokens ...")
        inst_build = _run_worker("build", str(root))
        _log("instance: exactness and latency vs bm25s / rank_bm25 ...")
        cmp = _compare_instance(root, n_queries, rank_every=4, seed=args.seed, max_universes=args.max_universes)

        paper = _paper_scale(work, scale, n_queries, args.seed, quick=args.quick) if not args.no_paper_scale else {}
    finally:
        if tmp is not None:
            tmp.cleanup()

    result = {
        "instance": args.instance,
        "quick": args.quick,
        **{k: cmp[k] for k in cmp},
        "instance_build_all_universes_s": inst_build["build_s"],
        "instance_serve_rss_mib": inst_build["rss_mib"],
        "instance_universes": inst_build["n_universes"],
        **(paper or dict.fromkeys(PAPER_KEYS)),
        "cpu_count": os.cpu_count(),
    }
    result = {k: (round(v, 4) if isinstance(v, float) else v) for k, v in result.items()}
    _log("")
    _log(f"instance {args.instance}: {result['n_universes']} universes, {result['n_queries']} queries, "
         f"exact {result['exact_fraction']:.4f}")  # fmt: skip
    _log(f"  latency p50/p95 us: ours {result['p50_us']:.1f}/{result['p95_us']:.1f}  "
         f"bm25s {result['bm25s_p50_us']:.1f}/{result['bm25s_p95_us']:.1f}  "
         f"rank_bm25 p50 {result['rank_bm25_p50_us']:.1f}")  # fmt: skip
    _log(f"  ratios: p50 {result['p50_ratio_vs_bm25s']:.3f}x bm25s (target <= 0.5), "
         f"p95 {result['p95_ratio_vs_bm25s']:.3f}x (<= 1.0), p50 {result['p50_ratio_vs_rank_bm25']:.4f}x rank_bm25")  # fmt: skip
    if paper:
        _log_paper(result)
    print(json.dumps(result, sort_keys=True))
    return 0


def _log_paper(result: dict) -> None:
    _log(f"paper scale: {result['paper_papers']:,} papers, {result['paper_memberships']:,} memberships, "
         f"{result['paper_universes']} universes")  # fmt: skip
    _log(f"  build from cached tokens {result['build_all_universes_s']:.2f} s (target <= 10), serving RSS "
         f"{result['serve_rss_mib']:.0f} MiB (<= 1024; peak {result['serve_peak_rss_mib']:.0f})")  # fmt: skip
    _log(f"  audit of {result['audit_calls']:,} calls {result['audit_86k_s']:.2f} s (<= 10; "
         f"{result['audit_86k_with_build_s']:.2f} s with the build), {result['audit_mismatches']} mismatches")  # fmt: skip
    _log(f"  sampled universes vs bm25s: exact {result['paper_exact_fraction']:.4f}, p50 "
         f"{result['paper_p50_ratio_vs_bm25s']:.3f}x, p95 {result['paper_p95_ratio_vs_bm25s']:.3f}x")  # fmt: skip


if __name__ == "__main__":
    raise SystemExit(main())
