"""``rap demo``: build the embedded ``mini`` instance and run everything the package can do on it.

Everything the demo writes goes into ONE folder (default ``./rap-demo``, or ``--out``) and
nothing outside it is touched::

    rap-demo/
      .rap-demo                  marker: a rerun may replace this folder's contents
      mini/                      the built instance (rap info rap-demo/mini)
      predictions/               baselines.jsonl and baselines_ledger.json
      runs/reference-search-hits/  a resumable run store with its predictions.jsonl
      report/report.html         the self-contained report
      citecast/                  the embedded CiteCast instance

The demo is a list of small steps (:data:`STEPS`). Each step takes the shared
:class:`DemoContext`, does one thing, may leave results in ``ctx.results`` for later steps, and
returns a short readable summary that :func:`run_demo` prints under the step's title.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rap_benchmark.core.errors import InputError
from rap_benchmark.core.fsio import atomic_write_bytes, atomic_write_text
from rap_benchmark.core.spec import BenchmarkSpec, mini_spec

if TYPE_CHECKING:
    from rap_benchmark.core.artifacts import Instance

DEFAULT_DIR = "rap-demo"
MARKER = ".rap-demo"
"""A file that marks a folder as made by ``rap demo``: only such a folder (or an empty one) is reused."""


@dataclass
class DemoContext:
    """State shared by the demo steps; every path is inside ``root``."""

    root: Path  # the demo folder: everything the demo writes is inside it
    spec: BenchmarkSpec
    progress: bool = True
    instance: Instance | None = None
    results: dict[str, Any] = field(default_factory=dict)

    @property
    def out(self) -> Path:
        """The built instance folder."""
        return self.root / "mini"

    def require_instance(self) -> Instance:
        if self.instance is None:
            from rap_benchmark.core.artifacts import load_instance

            self.instance = load_instance(self.out)
        return self.instance


@dataclass(frozen=True)
class DemoStep:
    """One titled demo step: ``run(ctx)`` returns the summary text to print."""

    title: str
    run: Callable[[DemoContext], str]


def prepare_folder(root: str | Path) -> Path:
    """Check ``root`` can hold the demo (absent, empty, or made by an earlier ``rap demo``) and mark it.

    Refuses, before anything is written, a path that is a file or a folder holding other things.
    """
    root = Path(root)
    if root.exists() and not root.is_dir():
        raise InputError(f"--out {root} is a file, not a folder")
    if root.is_dir() and any(root.iterdir()) and not (root / MARKER).is_file():
        raise InputError(f"--out {root} already holds files that rap demo did not write; give a new or empty folder")
    root.mkdir(parents=True, exist_ok=True)
    atomic_write_text(root / MARKER, "made by rap demo; a rerun of rap demo may replace everything in this folder\n")
    return root


def step_build(ctx: DemoContext) -> str:
    from rap_benchmark.core.artifacts import load_instance
    from rap_benchmark.core.sums import manifest_hash
    from rap_benchmark.pipeline.build import build_instance

    start = time.perf_counter()
    build_instance(ctx.spec, ctx.out, progress=ctx.progress)
    seconds = time.perf_counter() - start
    ctx.instance = load_instance(ctx.out)
    files = sorted(p.name for p in ctx.out.iterdir() if p.is_file())
    return (
        f"built {ctx.spec.name} in {seconds:.1f} s at {ctx.out}\n"
        f"files: {', '.join(files)}\n"
        f"manifest hash {manifest_hash(ctx.out)}"
    )


def step_verify(ctx: DemoContext) -> str:
    from rap_benchmark.core.sums import verify

    problems = verify(ctx.out)
    lines = [f"verify {ctx.out}: {'OK' if not problems else f'{len(problems)} problems'}"]
    with tempfile.TemporaryDirectory(prefix=".tamper-check-", dir=ctx.root) as tmp:
        copy = Path(tmp) / "copy"
        shutil.copytree(ctx.out, copy)
        target = copy / "blocks.parquet"
        data = bytearray(target.read_bytes())
        data[len(data) // 2] ^= 0x01
        atomic_write_bytes(target, bytes(data))
        tampered = verify(copy)
    lines.append("after flipping one bit of a copy's blocks.parquet, verify reports:")
    lines.extend(f"  {p}" for p in tampered)
    return "\n".join(lines)


def step_info(ctx: DemoContext) -> str:
    from rap_benchmark.pipeline.build import format_info, instance_info

    info = instance_info(ctx.require_instance())
    ctx.results["info"] = info
    return format_info(info)


def step_episodes(ctx: DemoContext) -> str:
    import numpy as np

    from rap_benchmark.core.records import DIRECTION_KEYS, Policy
    from rap_benchmark.evaluation.scoring import rank_correlation

    inst = ctx.require_instance()
    ep = inst.episodes.loc[inst.episodes["policy"] == Policy.CANONICAL.value].reset_index(drop=True)
    first = ep.iloc[0]
    cb = inst.codebooks[first["field_id"]]

    def fmt(vec: Any) -> str:
        return "  ".join(f"{100 * v:5.1f}" for v in vec) if vec is not None else "(empty)"

    lines = [f"episode {first['field_id']}@{first['origin']} ({cb.name}), canonical policy, shares in %:"]
    lines.append("              " + "  ".join(f"{k:>5}" for k in DIRECTION_KEYS))
    for k, hist in enumerate(first["history"]):
        lines.append(f"history[{k}]    {fmt(hist)}")
    lines.append(f"y (target)    {fmt(first['y'])}")
    ok = ep["x"].notna() & ep["y"].notna()
    x = np.stack(ep.loc[ok, "x"].to_numpy())
    y = np.stack(ep.loc[ok, "y"].to_numpy())
    rho = rank_correlation(x, y)
    ctx.results["persistence_rho"] = float(np.nanmean(rho))
    lines.append(
        f"realised persistence over {ok.sum()} episodes: mean Spearman rho(x, y) = {np.nanmean(rho):.3f} "
        f"(min {np.nanmin(rho):.3f}, max {np.nanmax(rho):.3f})"
    )
    return "\n".join(lines)


def step_policies(ctx: DemoContext) -> str:
    import numpy as np

    from rap_benchmark.core.records import Policy

    inst = ctx.require_instance()
    ep = inst.episodes
    canonical = ep.loc[ep["policy"] == Policy.CANONICAL.value].set_index(["field_id", "origin"])
    lines = ["counting policy   mean n_y   episodes whose top y-direction differs from canonical"]
    for policy in Policy:
        rows = ep.loc[ep["policy"] == policy.value].set_index(["field_id", "origin"]).loc[canonical.index]
        ok = rows["y"].notna() & canonical["y"].notna()
        top = np.array([int(np.argmax(v)) for v in rows.loc[ok, "y"]])
        top_c = np.array([int(np.argmax(v)) for v in canonical.loc[ok, "y"]])
        lines.append(f"{policy.value:<17} {rows['n_y'].mean():8.1f}   {int((top != top_c).sum())} of {int(ok.sum())}")
    return "\n".join(lines)


def step_search_manifest(ctx: DemoContext) -> str:
    import numpy as np

    inst = ctx.require_instance()
    m = inst.search_manifest
    lines = ["search universes (papers per universe):"]
    for regime, group in m.groupby("regime", sort=True):
        n = group["n_papers"].to_numpy()
        lines.append(
            f"  {regime:<9} {len(group)} universes, min {n.min():,}, median {np.median(n):,.0f}, max {n.max():,}"
        )
    return "\n".join(lines)


def step_search(ctx: DemoContext) -> str:
    from rap_benchmark.bm25 import SearchEngine
    from rap_benchmark.bm25.tool import observation_json

    inst = ctx.require_instance()
    engine = SearchEngine.from_instance(inst)
    ctx.results["engine"] = engine
    field_id = inst.field_ids[0]
    origin = inst.spec.origins[-1]
    query = inst.codebooks[field_id].directions[0].name
    obs = engine.search(field_id, origin, "fixed", query)
    lines = [f"Search({query!r}) in {field_id} ({inst.codebooks[field_id].name}), fixed window before {origin}:"]
    lines.append(f"  total_hits {obs.total_hits}")
    lines.extend(f"  {h.score:7.3f}  {h.date}  {h.arxiv_id}  {h.title[:70]}" for h in obs.hits)
    lines.append(f"the agent sees exactly this JSON ({len(observation_json(obs))} characters)")
    return "\n".join(lines)


def _leaderboard(ctx: DemoContext, files: list[Path]) -> str:
    from rap_benchmark.evaluation.predictions import combine_validated, validate_predictions
    from rap_benchmark.evaluation.report.aggregates import leaderboard
    from rap_benchmark.evaluation.report.tables import leaderboard_markdown
    from rap_benchmark.evaluation.scoring import score_predictions

    inst = ctx.require_instance()
    preds, problems = combine_validated([validate_predictions(f, inst) for f in files])
    board = leaderboard(score_predictions(inst, preds), inst, split="test")
    return "\n".join(
        [*problems, "Test split, field-macro Forecast Spearman, 95% block bootstrap:", leaderboard_markdown(board)]
    )


def step_baselines(ctx: DemoContext) -> str:
    from rap_benchmark.core.artifacts import write_json
    from rap_benchmark.evaluation.predictions import write_predictions
    from rap_benchmark.evaluation.scoring import baseline_predictions

    inst = ctx.require_instance()
    frame, ledger = baseline_predictions(inst, tune_dev=True)
    out = ctx.root / "predictions" / "baselines.jsonl"
    write_predictions(frame, out)
    write_json(out.with_name("baselines_ledger.json"), ledger)
    ctx.results["baselines"] = out
    return f"wrote {out} ({frame['model'].nunique()} baselines, tuned on Dev only)\n" + _leaderboard(ctx, [out])


def step_reference_agents(ctx: DemoContext) -> str:
    from rap_benchmark.agents import ReferenceBackend, run_benchmark
    from rap_benchmark.core.records import Condition

    inst = ctx.require_instance()
    out = ctx.root / "runs" / "reference-search-hits"
    stats, preds = run_benchmark(
        inst.public_view(),
        ReferenceBackend("reference/search-hits"),
        out,
        model="reference/search-hits",
        conditions=list(Condition),
        progress=ctx.progress,
    )
    ctx.results["reference"] = preds
    files = [ctx.results["baselines"], preds] if "baselines" in ctx.results else [preds]
    return (
        f"reference/search-hits through the agent protocol, A0-A4: {stats.valid} valid, {stats.invalid} invalid "
        f"units ({stats.skipped} reused from an earlier run) -> {preds}\n" + _leaderboard(ctx, files)
    )


def step_report(ctx: DemoContext) -> str:
    from rap_benchmark.evaluation.report import build_report

    inst = ctx.require_instance()
    files = [ctx.results[k] for k in ("baselines", "reference") if k in ctx.results]
    result = build_report(inst, files, ctx.root / "report", audit=True, progress=ctx.progress)
    ctx.results["report"] = Path(result.html)
    return f"wrote {len(result.files)} files; open {result.html} in a browser (self-contained, no network)"


def step_audit(ctx: DemoContext) -> str:
    from rap_benchmark.audit import parallel_agreement, second_instrument, truth_agreement
    from rap_benchmark.cli.audit import estimate_text

    inst = ctx.require_instance()
    truth = truth_agreement(inst.assignments, inst.extras["truth"])
    cutoff = inst.spec.codebook_cutoff
    second = second_instrument(inst.papers, inst.assignments, cutoff, seed=inst.spec.seed)
    _, summary = parallel_agreement(inst.papers, inst.assignments, second, cutoff, n_resamples=2000, seed=0)
    iv = summary["overall"]
    ch = summary["change"]
    return (
        f"frozen instrument vs the generator's latent directions: exact {truth['exact'].mean():.3f}, "
        f"within declared pair {truth['within_pair'].mean():.3f}\n"
        f"second instrument, cross-fit Hungarian agreement: {estimate_text(iv)}, "
        f"change from the cutoff {estimate_text(ch, signed=True)}"
    )


def step_citecast(ctx: DemoContext) -> str:
    from rap_benchmark.citecast.baselines import sweep
    from rap_benchmark.citecast.embedded import build_embedded
    from rap_benchmark.citecast.tasks import load_tasks

    out = build_embedded(ctx.root / "citecast", progress=False)
    ctx.results["citecast"] = Path(out)
    result = sweep(list(load_tasks(out).values()))
    return f"CiteCast embedded instance at {out}; baseline mean reward:\n{result.table()}"


STEPS: list[DemoStep] = [
    DemoStep("build the embedded mini instance", step_build),
    DemoStep("verify the SHA256 manifest", step_verify),
    DemoStep("instance figures", step_info),
    DemoStep("episodes", step_episodes),
    DemoStep("counting policies", step_policies),
    DemoStep("search manifest", step_search_manifest),
    DemoStep("search one universe", step_search),
    DemoStep("statistical baselines (Dev-tuned) and their leaderboard", step_baselines),
    DemoStep("reference agents through the tool protocol", step_reference_agents),
    DemoStep("the report", step_report),
    DemoStep("instrument audit", step_audit),
    DemoStep("CiteCast", step_citecast),
]
"""The demo, in order."""


def run_demo(root: str | Path = DEFAULT_DIR, *, progress: bool = True) -> DemoContext:
    """Run every step of :data:`STEPS` on a fresh ``mini`` build inside the folder ``root``."""
    ctx = DemoContext(root=prepare_folder(root), spec=mini_spec(), progress=progress)
    for k, step in enumerate(STEPS, 1):
        print(f"\n== [{k}/{len(STEPS)}] {step.title} ==")
        start = time.perf_counter()
        print(step.run(ctx))
        print(f"({time.perf_counter() - start:.1f} s)")
    return ctx


def where_things_are(ctx: DemoContext) -> str:
    """The closing summary: where the instance, the predictions and report.html are."""
    rows = [("instance", ctx.out, f"rap info {ctx.out}")]
    preds = [ctx.results[k] for k in ("baselines", "reference") if k in ctx.results]
    rows.extend(("predictions", Path(p), "") for p in preds)
    if "report" in ctx.results:
        rows.append(("report", ctx.results["report"], "open it in a browser (works offline)"))
    if "citecast" in ctx.results:
        rows.append(("citecast", ctx.results["citecast"], f"rap citecast sweep {ctx.results['citecast']}"))
    lines = [f"everything is in {ctx.root}/ (nothing was written outside it):"]
    width = max(len(str(path)) for _, path, _ in rows)
    lines.extend(f"  {what:<12} {str(path):<{width}}" + (f"  # {hint}" if hint else "") for what, path, hint in rows)
    if preds:
        lines.append(f"next: rap score {ctx.out} {' '.join(str(p) for p in preds)}")
    return "\n".join(lines)


DEMO_EPILOG = f"""examples:
  rap demo                       # everything goes into ./{DEFAULT_DIR}/ (about a minute and a half)
  rap demo --out my-demo         # or into a folder of your choice (new, empty, or an earlier demo's)
  rap demo --quiet               # no progress bars

The demo writes only inside its folder: mini/ (the instance), predictions/, runs/, report/report.html
and citecast/. It ends with a summary of where each of them is.
"""


def _cmd_demo(args: argparse.Namespace) -> int:
    start = time.perf_counter()
    # matplotlib's font cache would otherwise go to ~/.cache/matplotlib: keep it in the demo folder
    os.environ.setdefault("MPLCONFIGDIR", str(Path(args.out).resolve() / ".cache" / "matplotlib"))
    ctx = run_demo(args.out, progress=not args.quiet)
    print(f"\ndemo finished in {time.perf_counter() - start:.0f} s; {where_things_are(ctx)}")
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "demo",
        help="build mini and run everything the package can do on it (into ./rap-demo)",
        description="Build the embedded mini instance and run every demo step on it, printing a summary per step.",
        epilog=DEMO_EPILOG,
    )
    p.add_argument("--out", default=DEFAULT_DIR, help=f"the demo folder (default ./{DEFAULT_DIR})")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.set_defaults(func=_cmd_demo)
