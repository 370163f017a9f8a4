"""``rap demo``: build the embedded ``mini`` instance and run everything the package can do on it.

The demo is a list of small steps (:data:`STEPS`). Each step takes the shared
:class:`DemoContext`, does one thing, may leave results in ``ctx.results`` for later steps, and
returns a short readable summary that :func:`run_demo` prints under the step's title. Later
stages (baselines, reference agents, the report) add themselves by appending a
:class:`DemoStep` to :data:`STEPS`.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from rap_benchmark.artifacts import Instance
from rap_benchmark.spec import BenchmarkSpec, mini_spec


@dataclass
class DemoContext:
    """State shared by the demo steps."""

    out: Path  # the built instance folder
    spec: BenchmarkSpec
    progress: bool = True
    instance: Instance | None = None
    results: dict[str, Any] = field(default_factory=dict)

    def require_instance(self) -> Instance:
        if self.instance is None:
            from rap_benchmark.artifacts import load_instance

            self.instance = load_instance(self.out)
        return self.instance


@dataclass(frozen=True)
class DemoStep:
    """One titled demo step: ``run(ctx)`` returns the summary text to print."""

    title: str
    run: Callable[[DemoContext], str]


def _row_spearman(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Spearman rho of each row pair (average ranks; NaN when a row is constant)."""
    from scipy.stats import rankdata

    ra = rankdata(a, axis=1)
    rb = rankdata(b, axis=1)
    ra -= ra.mean(axis=1, keepdims=True)
    rb -= rb.mean(axis=1, keepdims=True)
    denom = np.sqrt((ra * ra).sum(axis=1) * (rb * rb).sum(axis=1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(denom > 0, (ra * rb).sum(axis=1) / np.where(denom > 0, denom, 1.0), np.nan)


def step_build(ctx: DemoContext) -> str:
    from rap_benchmark.artifacts import load_instance, manifest_hash
    from rap_benchmark.build import build_instance

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
    from rap_benchmark.artifacts import verify

    problems = verify(ctx.out)
    lines = [f"verify {ctx.out}: {'OK' if not problems else f'{len(problems)} problems'}"]
    with tempfile.TemporaryDirectory(prefix="rap-demo-tamper-") as tmp:
        copy = Path(tmp) / "copy"
        shutil.copytree(ctx.out, copy)
        target = copy / "blocks.parquet"
        data = bytearray(target.read_bytes())
        data[len(data) // 2] ^= 0x01
        target.write_bytes(bytes(data))
        tampered = verify(copy)
    lines.append("after flipping one bit of a copy's blocks.parquet, verify reports:")
    lines.extend(f"  {p}" for p in tampered)
    return "\n".join(lines)


def step_info(ctx: DemoContext) -> str:
    from rap_benchmark.build import format_info, instance_info

    info = instance_info(ctx.require_instance())
    ctx.results["info"] = info
    return format_info(info)


def step_episodes(ctx: DemoContext) -> str:
    from rap_benchmark.records import DIRECTION_KEYS, Policy

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
    rho = _row_spearman(x, y)
    ctx.results["persistence_rho"] = float(np.nanmean(rho))
    lines.append(
        f"realised persistence over {ok.sum()} episodes: mean Spearman rho(x, y) = {np.nanmean(rho):.3f} "
        f"(min {np.nanmin(rho):.3f}, max {np.nanmax(rho):.3f})"
    )
    return "\n".join(lines)


def step_policies(ctx: DemoContext) -> str:
    from rap_benchmark.records import Policy

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
    inst = ctx.require_instance()
    m = inst.search_manifest
    lines = ["search universes (papers per universe):"]
    for regime, group in m.groupby("regime", sort=True):
        n = group["n_papers"].to_numpy()
        lines.append(
            f"  {regime:<9} {len(group)} universes, min {n.min():,}, median {np.median(n):,.0f}, max {n.max():,}"
        )
    return "\n".join(lines)


STEPS: list[DemoStep] = [
    DemoStep("build the embedded mini instance", step_build),
    DemoStep("verify the SHA256 manifest", step_verify),
    DemoStep("instance figures", step_info),
    DemoStep("episodes", step_episodes),
    DemoStep("counting policies", step_policies),
    DemoStep("search manifest", step_search_manifest),
]
"""The demo, in order. Later stages append their own steps."""


def run_demo(
    out: str | Path | None = None,
    *,
    steps: list[DemoStep] | None = None,
    spec: BenchmarkSpec | None = None,
    echo: Callable[[str], None] = print,
    progress: bool = True,
) -> DemoContext:
    """Run every step (default :data:`STEPS`) on a fresh ``mini`` build in ``out``.

    ``out=None`` builds into a new temporary folder (kept, and printed, so it can be inspected).
    """
    if out is None:
        out = Path(tempfile.mkdtemp(prefix="rap-demo-")) / "mini"
    ctx = DemoContext(out=Path(out), spec=spec or mini_spec(), progress=progress)
    chosen = STEPS if steps is None else steps
    for k, step in enumerate(chosen, 1):
        echo(f"\n== [{k}/{len(chosen)}] {step.title} ==")
        start = time.perf_counter()
        summary = step.run(ctx)
        echo(summary)
        echo(f"({time.perf_counter() - start:.1f} s)")
    return ctx
