"""``rap baselines``, ``rap score`` and ``rap report``: prediction files in, tables and a report out."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from rap_benchmark.cli.args import existing_files, nonnegative_int, prediction_files, scoring_options
from rap_benchmark.cli.args import split_or_all as _split
from rap_benchmark.core.records import Policy, parse_enum

BASELINES_EPILOG = """examples:
  rap baselines build/mini                          -> build/mini_predictions/baselines.jsonl
  rap baselines build/mini --tune-dev --out preds/baselines.parquet

Writes baseline/recent, baseline/ewma, baseline/arima, baseline/holt, baseline/ridge_var and a
seeded baseline/uniform_random, all under condition A0, for every episode (canonical policy).
The chosen parameters (tuned on Dev only with --tune-dev) and the grids go to
baselines_ledger.json next to the predictions; the instance folder is never modified.
"""

SCORE_EPILOG = """examples:
  rap score build/mini build/mini_predictions/baselines.jsonl
  rap score build/mini runs/gpt.jsonl runs/qwen.parquet --split all --json

Each file is validated on its own (problems go to stderr; a bad file never changes another
file's scores), then the leaderboard of the usable rows is printed: field-macro Forecast
Spearman with 95% block-bootstrap intervals (no multiplicity correction). A row is ranked only
when it covers every episode of the split; partial rows are listed apart. A model and condition
already given by an earlier file is refused in a later one. Exit status 1 when any file has
errors (missing episodes are only warnings).

Which to use: rap score compares your own prediction files on your own instance (prints the
table; writes nothing). To check one file plus its .meta.json before you send it to a
leaderboard, use rap submit validate. The maintainers score many submissions on the held-out
targets into a board folder with rap leaderboard score.
"""

REPORT_EPILOG = """examples:
  rap report build/mini build/mini_predictions/baselines.jsonl --out report/
  rap report build/mini runs/*.jsonl --out report/ --registry models.json --resamples 10000

Writes report/report.html (self-contained: open it in any browser, offline), report/tables.md,
one CSV and markdown file per table, leaderboard.png and a few field_<id>.png figures.
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "baselines", help="write the statistical baselines as a prediction file", epilog=BASELINES_EPILOG
    )
    p.add_argument("dir", type=Path, help="a built instance folder")
    p.add_argument("--out", type=Path, default=None, help="prediction file (.jsonl or .parquet)")
    p.add_argument("--tune-dev", action="store_true", help="tune ARIMA/Holt/ridge-VAR parameters on Dev episodes")
    p.add_argument(
        "--random-seed", type=nonnegative_int, default=None, help="seed of baseline/uniform_random (default: spec seed)"
    )
    p.set_defaults(func=cmd_baselines)

    p = subparsers.add_parser(
        "score",
        help="score your prediction files on an instance and print the table (submissions: rap submit validate)",
        epilog=SCORE_EPILOG,
    )
    p.add_argument("dir", type=Path, help="a built instance folder")
    p.add_argument("predictions", type=Path, nargs="+", help="prediction files (.jsonl or .parquet)")
    p.add_argument(
        "--policy",
        default=Policy.CANONICAL.value,
        choices=[p.value for p in Policy],
        help="counting policy of the targets: where a boundary paper's unit goes; canonical: its primary; "
        "split_boundary: half to each of its two directions; single_only: boundary and bridge papers not counted; "
        "secondary: its secondary (default: %(default)s)",
    )
    p.add_argument("--json", action="store_true", help="print the leaderboard and problems as JSON")
    scoring_options(p)
    p.set_defaults(func=cmd_score)

    p = subparsers.add_parser(
        "report", help="write tables, plots and a self-contained HTML report", epilog=REPORT_EPILOG
    )
    p.add_argument("dir", type=Path, help="a built instance folder")
    p.add_argument("predictions", type=Path, nargs="+", help="prediction files (.jsonl or .parquet)")
    p.add_argument("--out", type=Path, required=True, help="report folder")
    p.add_argument("--registry", type=Path, default=None, help="model registry (knowledge cutoffs) for exposure strata")
    p.add_argument("--no-baselines", action="store_true", help="do not add in-memory baselines when none are given")
    p.add_argument("--fields", type=nonnegative_int, default=3, help="how many fields to plot over time (default 3)")
    p.add_argument("--audit", action="store_true", help="add the instrument-audit table (parallel instrument)")
    scoring_options(p)
    p.set_defaults(func=cmd_report)


def cmd_baselines(args: argparse.Namespace) -> int:
    from rap_benchmark.core.artifacts import load_instance, write_json
    from rap_benchmark.evaluation.predictions import write_predictions
    from rap_benchmark.evaluation.scoring import baseline_predictions

    inst = load_instance(args.dir)
    out = args.out or args.dir.resolve().parent / f"{args.dir.resolve().name}_predictions" / "baselines.jsonl"
    frame, ledger = baseline_predictions(inst, tune_dev=args.tune_dev, seed=args.random_seed)
    write_predictions(frame, out)
    ledger_path = out.parent / "baselines_ledger.json"
    write_json(ledger_path, ledger)
    params = ", ".join(f"{k}={v}" for k, v in ledger["parameters"].items())
    print(f"wrote {len(frame)} rows ({frame['model'].nunique()} baselines) to {out}", file=sys.stderr)
    print(f"parameters ({'tuned on Dev' if args.tune_dev else 'spec defaults'}): {params}", file=sys.stderr)
    print(f"ledger: {ledger_path}", file=sys.stderr)
    print(out)
    return 0


def cmd_score(args: argparse.Namespace) -> int:
    from rap_benchmark.api import score
    from rap_benchmark.core.artifacts import load_instance
    from rap_benchmark.evaluation.report.tables import NO_MULTIPLICITY, leaderboard_markdown, state_markdown

    prediction_files(args.predictions)
    inst = load_instance(args.dir)
    result = score(
        inst,
        args.predictions,
        split=_split(args.split),
        policy=parse_enum(Policy, args.policy),
        n_resamples=args.resamples,
        seed=args.seed,
    )
    for line in result.problems:
        print(line, file=sys.stderr)
    board = result.leaderboard
    state = result.state if result.state is not None and len(result.state) else None
    if args.json:
        payload = {
            "manifest_hash": inst.manifest_hash,
            "policy": args.policy,
            "split": args.split,
            "leaderboard": json.loads(board.to_json(orient="records")),
            "state": [] if state is None else json.loads(state.to_json(orient="records")),
            "problems": list(result.problems),
        }
        print(json.dumps(payload, indent=1))
        return 0 if result.ok else 1
    if board.empty and state is None:
        print("rap score: nothing to score", file=sys.stderr)
        return 1
    if board.empty:
        print("no Forecast conditions (A0, A1, A3) in the files: the leaderboard ranks only those")
    else:
        ranked, partial = board[board["rank"].notna()], board[board["rank"].isna()]
        print(
            f"{inst.spec.name} ({args.split}, policy {args.policy}): field-macro Forecast Spearman, 95% block bootstrap"
        )
        if len(ranked):
            print(leaderboard_markdown(ranked), end="")
        if len(partial):
            print("\nNot ranked: these cover only part of the split's episodes (a row needs every one of them):")
            for r in partial.itertuples(index=False):
                print(f"  {r.model} / {r.condition}: {r.coverage} episodes")
            print(leaderboard_markdown(partial), end="")
    if state is not None:
        print(
            "\nState conditions (A2, A4; not ranked with Forecast): field-macro Spearman against x "
            "(state_fidelity) and against y (state_as_forecast), 95% block bootstrap"
        )
        print(state_markdown(state), end="")
    print(NO_MULTIPLICITY)
    return 0 if result.ok else 1


def cmd_report(args: argparse.Namespace) -> int:
    from rap_benchmark.core.artifacts import load_instance
    from rap_benchmark.evaluation.report import build_report

    prediction_files(args.predictions)
    if args.registry is not None:
        existing_files([args.registry], "model registry")
    inst = load_instance(args.dir)
    result = build_report(
        inst,
        args.predictions,
        args.out,
        registry=args.registry,
        split=_split(args.split),
        n_resamples=args.resamples,
        seed=args.seed,
        n_fields_plotted=args.fields,
        add_baselines=not args.no_baselines,
        audit=args.audit,
        progress=True,
    )
    for line in result.problems:
        print(line, file=sys.stderr)
    print(f"wrote {len(result.files)} files to {result.out_dir}", file=sys.stderr)
    print(result.html)
    return 0
