"""``rap citecast``: build, serve, sweep, leak-probe and run the CiteCast environment."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from pathlib import Path
from typing import Any

from rap_benchmark.cli.args import nonnegative_int, positive_float, positive_int, subcommands, tcp_port
from rap_benchmark.cli.run import _add_backend_args, _backend, all_failed, run_summary
from rap_benchmark.core.errors import InputError, ServiceError
from rap_benchmark.core.fsio import atomic_write_text

RUN_EPILOG = """examples:
  # the constant policy (search the title, fetch the top hit, submit 3): no model needed
  rap citecast run build/citecast --split test --backend constant --constant 3 --out runs/const3

  # any OpenAI-compatible server; several endpoints round-robin, retries with backoff
  rap citecast run build/citecast --backend openai --model Qwen/Qwen3-4B \\
      --base-url http://node1:8000/v1,http://node2:8000/v1 --concurrency 16 --out runs/qwen

  # against a running server (evaluation mode: the reward is not returned; rap citecast score reads it)
  rap citecast run build/citecast --url http://127.0.0.1:8765 --api-key s3cret-a-key \\
      --backend openai --model gpt-4o-mini --base-url https://api.openai.com/v1 --out runs/eval

  # split over 4 machines, then merge
  rap citecast run build/citecast ... --shard 2/4 --out runs/qwen-s2
  rap runs merge runs/qwen runs/qwen-s0 runs/qwen-s1 runs/qwen-s2 runs/qwen-s3

The run folder is the agent runner's (units/, executions.jsonl, run.json, predictions.jsonl): a rerun
with the same --out resumes, skipping tasks already submitted. A model endpoint that stops answering
stops the run as it stops rap run (--give-up-after-units, --give-up-after-s; exit 75; the finished
tasks are kept in predictions.jsonl, and its one line ends with the command that resumes it).
"""

EPILOG = """examples:
  rap citecast build --instance embedded --out build/citecast
  rap citecast build --instance embedded --out build/citecast --arxiv-source ../shared/data/arxiv
  rap citecast build --instance harvest --out build/citecast-full --corpus crawl/*.warc.gz news.jsonl
  rap citecast serve build/citecast --port 8765 --workers 4   # training mode, train split, loopback
  CITECAST_API_KEYS=teamA:s3cret-a-key rap citecast serve build/citecast --mode evaluation \
      --store build/eval-sessions.sqlite3                     # Test split, no reward returned
  rap citecast serve build/citecast --store redis://10.0.0.5:6379/0 --host 0.0.0.0   # N machines, one Redis
  rap citecast score build/citecast --store build/eval-sessions.sqlite3 --out runs/eval_scores.jsonl
  rap citecast sweep build/citecast --out runs/citecast-sweep
  rap citecast leak-probe build/citecast --n 25 --out runs/leak_probe.jsonl
  rap citecast leak-probe build/citecast --url http://127.0.0.1:8765
  rap citecast run build/citecast --split test --backend constant --constant 3 --out runs/const3
  rap citecast run build/citecast --split test --backend openai --model gpt-4o-mini \\
      --base-url http://127.0.0.1:8000/v1 --out runs/agent      # resumable; --shard i/n like rap run

The embedded instance needs no network: generated January 2026 papers with targets from a
documented model (see citecast.json -> provenance.target_model) and a generated crawl-dated corpus
(plus real arXiv papers from --arxiv-source when given). `harvest` queries the arXiv API and the
Semantic Scholar batch API (network). The tools' cutoff (2026-01-31) is fixed by the server.
"""

INSTANCE_HELP = "a CiteCast instance folder (rap citecast build --out)"
API_KEY_ENV = "CITECAST_API_KEY"
API_KEY_HELP = f"--url: the environment's API key (evaluation mode; default: ${API_KEY_ENV})"


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "citecast",
        help="the CiteCast citation-forecasting environment (build, serve, sweep, leak-probe, run)",
        description="CiteCast: forecast Semantic Scholar citations of January 2026 arXiv papers with backdated tools.",
        epilog=EPILOG,
    )
    sub = subcommands(p, "citecast_command", required=False)

    b = sub("build", help="build an instance folder")
    b.add_argument(
        "--instance",
        choices=["embedded", "harvest"],
        default="embedded",
        help="embedded: generated papers, targets and crawl, no network; harvest: real papers and citations "
        "from the arXiv and Semantic Scholar APIs (network) with a crawl from --corpus (default: %(default)s)",
    )
    b.add_argument("--out", required=True, type=Path, help="output folder")
    b.add_argument(
        "--arxiv-source", type=Path, default=None, help="embedded: real arXiv sample folder for the arxiv sub-corpus"
    )
    b.add_argument("--seed", type=nonnegative_int, default=None, help="embedded: generator seed")
    b.add_argument("--n-tasks", type=positive_int, default=None, help="total tasks (train + test)")
    b.add_argument("--corpus", nargs="*", default=[], help="harvest: corpus files (.jsonl, .warc, .warc.gz)")
    b.add_argument("--s2-api-key", default=None, help="harvest: Semantic Scholar API key (optional)")
    b.set_defaults(func=_build)

    s = sub("serve", help="serve an instance over HTTP (worker processes sharing one mapped index and session store)")
    s.add_argument("instance_dir", type=Path, help=INSTANCE_HELP)
    s.add_argument("--host", default="127.0.0.1", help="bind address (default loopback)")
    s.add_argument("--port", type=tcp_port, default=8765, help="port (0: any free port, printed at start)")
    s.add_argument("--workers", type=positive_int, default=None, help="worker processes (default: the number of CPUs)")
    s.add_argument(
        "--mode",
        choices=["training", "evaluation"],
        default="training",
        help="training: train split, reward returned at submit; evaluation: Test split, no reward returned, "
        "one scored session per task and API key, results via `rap citecast score`",
    )
    s.add_argument(
        "--store",
        default=None,
        help="session store: a SQLite file (default <instance>/.cache/sessions.sqlite3) or redis://host:port/db",
    )
    s.add_argument(
        "--api-keys",
        type=Path,
        default=None,
        help="file of name:secret lines (default: $CITECAST_API_KEYS, comma-separated); required in evaluation mode",
    )
    s.add_argument("--session-ttl-s", type=positive_float, default=3600.0, help="idle seconds before a session expires")
    s.set_defaults(func=_serve)

    sc = sub("score", help="score the evaluation-mode sessions recorded in a session store")
    sc.add_argument("instance_dir", type=Path, help=INSTANCE_HELP)
    sc.add_argument("--store", default=None, help="the server's --store (default <instance>/.cache/sessions.sqlite3)")
    sc.add_argument("--key", default=None, help="only this API key name")
    sc.add_argument("--out", type=Path, default=None, help="JSONL of per-task rows (key, task, prediction, reward)")
    sc.set_defaults(func=_score)

    w = sub("sweep", help="baselines with per-task rewards (blind constant, per-category, band oracle)")
    w.add_argument("instance_dir", type=Path, help=INSTANCE_HELP)
    w.add_argument("--out", type=Path, required=True, help="folder for sweep_rewards.{jsonl,csv}, sweep_summary.csv")
    w.set_defaults(func=_sweep)

    lp = sub("leak-probe", help="backdated searches/fetches for the most-cited tasks, scanned for figures")
    lp.add_argument("instance_dir", type=Path, help=INSTANCE_HELP)
    lp.add_argument("--n", type=positive_int, default=25, help="most-cited tasks to probe (default 25)")
    lp.add_argument("--url", default=None, help="probe a running server instead of an in-process environment")
    lp.add_argument("--api-key", default=None, help=API_KEY_HELP)
    lp.add_argument("--out", type=Path, default=None, help="JSONL of per-task rows")
    lp.set_defaults(func=_leak_probe)

    r = sub(
        "run",
        epilog=RUN_EPILOG,
        help="run a model or the constant policy on a split (resumable run folder, like rap run)",
        description="Run CiteCast tasks through the agent runner into a resumable run folder and write "
        "predictions.jsonl (one row per task: prediction, reward, validity, tokens, cost).",
    )
    r.add_argument("instance_dir", type=Path, help=INSTANCE_HELP)
    r.add_argument("--out", type=Path, required=True, help="run folder (created; reused to resume)")
    r.add_argument("--split", choices=["train", "test"], default="test", help="the tasks to run (default: %(default)s)")
    _add_backend_args(r, ("constant", "openai", "transformers"))
    r.add_argument("--constant", type=nonnegative_int, default=3, help="constant: the submitted forecast (default 3)")
    r.add_argument("--url", default=None, help="use a running server instead of an in-process environment")
    r.add_argument("--api-key", default=None, help=API_KEY_HELP)
    r.add_argument("--limit", type=positive_int, default=None, help="first N tasks of the split only")
    r.add_argument("--shard", help="i/n: run only the tasks whose key hashes to shard i of n")
    r.add_argument("--max-tool-calls", type=positive_int, default=None, help="web calls per task (default 8)")
    r.add_argument("--max-tokens", type=positive_int, default=None, help="completion cap per turn (default 1024)")
    r.add_argument("--prices", help="price table JSON (default: the packaged rap_benchmark/data/prices.json)")
    r.add_argument("--no-progress", action="store_true", help="no progress bar")
    r.add_argument(
        "--json", action="store_true", help="print the run's tallies and reward as one JSON object instead of a summary"
    )
    r.set_defaults(func=_run)
    p.set_defaults(func=lambda _a: (p.print_help(), 2)[1])


def _build(args: argparse.Namespace) -> int:
    from rap_benchmark.citecast.instance import check_out

    check_out(args.out)  # refused before the generator or the network
    if args.instance == "embedded":
        from rap_benchmark.citecast.embedded import EmbeddedConfig, build_embedded

        changes = {k: v for k, v in (("seed", args.seed), ("n_tasks", args.n_tasks)) if v is not None}
        cfg = dataclasses.replace(EmbeddedConfig(), **changes)
        out = build_embedded(args.out, cfg, arxiv_source=args.arxiv_source, progress=True)
    else:
        from rap_benchmark.citecast.build import build_from_harvest
        from rap_benchmark.citecast.harvest import httpx_fetch

        kw = {"n_total": args.n_tasks} if args.n_tasks else {}
        out = build_from_harvest(
            args.out, args.corpus, fetch=httpx_fetch(), s2_api_key=args.s2_api_key, progress=True, **kw
        )
    manifest = json.loads((Path(out) / "citecast.json").read_text(encoding="utf-8"))
    print(f"built {out}: {manifest['n_tasks']} tasks, {manifest['corpus']['n_documents']} crawls")
    return 0


def _serve(args: argparse.Namespace) -> int:
    from rap_benchmark.citecast.env import Mode
    from rap_benchmark.citecast.serving import ServeConfig, parse_api_keys, serve

    mode = Mode(args.mode)
    if args.api_keys is not None:
        keys = parse_api_keys(args.api_keys.read_text(encoding="utf-8"), str(args.api_keys))
    else:
        keys = parse_api_keys(os.environ.get("CITECAST_API_KEYS", ""), "$CITECAST_API_KEYS")
    if mode is Mode.EVALUATION and not keys:
        raise InputError("evaluation mode needs API keys (--api-keys FILE or $CITECAST_API_KEYS)")
    if args.host not in ("127.0.0.1", "localhost", "::1"):
        print(f"warning: serving on {args.host}, not loopback", file=sys.stderr)
    cfg = ServeConfig(
        args.instance_dir,
        host=args.host,
        port=args.port,
        workers=args.workers or os.cpu_count() or 1,
        store=args.store,
        mode=mode,
        api_keys=keys,
        session_ttl_s=args.session_ttl_s,
    )
    return serve(cfg)


def _score(args: argparse.Namespace) -> int:
    from rap_benchmark.citecast.instance import load_instance
    from rap_benchmark.citecast.scoring import score_results
    from rap_benchmark.citecast.serving import default_store
    from rap_benchmark.citecast.stores import open_store

    inst = load_instance(args.instance_dir)
    store_url = args.store or default_store(args.instance_dir)
    if "://" not in store_url and not Path(store_url).is_file():
        raise FileNotFoundError(2, "no session store", store_url)
    report = score_results(inst.tasks, open_store(store_url).results(), key=args.key)
    if args.out:
        atomic_write_text(args.out, "".join(json.dumps(r, sort_keys=True) + "\n" for r in report.rows))
    print(report.table())
    print(json.dumps(report.summary, sort_keys=True))
    return 0


def _sweep(args: argparse.Namespace) -> int:
    from rap_benchmark.citecast.baselines import sweep, write_sweep
    from rap_benchmark.citecast.instance import load_instance

    inst = load_instance(args.instance_dir)
    result = sweep(list(inst.tasks.values()))
    write_sweep(result, args.out)
    print(result.table())
    print(f"fitted: {json.dumps(result.fitted, sort_keys=True)}")
    return 0


def _client(args: argparse.Namespace):
    from rap_benchmark.citecast.client import InProcessClient
    from rap_benchmark.citecast.env import CiteCastEnv

    if args.url:
        return _server(args.url, args.api_key)
    env = CiteCastEnv.from_instance(args.instance_dir)
    env.warm()
    return InProcessClient(env)


def _server(url: str, api_key: str | None):
    """A client of the CiteCast server at ``url`` with its API key (``api_key``, else
    ``$CITECAST_API_KEY``; an evaluation-mode server needs one), checked with one request before
    anything is written: an unreachable server or a refused key is one line, not a traceback."""
    import httpx

    from rap_benchmark.citecast.client import HttpClient
    from rap_benchmark.citecast.errors import EnvError, Unauthorized

    key = api_key or os.environ.get(API_KEY_ENV) or None
    try:
        client = HttpClient(url, api_key=key)
        client.task_ids()
    except httpx.InvalidURL as exc:
        raise InputError(f"--url {url!r} is not a URL ({exc})") from exc
    except httpx.TransportError as exc:
        raise ServiceError(f"cannot reach the CiteCast server at {url} ({exc})") from exc
    except Unauthorized as exc:
        given = "the --api-key" if api_key else f"${API_KEY_ENV}" if key else "a request without a key"
        raise ServiceError(f"{url} refused {given}: {exc} (give --api-key or set ${API_KEY_ENV})") from exc
    except (EnvError, ValueError, KeyError, TypeError) as exc:  # it answered, but not as a CiteCast server does
        raise ServiceError(f"{url} is not a CiteCast server ({type(exc).__name__}: {exc})") from exc
    return client


def _leak_probe(args: argparse.Namespace) -> int:
    from rap_benchmark.citecast.instance import load_instance
    from rap_benchmark.citecast.leak_probe import run_leak_probe, summarise

    inst = load_instance(args.instance_dir)
    rows = run_leak_probe(_client(args), list(inst.tasks.values()), args.n, progress=True)
    if args.out:
        atomic_write_text(args.out, "".join(json.dumps(r.to_dict(), sort_keys=True) + "\n" for r in rows))
    print(f"{'arxiv_id':<12}{'target':>8}{'band':>8}{'band_lo':>8}{'max_any':>9}{'max_about':>10}  leak")
    for r in rows:
        print(
            f"{r.arxiv_id:<12}{r.target:>8}{r.band:>8}{r.band_lo:>8}{str(r.max_figure_any):>9}"
            f"{str(r.max_figure_about):>10}  {'LEAK' if r.leak else 'no'}"
        )
    print(json.dumps(summarise(rows), sort_keys=True))
    return 1 if any(r.leak for r in rows) else 0


def _run(args: argparse.Namespace) -> int:
    from rap_benchmark.agents import citecast as cc
    from rap_benchmark.agents.store import RunStore, parse_shard
    from rap_benchmark.core.sums import manifest_hash
    from rap_benchmark.llmclient.pricing import load_prices

    shard = parse_shard(args.shard)
    prices = load_prices(args.prices)
    server = _server(args.url, args.api_key) if args.url else None  # a dead --url is said before a model loads
    backend, model = _backend(args)  # its option checks come before the local environment is built
    client = server or _client(args)
    instance = args.url or manifest_hash(args.instance_dir)
    stats, path = cc.run_citecast(
        client,
        backend,
        args.out,
        model=model,
        split=args.split,
        instance=instance,
        limit=args.limit,
        shard=shard,
        concurrency=args.concurrency,
        max_tokens=args.max_tokens or cc.DEFAULT_MAX_TOKENS,
        max_tool_calls=args.max_tool_calls or cc.DEFAULT_MAX_TOOL_CALLS,
        backend_name=args.backend,
        prices=prices,
        progress=not args.no_progress,
    )
    summary = cc.summary(cc.predictions_rows(RunStore(args.out), model))
    if args.json:
        print(json.dumps({"predictions": str(path), **summary, **stats.to_dict()}, sort_keys=True))
    else:
        print(run_summary(stats, path, _next_step(args, summary), [_reward_line(summary)]))
    return all_failed(stats, "rap citecast run")


def _reward_line(summary: dict[str, Any]) -> str:
    """The run's CiteCast reward in words (a task without a valid submission scores 0)."""
    if summary["mean_reward"] != summary["mean_reward"]:  # NaN: no reward came back
        return "reward: not returned (an evaluation-mode server keeps it until its operator scores the sessions)"
    return (
        f"reward: mean {summary['mean_reward']:.4f} over {summary['tasks']} tasks "
        f"({summary['submitted']} submitted; a task without a valid submission scores 0)"
    )


def _next_step(args: argparse.Namespace, summary: dict[str, Any]) -> str:
    """What to do with a finished CiteCast run: the server's operator scores an evaluation-mode
    run; any other is compared with the baselines' rewards on the same instance."""
    if summary["mean_reward"] != summary["mean_reward"]:
        return f"the server's operator scores it: rap citecast score {args.instance_dir} --store STORE --key KEY"
    return f"rap citecast sweep {args.instance_dir} --out {args.out}-sweep   # the baselines' reward, to compare"
