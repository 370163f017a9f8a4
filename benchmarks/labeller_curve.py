"""How the compact construction's distilled labeller grows with the model's labels: would more label requests buy agreement?

Reads a built compact instance (its ``model_labels.parquet``: the model's own labels of draft A,
its codebooks and memberships), refits every field's distilled labeller on a share of the
model's labels and scores the same held-out folds as the build (each labelled paper by a
labeller fitted without it). At fraction 1 the figures are the build's own (the ledger's
``held_out_agreement``, a mean over fields); below it, each labelled paper trains with the
probability given (nested draws, averaged over the seeds). A curve that is still steep at 1
says more labelled papers per field would lift the labeller; a flat one says the labeller's
representation, not the number of labels, is what holds it back.

Prints one row per fraction (labels per field that train a fold, agreement as a mean over
fields and over papers, outside recall); the last line printed is one JSON object.

    .venv/bin/python benchmarks/labeller_curve.py build/arxiv-sample
    .venv/bin/python benchmarks/labeller_curve.py build/arxiv-sample --fractions 0.125,0.25,0.5,1 --seeds 3
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np


def model_units(inst) -> dict:
    """Field id -> (its members, draft A's labels as the distiller reads them), from an instance."""
    from rap_benchmark.pipeline.instrument.distilled import Labelled

    labels = inst.extras["model_labels"]
    labels = labels.loc[labels["draft"] == "A"]
    members = {fid: tuple(g["arxiv_id"]) for fid, g in inst.assignments.groupby("field_id", sort=True)}
    by_field = dict(tuple(labels.groupby("field_id", sort=True)))
    units = {}
    for fid, codebook in sorted(inst.codebooks.items()):
        if fid not in by_field:
            continue
        directions = [
            {"name": d.name, "definition": d.definition, "inclusion": d.inclusion} for d in codebook.directions
        ]
        units[fid] = (members[fid], Labelled.from_labels(by_field[fid], directions))
    return units


def fractions_arg(text: str) -> list[float]:
    try:
        values = sorted({float(v) for v in text.split(",") if v.strip()})
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a comma-separated list of numbers: {text!r}") from None
    if not values or values[0] <= 0 or values[-1] > 1:
        raise argparse.ArgumentTypeError(f"fractions must lie in (0, 1]: {text!r}")
    return values


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("dir", help="a compact instance folder (rap build --instance arxiv-sample --out DIR)")
    parser.add_argument("--fractions", type=fractions_arg, default=[0.25, 0.5, 0.75, 1.0], help="shares of labels")
    parser.add_argument("--seeds", type=int, default=2, help="draws averaged per fraction below 1 (default: 2)")
    args = parser.parse_args(argv)
    from rap_benchmark.core.artifacts import load_instance
    from rap_benchmark.pipeline.instrument.distilled import held_out_curve

    folder = Path(args.dir)
    if not (folder / "model_labels.parquet").is_file():
        print(f"labeller_curve: {folder} holds no model_labels.parquet (not a compact LLM build)", file=sys.stderr)
        return 2
    if args.seeds < 1:
        print("labeller_curve: --seeds must be at least 1", file=sys.stderr)
        return 2
    inst = load_instance(folder)
    t0 = time.perf_counter()
    points = held_out_curve(inst.papers, model_units(inst), inst.spec, args.fractions, range(args.seeds))
    rows = []
    for fraction in args.fractions:
        held = [p.held for p in points if p.fraction == fraction]
        n, n_out = sum(h.n for h in held), sum(h.n_outside for h in held)
        rows.append(
            {
                "fraction": fraction,
                "labels_per_field": round(float(np.mean([p.trained for p in points if p.fraction == fraction])), 1),
                "agreement_field_mean": round(float(np.nanmean([h.agreement for h in held])), 4),
                "agreement_papers": round(sum(h.hits for h in held) / n, 4),
                "outside_recall": round(sum(h.found for h in held) / n_out, 4) if n_out else None,
            }
        )
    print(f"{'fraction':>8}  {'labels/field':>12}  {'agreement (fields)':>18}  {'(papers)':>8}  {'outside recall':>14}")
    for r in rows:
        recall = "-" if r["outside_recall"] is None else f"{r['outside_recall']:.4f}"
        print(
            f"{r['fraction']:>8.3f}  {r['labels_per_field']:>12.1f}  {r['agreement_field_mean']:>18.4f}  "
            f"{r['agreement_papers']:>8.4f}  {recall:>14}"
        )
    ledger = inst.ledger.get("derived", {}).get("instrument", {}).get("compact", {}).get("draft_A", {})
    out = {
        "instance": inst.spec.name,
        "fields": len({p.field_id for p in points}),
        "seeds": args.seeds,
        "curve": rows,
        "ledger_held_out_agreement": ledger.get("held_out_agreement"),
        "seconds": round(time.perf_counter() - t0, 1),
    }
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
