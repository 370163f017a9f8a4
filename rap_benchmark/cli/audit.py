"""``rap audit``: checks of the benchmark's two instruments against an independent reference.

The assignment instrument: parallel-instrument agreement, truth agreement (mini) and the human
audit (sample, analyse). The Search instrument: recorded calls replayed against the index
(search) and a run's traces replayed natively and under the recent window (traces). Agent
diagnostics that measure the agent rather than check the instrument are under ``rap diagnose``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from rap_benchmark.cli.args import nonnegative_int, positive_int, run_folder, subcommands
from rap_benchmark.cli.run import print_json
from rap_benchmark.core.errors import ArtifactError, FileFormatError, InputError
from rap_benchmark.core.fsio import atomic_write_text

EPILOG = """examples:
  rap audit parallel build/mini --out audit/parallel.csv
  rap audit truth build/mini
  rap audit sample build/mini --out audit/sheet --fields 6 --per-cell 2
  rap audit analyse build/mini audit/sheet/key.private.csv annotations.csv --ratings ratings.csv
  rap audit analyse build/mini audit/sheet/key.private.csv a.csv b.csv --ratings ra.csv --ratings rb.csv
  rap audit search build/mini runs/ref                # every Search call recorded in a run folder
  rap audit search build/mini runs/calls.jsonl
  rap audit traces build/mini runs/qwen --out runs/qwen/trace_audit.csv

The assignment instrument: parallel re-assigns every paper with a second offline instrument and
reports cross-fit agreement; truth (mini only) compares the frozen instrument with the
generator's latent directions; sample and analyse run the human audit. The Search instrument:
search re-executes recorded calls (JSON lines: field_id, origin, regime, query, start, end,
result_ids, total_hits, or every call in a run folder) and exits 1 when any call's ids, order or
total differ; traces does the same for a run and also reports, per unit, what the calls saw
natively and what the recent window would have shown (JSON summary; --out writes the table).
Agent diagnostics (replay, oracle input, trace statistics) are rap diagnose.
"""


INSTANCE_HELP = "a built instance folder (rap build --out)"
RESAMPLES_HELP = "field-resampled bootstrap draws for the 95%% intervals (default: %(default)s)"


def estimate_text(est: Any, *, signed: bool = False) -> str:
    """``0.803 [0.790, 0.815]`` (``signed``, for a change: ``-0.004 [-0.024, +0.014]``), written by the
    report's ``fmt_interval``; ``undefined`` when the estimate is missing (no item to estimate it on)."""
    from rap_benchmark.evaluation.report.tables import fmt_interval

    return fmt_interval(est.estimate, est.lo, est.hi, signed=signed) or "undefined"


def _print_estimates(estimates: dict, n_of: str = "") -> dict[str, dict]:
    """One line per estimate (value, 95% interval, n); returns them as plain dicts for --json."""
    for name, est in estimates.items():
        print(f"  {name:34s} {estimate_text(est)}  (n={est.n}{n_of})")
    return {name: vars(est) for name, est in estimates.items()}


def _parallel(args: argparse.Namespace) -> int:
    from rap_benchmark.audit.parallel import parallel_agreement, parallel_instrument
    from rap_benchmark.core.artifacts import load_instance

    inst = load_instance(args.dir)
    cutoff = inst.spec.codebook_cutoff
    second, what = parallel_instrument(inst, seed=args.seed)
    table, summary = parallel_agreement(
        inst.papers, inst.assignments, second, cutoff, n_resamples=args.resamples, seed=args.seed
    )
    if args.out:
        atomic_write_text(args.out, table.to_csv(index=False))
    print(f"parallel-instrument agreement over {len(table)} fields (cross-fit Hungarian, field-resampled 95% CI)")
    print(f"  second instrument: {what}")
    if "model_labels" in inst.extras:
        from rap_benchmark.audit.parallel import model_label_agreement

        shared, drafts = model_label_agreement(inst.extras["model_labels"], n_resamples=args.resamples, seed=args.seed)
        print(
            f"  the two drafts as the model applied them ({int(shared['n_shared'].sum()):,} papers it labelled under "
            f"both, {len(shared)} fields): {estimate_text(drafts)}"
        )
    for name in ("overall", "pre", "post", "change"):
        label = {"pre": f"before {cutoff}", "post": f"from {cutoff}", "change": "paired change (post - pre)"}.get(
            name, "overall out of sample"
        )
        print(f"  {label:32s} {estimate_text(summary[name], signed=name == 'change')}")
    from rap_benchmark.evaluation.scoring import reliability

    rel = reliability(inst, progress=False)
    per_origin = rel.episodes.groupby("origin", sort=True)["r_full"].mean()
    print("target split-half repeatability (Spearman-Brown) by origin:")
    for origin, value in per_origin.items():
        print(f"  {origin}  {value:.3f}")
    return 0


def _truth(args: argparse.Namespace) -> int:
    from rap_benchmark.audit.parallel import truth_agreement
    from rap_benchmark.core.artifacts import load_instance

    inst = load_instance(args.dir)
    if "truth" not in inst.extras:
        raise InputError("this instance has no latent truth (only the generated mini instance does)")
    table = truth_agreement(inst.assignments, inst.extras["truth"])
    print(table.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    print(f"macro exact match with the latent direction: {table['exact'].mean():.3f}")
    return 0


def _sample(args: argparse.Namespace) -> int:
    import numpy as np

    from rap_benchmark.audit.human import design_sample, save_sample
    from rap_benchmark.core.artifacts import load_instance

    if args.per_cell == args.population == args.retrieved == 0:
        raise InputError("--per-cell, --population and --retrieved are all 0: nothing to draw")
    inst = load_instance(args.dir)
    rng = np.random.default_rng(args.seed)
    fields = sorted(rng.choice(inst.field_ids, size=min(args.fields, len(inst.field_ids)), replace=False).tolist())
    retrieve = None
    if args.retrieved > 0:
        from rap_benchmark.bm25 import SearchEngine

        engine = SearchEngine.from_instance(inst)
        last = inst.spec.origins[-1]

        def retrieve(field_id: str, query: str) -> list[str]:
            obs = engine.search(field_id, last, "expanding", query)
            return [h.arxiv_id for h in obs.hits]

    sample = design_sample(
        inst.papers,
        inst.assignments,
        inst.codebooks,
        fields,
        inst.spec.codebook_cutoff,
        per_cell=args.per_cell,
        population=args.population,
        retrieved=args.retrieved,
        retrieve=retrieve,
        seed=args.seed,
    )
    if sample.sheet.empty:
        raise InputError(
            f"no paper to draw from {len(fields)} field(s) with --per-cell {args.per_cell}, "
            f"--population {args.population}, --retrieved {args.retrieved}; nothing written"
        )
    paths = save_sample(sample, args.out)
    print(f"{len(sample.sheet)} items from {len(fields)} fields")
    for k, v in paths.items():
        print(f"  {k}: {v}")
    print("give the annotator sheet.csv or sheet.html only; keep key.private.csv away from them")
    return 0


def _analyse(args: argparse.Namespace) -> int:
    import pandas as pd

    from rap_benchmark.audit.align import direction_index
    from rap_benchmark.audit.human import ANSWER_COLUMNS, KEY_COLUMNS, analyse, corpus_cell_shares, tv_permutation_test
    from rap_benchmark.audit.readability import rating_shares, read_ratings, reader_agreement
    from rap_benchmark.core.artifacts import load_instance

    def read_csv(path: str, needed: tuple[str, ...] = ()):
        try:
            table = pd.read_csv(path, dtype=str, keep_default_na=False)
        except (ValueError, UnicodeDecodeError) as exc:  # pandas' parser and empty-data errors are ValueErrors
            raise FileFormatError(path, f"not a readable CSV ({exc})") from exc
        missing = [c for c in needed if c not in table.columns]
        if missing:
            raise FileFormatError(path, f"missing column(s) {', '.join(missing)} (expected {', '.join(needed)})")
        return table

    if len(args.answers) > 2:
        raise InputError(f"at most two readers' answers, not {len(args.answers)}")
    if len(args.ratings or []) > 2:
        raise InputError(f"at most two readers' --ratings, not {len(args.ratings)}")
    key = read_csv(args.key, tuple(KEY_COLUMNS)).replace({"": None})
    readers = []
    for path in args.answers:
        answers = read_csv(path, ("item_id", *ANSWER_COLUMNS))
        unknown = sorted(set(answers["item_id"]) - set(key["item_id"]))
        if unknown:
            raise InputError(f"{path}: {len(unknown)} answered items are not in the key (e.g. {unknown[:3]})")
        readers.append(answers)
    ratings = []
    for path in args.ratings or []:
        try:
            ratings.append(read_ratings(read_csv(path)))
        except ValueError as exc:
            raise FileFormatError(path, str(exc)) from exc
    inst = load_instance(args.dir)
    for path, table in zip(args.ratings or [], ratings, strict=True):
        known = {(cb.field_id, d.key) for cb in inst.codebooks.values() for d in cb.directions}
        stray = [f"{f} {k}" for f, k in zip(table["field_id"], table["key"], strict=True) if (f, k) not in known]
        if stray:
            raise InputError(f"{path}: {len(stray)} rated directions are not in {args.dir} (e.g. {stray[0]})")
    pi = corpus_cell_shares(inst.assignments, inst.spec.codebook_cutoff)
    out: dict[str, object] = {}
    for r, answers in enumerate(readers):
        res = analyse(key, answers, pi, n_resamples=args.resamples, seed=args.seed)
        if len(readers) > 1:
            print(f"reader {r + 1} ({args.answers[r]}):")
        block: dict[str, object] = _print_estimates(res)
        merged = key.merge(answers, on="item_id", suffixes=("_frozen", "_annotator"))
        a = direction_index(merged["primary_frozen"].to_numpy())
        b = direction_index(merged["primary_annotator"].to_numpy())
        both = (a >= 0) & (b >= 0)
        if both.sum() > 0:
            perm = tv_permutation_test(a[both], b[both], n_permutations=args.permutations, seed=args.seed)
            print(
                f"  TV(instrument, annotator marginals) = {perm.tv:.3f}, exchangeable-disagreement p = "
                f"{perm.p_value:.3f} (null 95th percentile {perm.null_q95:.3f}, {perm.n_items} paired items)"
            )
            block["tv_permutation"] = vars(perm)
        if len(readers) == 1:
            out.update(block)
        else:
            out[f"reader_{r + 1}"] = block
    if len(readers) == 2:
        agree = reader_agreement(key, readers[0], readers[1], n_resamples=args.resamples, seed=args.seed)
        print("reader against reader:")
        out["readers"] = _print_estimates(agree)
    if ratings:
        shares = rating_shares(ratings, n_resamples=args.resamples, seed=args.seed)
        print(f"directions rated ({len(ratings)} reader{'s' if len(ratings) > 1 else ''}):")
        out["direction_ratings"] = _print_estimates(shares, " directions")
    if args.json:
        print(json.dumps(out, sort_keys=True, default=float))
    return 0


def _search(args: argparse.Namespace) -> int:
    from rap_benchmark.bm25 import SearchEngine
    from rap_benchmark.bm25.audit import audit_calls
    from rap_benchmark.core.artifacts import load_instance

    inst = load_instance(args.dir)
    calls = _recorded_calls(Path(args.calls), inst.manifest_hash)
    engine = SearchEngine.from_instance(inst, backend=args.backend, progress=sys.stderr.isatty())
    report = audit_calls(engine, calls, progress=sys.stderr.isatty())
    print(report.summary())
    return 0 if report.ok else 1


def _recorded_calls(path: Path, manifest_hash: str) -> list:
    """The calls of a recorded-call JSONL file, or every Search call stored in a run folder."""
    from rap_benchmark.bm25.audit import read_calls

    if not path.is_dir():
        return read_calls(path)
    from rap_benchmark.agents.diagnostics import recorded_calls
    from rap_benchmark.agents.store import RunStore

    store = RunStore(path)
    meta = store.read_run()
    if meta is None:
        raise ArtifactError(f"{path} is not a run folder (no run.json) nor a recorded-call file")
    if meta.get("manifest_hash") not in (None, manifest_hash):
        raise InputError(f"{path} was run on instance {meta.get('manifest_hash')}, not on this one ({manifest_hash})")
    return [call for rec in store.iter_units() for call in recorded_calls(rec)]


def _traces(args: argparse.Namespace) -> int:
    from rap_benchmark.agents.diagnostics import trace_audit
    from rap_benchmark.agents.store import RunStore
    from rap_benchmark.core.artifacts import load_instance

    store = RunStore(run_folder(args.rundir))
    table, summary = trace_audit(load_instance(args.dir), store, progress=not args.no_progress)
    if args.out:
        atomic_write_text(args.out, table.to_csv(index=False))
    print_json(summary)
    return 0 if summary.get("exact", True) else 1


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "audit",
        help="audit the instruments: assignment (parallel, truth, human audit) and Search (replay, traces)",
        epilog=EPILOG,
    )
    asub = subcommands(p, "audit_command", "AUDIT", required=False)

    q = asub("parallel", help="second offline instrument, cross-fit Hungarian agreement")
    q.add_argument("dir", help=INSTANCE_HELP)
    q.add_argument(
        "--seed",
        type=nonnegative_int,
        default=0,
        help="seed of the second instrument (its SVD and k-means) and of the field resampling (default: %(default)s)",
    )
    q.add_argument("--resamples", type=positive_int, default=2000, help=RESAMPLES_HELP)
    q.add_argument("--out", help="write the per-field table (CSV)")
    q.set_defaults(func=_parallel)

    q = asub("truth", help="mini only: frozen instrument vs the generator's latent directions")
    q.add_argument("dir", help="a built mini instance folder (rap build --instance mini --out)")
    q.set_defaults(func=_truth)

    q = asub("sample", help="draw the stratified human-audit sample and write the blind sheet")
    q.add_argument("dir", help=INSTANCE_HELP)
    q.add_argument(
        "--out",
        required=True,
        help="folder for the blind sheet.csv, sheet.html and directions.csv, and the private key.private.csv",
    )
    q.add_argument(
        "--fields",
        type=positive_int,
        default=24,
        help="how many fields to audit, drawn at random (every field when the instance has fewer) "
        "(default: %(default)s)",
    )
    q.add_argument(
        "--per-cell",
        type=nonnegative_int,
        default=1,
        help="papers drawn per field from each of the four cells: single or boundary, before or from the "
        "codebook cutoff (default: %(default)s)",
    )
    q.add_argument(
        "--population",
        type=nonnegative_int,
        default=1,
        help="papers drawn per field uniformly from all its memberships (default: %(default)s)",
    )
    q.add_argument(
        "--retrieved",
        type=nonnegative_int,
        default=1,
        help="papers drawn per field among those a direction's name retrieves (Search at the last origin, "
        "expanding universe) whose frozen primary is another direction; 0: no Search (default: %(default)s)",
    )
    q.add_argument(
        "--seed",
        type=nonnegative_int,
        default=0,
        help="seed of the field and paper draws and of the opaque item ids (default: %(default)s)",
    )
    q.set_defaults(func=_sample)

    q = asub("analyse", help="analyse returned annotations against the private key")
    q.add_argument("dir", help="the built instance folder the sample was drawn from")
    q.add_argument("key", help="key.private.csv written by `rap audit sample`")
    q.add_argument(
        "answers",
        nargs="+",
        help="annotations CSV (item_id, member, primary, secondary, clarity, confidence); "
        "two readers' files also give reader-reader agreement",
    )
    q.add_argument(
        "--ratings",
        action="append",
        metavar="CSV",
        help="a reader's direction ratings (field_id, key, rating: the filled directions.csv or the "
        "form's ratings.csv); give it twice for two readers",
    )
    q.add_argument("--resamples", type=positive_int, default=2000, help=RESAMPLES_HELP)
    q.add_argument(
        "--permutations",
        type=positive_int,
        default=9999,
        help="permutations of the exchangeable-disagreement test of TV(instrument, annotator) (default: %(default)s)",
    )
    q.add_argument(
        "--seed",
        type=nonnegative_int,
        default=0,
        help="seed of the field resampling and the permutations (default: %(default)s)",
    )
    q.add_argument("--json", action="store_true", help="also print every estimate as one JSON object")
    q.set_defaults(func=_analyse)
    p.set_defaults(func=lambda args: (p.print_help(), 2)[1])

    q = asub("search", help="re-execute recorded Search calls; exit 1 when any result differs")
    q.add_argument("dir", help="built instance folder")
    q.add_argument("calls", metavar="CALLS", help="recorded-call JSON lines, or a run folder (rap run --out)")
    q.add_argument("--backend", choices=["auto", "numba", "numpy"], default="auto", help=argparse.SUPPRESS)
    q.set_defaults(func=_search)

    q = asub("traces", help="replay a run's Search traces natively and under the recent window, per unit")
    q.add_argument("dir", help="built instance folder")
    q.add_argument("rundir", help="run directory (rap run --out)")
    q.add_argument("--out", help="CSV of the per-unit table")
    q.add_argument("--no-progress", action="store_true", help="no progress bar")
    q.set_defaults(func=_traces)
