"""``rap build``, ``rap verify`` and ``rap info``."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from rap_benchmark.cli.args import add_extra_body_args, extra_body, nonnegative_int, positive_float, positive_int
from rap_benchmark.core import resources
from rap_benchmark.core.errors import InputError, StoppedEarly
from rap_benchmark.core.spec import INSTANCE_NAMES, BenchmarkSpec

ARXIV_ENV = "RAP_SHARED_ARXIV"

BUILD_EPILOG = """examples:
  rap build --instance mini --out build/mini
  rap build --instance arxiv-sample --out build/arxiv-sample           # reads ../shared/data/arxiv
  rap build --instance arxiv-sample --out build/as --source /data/arxiv_parquet_folder
  rap build --spec my-spec.json --source arxiv-metadata-oai-snapshot.json --out build/full

  # the paper's LLM construction (names, programs, two drafts, absorption, revision, union,
  # exact-eight consolidation, batched assignment) through OpenAI-compatible endpoints:
  rap build --spec full.json --source snapshot.jsonl --out build/full --instrument llm \\
      --base-url http://gpu1:8000/v1,http://gpu2:8000/v1 --model Qwen/Qwen3-32B \\
      --draft-models Qwen/Qwen3-32B,meta-llama/Llama-3.3-70B-Instruct --dry-run   # estimate first
  (same command without --dry-run sends; rerunning it resumes from build/full.llm-store)
  # a Qwen3 model thinks unless told not to; its reasoning would eat the short stages' budgets:
  ... --model Qwen/Qwen3-32B --chat-template-kwargs '{"enable_thinking": false}'
  # a refused request (HTTP 4xx) or a stage losing more than 5% stops the build in one line;
  # --fallback offline keeps offline names and low_evidence labels instead (counted in review.md)
  # recipe serving the models with vLLM: examples/vllm_llm_instrument.sh

The arxiv-sample source defaults to $RAP_SHARED_ARXIV, else ../shared/data/arxiv next to the
repository. --source accepts a folder of parquet files, a metadata snapshot (.jsonl/.json, may be
.gz) or an arXiv API Atom feed (.xml/.atom).
"""

VERIFY_EPILOG = """examples:
  rap verify build/mini          # exit 0 when every file matches SHA256SUMS, else 1 naming each file
  rap verify build/mini --expect manifests/mini          # and it is the shipped golden instance
  rap verify build/mini --expect 3f2a...c9 (64 hex)      # and its manifest hash is the card's

Without --expect, verify checks the folder against its own SHA256SUMS only: an edit made to a
file and to its SHA256SUMS line passes. --expect compares with a manifest from elsewhere: a
manifest hash, a SHA256SUMS file or folder, a shipped manifest name (mini, arxiv-sample), or an
exported repo's manifest / card stating manifest_hash.
"""

INFO_EPILOG = """examples:
  rap info build/mini
  rap info build/arxiv-sample --json > info.json
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


LLM_ONLY = (
    "base_url",
    "model",
    "draft_models",
    "max_spend_usd",
    "prices",
    "reasoning_tokens",
    "llm_store",
    "tokenizer",
    "chat_template_kwargs",
    "extra_body",
    "fallback",
    "batch",
    "construction",
)
"""The ``rap build`` options only the LLM instrument reads (``--dry-run`` too)."""


def _llm_instrument(args: argparse.Namespace, spec: BenchmarkSpec) -> object | None:
    """The instrument the flags describe, checked: None (the spec's own: the LLM instrument answered
    from the replies it ships, else the offline one), "offline", or an LLM instrument. With
    ``--instrument llm``, a spec that ships replies gives the model and construction when the
    flags do not, and its replies answer every request they hold."""
    if args.instrument != "llm":
        given = ["--" + o.replace("_", "-") for o in LLM_ONLY if getattr(args, o)]
        if given or args.dry_run:
            flags = ", ".join(given) or "--dry-run"
            raise InputError(f"{flags} need --instrument llm (--base-url, --model and every LLM flag do)")
        return args.instrument
    from rap_benchmark.pipeline.instrument.llm import LLMInstrument, LLMSettings, PipelineConfig

    recorded = LLMInstrument.recorded_for(spec)
    if recorded is not None:
        args.model = args.model or recorded.config.model
        args.draft_models = args.draft_models or ",".join(recorded.config.draft_models)
        args.construction = args.construction or recorded.config.construction
    if not args.model:
        raise InputError("--instrument llm needs --model")
    urls = tuple(u.strip() for u in (args.base_url or "").split(",") if u.strip())
    if urls and args.batch:
        raise InputError("--base-url and --batch are two transports: give one (--batch DIR writes batch files)")
    if not urls and not args.dry_run and not args.batch:
        raise InputError(
            "--instrument llm needs --base-url URL[,URL...] (an OpenAI-compatible endpoint) or --batch DIR "
            "(batch files for vllm run-batch or a provider's Batch API)"
        )
    drafts = tuple(m.strip() for m in (args.draft_models or f"{args.model},{args.model}").split(","))
    if len(drafts) != 2 or not all(drafts):
        raise InputError(f"--draft-models needs two model names A,B, got {args.draft_models!r}")
    if args.tokenizer and not args.dry_run:
        raise InputError("--tokenizer is for --dry-run (a server reports its own token counts)")
    extra = extra_body(args, "the pipeline")
    store = Path(args.llm_store) if args.llm_store else Path(f"{str(args.out).rstrip('/')}.llm-store")
    config = PipelineConfig(
        model=args.model,
        draft_models=drafts,
        assign_batch=args.assign_batch,
        max_attempts=args.max_attempts,
        reasoning_tokens=args.reasoning_tokens,
        extra_body=extra,
        construction=args.construction or "paper",
    )
    settings = LLMSettings(
        base_urls=urls,
        store_dir=store,
        max_in_flight=args.max_in_flight,
        timeout_s=args.timeout_s,
        max_spend_usd=args.max_spend_usd,
        prices_path=args.prices,
        fallback=args.fallback,
        batch_dir=Path(args.batch) if args.batch else None,
        recorded=None if recorded is None else recorded.settings.recorded,
    )
    instrument = LLMInstrument(config, settings)
    instrument.check()
    return instrument


def _dry_run(spec: object, source: Path, instrument: object, quiet: bool, tokenizer: str | None) -> int:
    from rap_benchmark.pipeline.build import normalise_papers
    from rap_benchmark.pipeline.corpus import read_corpus
    from rap_benchmark.pipeline.fields import build_fields
    from rap_benchmark.pipeline.instrument.llm import estimate

    papers, _ = read_corpus(source, spec, progress=not quiet)
    papers = normalise_papers(papers)
    memberships, candidates = build_fields(papers, spec, progress=not quiet)
    table = estimate(
        papers,
        memberships,
        candidates,
        spec,
        instrument.config,
        store_dir=instrument.settings.store_dir,
        prices_path=instrument.settings.prices_path,
        tokenizer=tokenizer,
        recorded=instrument.settings.recorded,
    )
    print(format_estimate(table))
    return 0


def format_estimate(table: dict[str, dict[str, object]], sent: str = "to send") -> str:
    """Requests (to send, or sent) and already stored, tokens and price per stage."""
    lines = [f"{'stage':<16}{'requests':>10}{sent:>10}{'stored':>9}{'prompt tok':>14}{'compl. tok':>13}{'USD':>12}"]
    rounds = table.get("total", {}).get("rounds")
    for stage, row in table.items():
        usd = "unknown" if row["cost_usd"] is None else f"{row['cost_usd']:.2f}"
        lines.append(
            f"{stage:<16}{row['requests']:>10,}{row['sent']:>10,}{row['from_store']:>9,}"
            f"{row['prompt_tokens']:>14,}{row['completion_tokens']:>13,}{usd:>12}"
        )
    if rounds is not None:
        usd = table["total"]["cost_usd"]
        half = "unknown (no price for a model: --prices)" if usd is None else f"${usd / 2:,.2f}"
        lines.append(f"rounds: {rounds} (--batch: one batch file each); at a batch API's half price: {half}")
    lines.append("(dry run: nothing was sent; replies not yet stored are estimated with typical sizes)")
    return "\n".join(lines)


EXPECTED_COST = {
    "mini": "about 15-30 s and under 1 GB of memory",
    "arxiv-sample": "about 2-4 min on 2 idle cores (much longer on a busy machine) and ~4 GB of memory; "
    "--instrument offline: about 5-10 min and ~6 GB",
}
"""What a build of each shipped instance takes on a 2-core machine: arxiv-sample replayed from its
recorded replies took 1 min 59 s at a 3.7 GB peak on 2 cores shared with other work; with the
offline instrument (250k papers)
peaked at 6.2 GB resident; it took 10 min 25 s on 2 cores, and 42 min on 2 cores shared with
about eight other busy processes."""


def expected_cost(name: str, from_source: bool, no_cache: bool) -> str:
    """The line ``rap build`` prints before it starts: how long and how much memory to expect."""
    known = EXPECTED_COST.get(name)
    if known is None:
        return (
            f"building {name}: time and memory grow with the corpus "
            f"(arxiv-sample's 250k papers: {EXPECTED_COST['arxiv-sample']})"
        )
    cached = from_source and not no_cache
    note = "; a rebuild whose instrument fit is cached is quicker" if cached else ""
    return f"building {name}: expect {known}{note}"


def _cmd_build(args: argparse.Namespace) -> int:
    from rap_benchmark.core.artifacts import load_instance
    from rap_benchmark.core.spec import BenchmarkSpec, spec_for
    from rap_benchmark.pipeline.build import build_instance, format_info, instance_info

    spec = BenchmarkSpec.from_json(args.spec) if args.spec else spec_for(args.instance or "mini")
    instance = args.instance or spec.name
    source = args.source
    if source is None and instance == "arxiv-sample":
        source = default_arxiv_source()
        if source is None:
            raise InputError(f"no arXiv sample found; pass --source or set ${ARXIV_ENV}")
    if source is None and instance != "mini":
        raise InputError(f"instance {instance!r} needs --source (only mini is generated)")
    if source is not None and not Path(source).exists():
        raise InputError(
            f"no corpus at {source} (--source: a parquet folder, a snapshot .jsonl/.json(.gz) or an Atom .xml)"
        )
    instrument = _llm_instrument(args, spec)
    if args.instrument == "llm" and source is None:
        raise InputError("--instrument llm needs --source (a corpus to build from)")
    if args.dry_run:
        return _dry_run(spec, Path(source), instrument, args.quiet, args.tokenizer)
    if not args.quiet:
        from rap_benchmark.core.artifacts import check_instance_out

        check_instance_out(args.out)  # a refusal stays one line
        print(expected_cost(spec.name, source is not None, args.no_cache), file=sys.stderr)
    from rap_benchmark.pipeline.instrument.llm.batch import WaitingForReplies

    start = time.perf_counter()
    try:
        out = build_instance(
            spec,
            args.out,
            source=source,
            progress=not args.quiet,
            instrument=instrument,
            freeze_instrument=args.freeze_instrument,
            cache=not args.no_cache,
        )
    except WaitingForReplies as waiting:
        print(f"rap build: {waiting}")
        return waiting.exit_code
    seconds = time.perf_counter() - start
    print(f"built {spec.name} at {out} in {seconds:.1f} s")
    print(format_info(instance_info(load_instance(out))))
    if args.instrument == "llm":
        store = instrument.settings.store_dir
        summary = json.loads((store / "summary.json").read_text(encoding="utf-8"))
        print(format_estimate(summary["stages"], "sent").rsplit("\n", 1)[0])
        print(
            f"retries {sum(v['retries'] for v in summary['stages'].values())}, truncated replies "
            f"{summary['truncated_replies']}, refused requests {summary['refused_requests']}"
        )
        print(f"requests stored in {store}; maintainers' review: {store / 'review.md'}")
    return 0


def _cmd_verify(args: argparse.Namespace) -> int:
    from rap_benchmark.core.sums import SUMS_FILE, verify

    root = Path(args.dir)
    if not root.is_dir():
        from rap_benchmark.core.artifacts import missing_instance  # pandas: only on this path

        raise missing_instance(root)
    expected = None
    if args.expect is not None:
        from rap_benchmark.core.expect import compare, resolve_expected

        expected = resolve_expected(args.expect)  # a bad --expect is refused before any hashing
    problems = verify(root)
    if expected is not None and not any(p.startswith(f"{SUMS_FILE} ") for p in problems):
        problems += compare(root, expected)
    if problems:
        for problem in problems:
            print(f"BAD {problem}")
        print(f"{root}: {len(problems)} problem(s)", file=sys.stderr)
        return 1
    n = len((root / SUMS_FILE).read_text(encoding="utf-8").splitlines())
    print(f"OK {root}: {n} files match {SUMS_FILE}" + (f"; it is {expected.source}" if expected else ""))
    return 0


def _cmd_info(args: argparse.Namespace) -> int:
    from rap_benchmark.core.artifacts import load_instance
    from rap_benchmark.pipeline.build import format_info, instance_info

    inst = load_instance(args.dir)
    info = instance_info(inst)
    print(json.dumps(info, indent=1, sort_keys=True) if args.json else format_info(info))
    if not info["fields"]:
        print(
            f"rap info: {args.dir} has no fields: nothing to forecast or score (its build kept none)", file=sys.stderr
        )
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "build",
        help="build an instance's artifacts (mini, arxiv-sample, or any spec + source)",
        description="Build every artifact of an instance into OUT (replaced atomically).",
        epilog=BUILD_EPILOG,
    )
    p.add_argument("--instance", choices=INSTANCE_NAMES, help="named instance (default: mini)")
    p.add_argument("--out", required=True, help="output folder (replaced when it holds a previous build)")
    p.add_argument("--source", help="corpus: parquet folder, snapshot .jsonl/.json(.gz) or Atom .xml")
    p.add_argument("--spec", help="spec JSON file (overrides the named instance's spec)")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.add_argument(
        "--freeze-instrument",
        action="store_true",
        help="also write the frozen offline instrument (instrument/) so that rap extend can add origins",
    )
    p.add_argument(
        "--no-cache",
        action="store_true",
        help="fit the offline instrument even when one fitted on the same inputs is cached "
        "(cache: $RAP_CACHE_DIR, else ~/.cache/rap_benchmark; RAP_CACHE_DIR=off disables it)",
    )
    g = p.add_argument_group("LLM instrument (--instrument llm)")
    g.add_argument(
        "--instrument",
        choices=["offline", "llm"],
        help="assignment instrument (default: the instance's own: arxiv-sample replays the replies a capable model "
        "wrote for it, recorded in the package; other instances: offline)",
    )
    g.add_argument(
        "--base-url",
        help="OpenAI-compatible endpoint(s), comma-separated: URL (any model) or MODEL=URL (a server of MODEL only)",
    )
    g.add_argument("--model", help="model for naming, programs, consolidation and assignment")
    g.add_argument("--draft-models", help="the two drafting models A,B (default: --model twice)")
    g.add_argument("--llm-store", help="request store folder (default: OUT.llm-store); rerunning resumes from it")
    g.add_argument("--max-in-flight", type=positive_int, default=64, help="open requests per endpoint (default 64)")
    g.add_argument("--assign-batch", type=positive_int, default=8, help="papers per assignment request (default 8)")
    g.add_argument("--max-attempts", type=positive_int, default=3, help="tries per unit before it is recorded invalid")
    g.add_argument("--timeout-s", type=positive_float, default=300.0, help="seconds per request before it is retried")
    g.add_argument(
        "--max-spend-usd", type=positive_float, help="stop cleanly (resumable) before spending more than this"
    )
    g.add_argument("--prices", help="price table JSON (default: the packaged agents price table)")
    add_extra_body_args(g)
    g.add_argument(
        "--reasoning-tokens",
        type=nonnegative_int,
        default=0,
        help="tokens added to every request's budget for a thinking model's reasoning (default 0)",
    )
    g.add_argument(
        "--fallback",
        choices=["offline"],
        help="keep the offline name or a low_evidence label when a request is refused (HTTP 4xx) or a stage loses "
        "more than 5%% of its units; without it such a build fails",
    )
    g.add_argument(
        "--construction",
        choices=["paper", "compact"],
        help="paper: the paper's construction (names, programs, two drafts, absorption, revision, consolidation, "
        "every membership labelled by the model); compact: one request per field drafts and labels a sample, a "
        "second draft for the parallel instrument, every membership labelled by a distilled classifier "
        "(default: paper, or the construction of the replies the instance ships)",
    )
    g.add_argument(
        "--batch",
        metavar="DIR",
        help="batch files instead of --base-url: each round's requests are written to DIR as an OpenAI Batch "
        f"input file and the build exits {StoppedEarly.exit_status} (waiting for replies); put the output files in DIR "
        "and rerun",
    )
    g.add_argument("--dry-run", action="store_true", help="estimate requests, tokens and price per stage; send nothing")
    g.add_argument(
        "--tokenizer", help="with --dry-run: count tokens with this Hugging Face tokenizer (name or local folder)"
    )
    p.set_defaults(func=_cmd_build)

    p = subparsers.add_parser(
        "verify",
        help="check every artifact against SHA256SUMS",
        description="Check every file of an instance against its SHA256SUMS; exit 1 naming each bad file.",
        epilog=VERIFY_EPILOG,
    )
    p.add_argument("dir", help="instance folder")
    p.add_argument(
        "--expect",
        metavar="HASH_OR_MANIFEST",
        default=None,
        help="also require this instance: a manifest hash, a SHA256SUMS file/folder or a shipped manifest name",
    )
    p.set_defaults(func=_cmd_verify)

    p = subparsers.add_parser(
        "info",
        help="figures of a built instance",
        description="Papers, fields, directions per field, blocks, Dev/Test fields and episodes, assignment-type "
        "shares, and papers per episode window (verifies hashes first).",
        epilog=INFO_EPILOG,
    )
    p.add_argument("dir", help="instance folder")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    p.set_defaults(func=_cmd_info)
