"""Instrument quality on a real instance (the paper's codebook construction and counting policies): is it a benchmark worth running?

Builds the instance cold (timed; ``--reuse DIR`` measures an already built folder instead), then
reports, side by side with the paper's figures:

* parallel-instrument agreement (``rap audit parallel``'s second instrument: the compact
  construction's independent second draft, labelled by its own distilled labeller, when the
  instance has one, else an offline text instrument; cross-fit Hungarian alignment,
  field-resampled 95% interval; paper 0.686 [0.651, 0.722]), before and from the codebook cutoff;
  for a compact build also the two drafts as the model applied them (its own labels of the papers
  both drafts labelled, Hungarian cross-fit on halves: ``parallel_agreement_model_labels``);
  the distilled labeller's held-out agreement with the model's labels (the build's ledger); and,
  by the same measure, how far two independent offline text instruments agree
  at all: the second instrument against itself under another seed, and against a third built on
  unigrams and bigrams (neither is the frozen instrument);
* codebook-only assignability: a classifier that sees only the written codebook and a paper's
  title and abstract recovers the frozen primary on ``single`` memberships (paper's human audit:
  34/62 exact on single items);
* the codebook's form: smallest direction share of a field's pre-cutoff papers (>= 0.03), names
  verbatim in their direction's pre-cutoff papers, names distinct within a field;
* the names' fit (``rap_benchmark.audit.codebook.name_fit``): median precision (>= 0.80) and
  coverage (>= 0.40) of the names on pre-cutoff memberships, the share of names found in more than
  20% of their field's papers (<= 0.02), and the ten least cohesive fields of the build summary;
* headroom on Test: reliability ceiling minus the best of Recent and EWMA (field-macro Spearman
  of the canonical target; paper 0.911 - 0.803 = 0.108), and the share of Test episodes where
  Recent already scores >= 0.95;
* assignment type shares next to the paper's (single 55.48%, boundary 42.60%).

The last line printed is one JSON object.

    .venv/bin/python benchmarks/instrument_quality.py --instance arxiv-sample
    .venv/bin/python benchmarks/instrument_quality.py --instance arxiv-sample --reuse build/arxiv-sample
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

PAPER = {"parallel_agreement": 0.686, "codebook_only_exact": 34 / 62, "ewma_test": 0.803, "ceiling_test": 0.911}
PAPER_TYPES = {"single": 0.5548, "boundary": 0.4260, "bridge": 0.0158, "other": 0.0034, "low_evidence": 0.000036}


def field_macro(values: np.ndarray, fields: np.ndarray) -> float:
    ok = np.isfinite(values)
    per_field = [values[ok & (fields == f)].mean() for f in np.unique(fields[ok])]
    return float(np.mean(per_field))


def measure(inst_dir: Path, build_s: float | None, *, resamples: int) -> dict:
    from rap_benchmark.audit.codebook import (
        GENERIC_NAME_SHARE,
        codebook_only_primary,
        direction_shares,
        name_fit,
        names_distinct,
        names_verbatim,
    )
    from rap_benchmark.audit.parallel import (
        PARALLEL_OFFLINE,
        parallel_agreement,
        parallel_instrument,
        second_instrument,
        slots_as_primary,
    )
    from rap_benchmark.core.artifacts import load_instance
    from rap_benchmark.evaluation.scoring.baselines import composition_array, ewma, fill_history, history_array, recent
    from rap_benchmark.evaluation.scoring.metrics import spearman
    from rap_benchmark.evaluation.scoring.reliability import reliability
    from rap_benchmark.pipeline.build import type_shares

    inst = load_instance(inst_dir)
    spec, asg = inst.spec, inst.assignments
    cutoff = spec.codebook_cutoff
    t0 = time.perf_counter()
    parallel, parallel_what = parallel_instrument(inst, seed=spec.seed)
    _, summary = parallel_agreement(inst.papers, asg, parallel, cutoff, n_resamples=resamples, seed=spec.seed)
    second = (
        parallel if parallel_what == PARALLEL_OFFLINE else second_instrument(inst.papers, asg, cutoff, seed=spec.seed)
    )
    _, offline_summary = parallel_agreement(inst.papers, asg, second, cutoff, n_resamples=resamples, seed=spec.seed)
    drafts = None
    if "model_labels" in inst.extras:
        from rap_benchmark.audit.parallel import model_label_agreement

        drafts_table, drafts = model_label_agreement(inst.extras["model_labels"], n_resamples=resamples, seed=spec.seed)
    t_parallel = time.perf_counter() - t0
    # how far can two independent text instruments agree at all? the audit's instrument against
    # itself under another seed (its stability), and against a third, bigram-represented one
    # (the same cross-fit Hungarian measure; neither is the frozen instrument)
    as_frozen = slots_as_primary(asg, second)
    other_seed = second_instrument(inst.papers, asg, cutoff, seed=spec.seed + 1)
    _, self_summary = parallel_agreement(
        inst.papers, as_frozen, other_seed, cutoff, n_resamples=resamples, seed=spec.seed
    )
    third = second_instrument(inst.papers, asg, cutoff, seed=spec.seed + 2, representation="bigram")
    _, cross_summary = parallel_agreement(inst.papers, as_frozen, third, cutoff, n_resamples=resamples, seed=spec.seed)

    single = asg.loc[asg["type"] == "single", ["arxiv_id", "field_id", "primary"]].reset_index(drop=True)
    guess = codebook_only_primary(inst.papers, single, inst.codebooks)
    exact = float((guess.to_numpy() == single["primary"].to_numpy()).mean())

    shares = direction_shares(asg, cutoff)
    verbatim = names_verbatim(inst.papers, asg, inst.codebooks, cutoff)
    distinct = names_distinct(inst.codebooks)
    fit = name_fit(inst.papers, asg, inst.codebooks, cutoff)
    least = inst.ledger.get("derived", {}).get("fields", {}).get("least_cohesive")
    distilled = inst.ledger.get("derived", {}).get("instrument", {}).get("compact", {}).get("draft_A", {})

    eps = inst.episodes
    test = eps.loc[(eps["policy"] == "canonical") & (eps["split"] == "test")].reset_index(drop=True)
    H, ok = fill_history(history_array(test))
    Y = composition_array(test, "y")
    fields = test["field_id"].to_numpy().astype(str)
    rec = np.where(ok, spearman(recent(H), Y), np.nan)
    ew = np.where(ok, spearman(ewma(H, spec.ewma_weights), Y), np.nan)
    rel = reliability(inst, split="test", progress=False)
    recent_test, ewma_test = field_macro(rec, fields), field_macro(ew, fields)
    types = type_shares(asg)
    return {
        "n_fields": len(inst.codebooks),
        "parallel_agreement": summary["overall"].estimate,
        "parallel_agreement_lo": summary["overall"].lo,
        "parallel_agreement_hi": summary["overall"].hi,
        "parallel_agreement_pre": summary["pre"].estimate,
        "parallel_agreement_post": summary["post"].estimate,
        "parallel_instrument": parallel_what,
        "parallel_agreement_model_labels": None if drafts is None else drafts.estimate,
        "parallel_agreement_model_labels_lo": None if drafts is None else drafts.lo,
        "parallel_agreement_model_labels_hi": None if drafts is None else drafts.hi,
        "parallel_agreement_model_labels_papers": None if drafts is None else int(drafts_table["n_shared"].sum()),
        "parallel_fields": int(summary["overall"].n),
        "offline_second_vs_frozen": offline_summary["overall"].estimate,
        "distilled_held_out_agreement": distilled.get("held_out_agreement"),
        "distilled_held_out_agreement_95ci": distilled.get("held_out_agreement_95ci"),
        "distilled_held_out_papers": distilled.get("held_out_papers"),
        "codebook_only_exact": exact,
        "second_vs_itself_other_seed": self_summary["overall"].estimate,
        "second_vs_third_bigram": cross_summary["overall"].estimate,
        "min_direction_share": float(np.nanmin(shares.to_numpy())),
        "names_verbatim_share": float(verbatim["verbatim"].mean()),
        "names_distinct_share": float(distinct.mean()),
        "name_precision_median": float(fit["precision"].median()),
        "name_coverage_median": float(fit["coverage"].median()),
        "generic_name_share": float((fit["field_share"] > GENERIC_NAME_SHARE).mean()),
        "least_cohesive_fields": None if least is None else [f"{d['name']} ({d['cohesion']:.3f})" for d in least],
        "recent_test": recent_test,
        "ewma_test": ewma_test,
        "ceiling_test": rel.ceiling,
        "headroom": rel.ceiling - max(recent_test, ewma_test),
        "share_recent_ge_095": float(np.mean(rec[np.isfinite(rec)] >= 0.95)),
        "single_share": types["single"],
        "boundary_share": types["boundary"],
        "build_s": build_s,
        "_context": {
            "paper": PAPER,
            "paper_types": PAPER_TYPES,
            "types": types,
            "n_single_scored": len(single),
            "test_episodes": len(test),
            "parallel_s": round(t_parallel, 1),
            "median_n_x_test": float(test["n_x"].median()),
            "name_precision_p10": float(fit["precision"].quantile(0.10)),
            "name_coverage_p25": float(fit["coverage"].quantile(0.25)),
        },
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--instance", default="arxiv-sample", help="named instance (spec) to build")
    parser.add_argument("--source", default=None, help="corpus folder (default: the instance's data folder)")
    parser.add_argument("--reuse", default=None, help="measure this built folder instead of building")
    parser.add_argument("--resamples", type=int, default=2000)
    args = parser.parse_args(argv)
    from rap_benchmark.core.spec import spec_for
    from rap_benchmark.pipeline.build import build_instance

    if args.reuse:
        result = measure(Path(args.reuse), None, resamples=args.resamples)
    else:
        spec = spec_for(args.instance)
        source = args.source
        if source is None and args.instance == "arxiv-sample":
            from rap_benchmark.cli.build import default_arxiv_source

            source = default_arxiv_source()
            if source is None:
                print("instrument_quality: no arXiv sample found; pass --source", file=sys.stderr)
                return 2
        with tempfile.TemporaryDirectory() as tmp:
            t0 = time.perf_counter()
            # cache=False: a cold build, never one labelled by an instrument fitted earlier
            out = build_instance(spec, Path(tmp) / args.instance, source, progress=sys.stderr.isatty(), cache=False)
            build_s = time.perf_counter() - t0
            print(f"built {args.instance} in {build_s:.1f} s", file=sys.stderr)
            result = measure(out, round(build_s, 1), resamples=args.resamples)
    context = result.pop("_context")
    print(json.dumps(context, indent=1), file=sys.stderr)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
