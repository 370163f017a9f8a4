"""Build an instance: corpus -> fields/codebooks -> assignments -> blocks -> episodes -> artifacts.

:func:`build_instance` writes every artifact of docs/ARCHITECTURE.md into a temporary folder
next to ``out`` and moves it into place only when the whole build succeeded, so ``out`` is always
either the previous complete instance or the new one. The build is deterministic: the same spec
and source give byte-identical files and so an identical ``SHA256SUMS``.

Two routes: ``source=None``, the synthetic generator (:mod:`.synth`) with codebooks from its
blueprints and ``truth.parquet`` (the latent labels); ``source=PATH``, a corpus read by
:mod:`.corpus` with fields and codebooks from its text. Both label with the offline instrument,
or, for a source, with ``instrument=LLMInstrument(...)`` (:mod:`.instrument.llm`).
:func:`instance_info` summarises a built instance (what ``rap info`` prints).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from rap_benchmark.core.artifacts import (
    LEDGER_FILE,
    Instance,
    codebook_to_dict,
    replacing_instance,
    write_json,
    write_table,
)
from rap_benchmark.core.records import AssignmentType, Codebook, Policy, Split
from rap_benchmark.core.schemas import ASSIGNMENTS, PAPERS, TRUTH
from rap_benchmark.core.spec import BenchmarkSpec, package_version
from rap_benchmark.core.sums import write_sums

MAX_LEDGER_MALFORMED = 50


def _as_object(frame: pd.DataFrame, columns: tuple[str, ...]) -> pd.DataFrame:
    """Plain object columns (arrow ``string``) whatever pandas' default string dtype is."""
    out = frame.loc[:, list(columns)].copy()
    for col in columns:
        if col not in ("categories", "authors"):
            values = out[col].astype(object).to_numpy()
            out[col] = pd.Series(
                [None if v is None or v is pd.NA or (isinstance(v, float) and np.isnan(v)) else str(v) for v in values],
                dtype=object,
                index=out.index,
            )
        else:
            out[col] = pd.Series(
                [[str(x) for x in v] if v is not None else [] for v in out[col]], dtype=object, index=out.index
            )
    return out.reset_index(drop=True)


def normalise_papers(papers: pd.DataFrame) -> pd.DataFrame:
    """The ``papers.parquet`` table: documented columns, dates as strings, sorted by (date, id)."""
    frame = papers.copy()
    if "authors" not in frame:
        frame["authors"] = [[] for _ in range(len(frame))]
    frame["date"] = frame["date"].astype(str).str.slice(0, 10)
    frame = _as_object(frame, tuple(PAPERS.names))
    return frame.sort_values(["date", "arxiv_id"], kind="stable").reset_index(drop=True)


def normalise_assignments(assignments: pd.DataFrame, papers: pd.DataFrame) -> pd.DataFrame:
    """The ``assignments.parquet`` table: v1 date denormalised in, sorted by (field, date, id)."""
    frame = assignments.copy()
    if "date" not in frame:
        dates = papers.set_index("arxiv_id")["date"]
        frame["date"] = frame["arxiv_id"].map(dates)
    if frame["date"].isna().any():
        missing = frame.loc[frame["date"].isna(), "arxiv_id"].head(5).tolist()
        raise ValueError(f"assignments reference papers not in the corpus: {missing}")
    frame["date"] = frame["date"].astype(str).str.slice(0, 10)
    frame = _as_object(frame, tuple(ASSIGNMENTS.names))
    unknown = set(frame["type"]) - {t.value for t in AssignmentType}
    if unknown:
        raise ValueError(f"unknown assignment types {sorted(unknown)}")
    return frame.sort_values(["field_id", "date", "arxiv_id"], kind="stable").reset_index(drop=True)


def type_shares(assignments: pd.DataFrame) -> dict[str, float]:
    """Share of memberships per assignment type (all five types, in enum order)."""
    counts = assignments["type"].value_counts()
    total = max(int(counts.sum()), 1)
    return {t.value: float(counts.get(t.value, 0)) / total for t in AssignmentType}


def _synthetic_inputs(spec: BenchmarkSpec, progress: bool) -> dict[str, Any]:
    from rap_benchmark.pipeline.codebook import codebooks_from_blueprint
    from rap_benchmark.pipeline.instrument.offline import assign_offline
    from rap_benchmark.pipeline.synth import generate_mini

    mini = generate_mini(spec)
    codebooks, prototypes = codebooks_from_blueprint(mini, spec)
    papers = normalise_papers(mini.papers)
    assignments = assign_offline(papers, mini.memberships, codebooks, prototypes, spec)
    truth = _as_object(mini.truth.loc[:, TRUTH.names], tuple(TRUTH.names))
    truth = truth.sort_values(["field_id", "arxiv_id"], kind="stable").reset_index(drop=True)
    corpus = {"route": "synthetic", "generator": "rap_benchmark.synth.generate_mini", "seed": spec.seed}
    return {"papers": papers, "codebooks": codebooks, "assignments": assignments, "truth": truth, "corpus": corpus}


def _source_inputs(
    spec: BenchmarkSpec,
    source: Path,
    progress: bool,
    instrument: Any = None,
    freeze: bool = False,
    cache: bool = True,
) -> dict[str, Any]:
    from rap_benchmark.pipeline.corpus import corpus_format, read_corpus

    papers, report = read_corpus(source, spec, progress=progress)
    papers = normalise_papers(papers)
    corpus = {"route": "source", "format": corpus_format(source), **report.to_dict(MAX_LEDGER_MALFORMED)}
    inputs = {"papers": papers, "truth": None, "corpus": corpus}
    if instrument is not None:
        from rap_benchmark.pipeline.fields import fit_fields

        memberships, field_info, field_model = fit_fields(papers, spec, progress=progress)
        result, entry = instrument.run(papers, memberships, field_info, spec, progress=progress)
        llm = {"codebooks": result.codebooks, "assignments": result.assignments, "instrument": entry}
        if result.compact is not None:
            from rap_benchmark.pipeline.instrument.llm.compact import frozen_instrument

            llm["parallel"] = result.compact.parallel
            llm["model_labels"] = result.compact.model_labels
            if freeze:
                llm["frozen"] = frozen_instrument(result.compact, result.codebooks, field_model, spec)
        return inputs | llm
    frozen, codebooks, assignments = _offline_instrument(papers, spec, progress, cache)
    return inputs | {
        "codebooks": codebooks,
        "assignments": assignments,
        "frozen": frozen if freeze else None,
        "fields_summary": frozen.summary,
    }


def _offline_instrument(
    papers: pd.DataFrame, spec: BenchmarkSpec, progress: bool, cache: bool
) -> tuple[Any, list[Codebook], pd.DataFrame]:
    """Fit (or take from the cache, see :mod:`.instrument.cache`) the offline instrument and label
    ``papers`` with it: (frozen instrument, codebooks, assignments)."""
    from rap_benchmark.core.artifacts import codebook_from_dict
    from rap_benchmark.pipeline.instrument import cache as instrument_cache

    key = instrument_cache.instrument_key(papers, spec) if cache else None
    with instrument_cache.fitting(key):
        frozen = instrument_cache.lookup(key) if key else None
        if frozen is not None:
            if progress:
                print(
                    f"instrument: fitted before on the same inputs (cache {key[:12]}), labelling only", file=sys.stderr
                )
            codebooks = [codebook_from_dict(d) for d in frozen.codebooks]
            return frozen, codebooks, frozen.label(papers)
        frozen, codebooks, assignments = _fit_offline_instrument(papers, spec, progress)
        if key:
            instrument_cache.store(key, frozen)
    return frozen, codebooks, assignments


def _fit_offline_instrument(
    papers: pd.DataFrame, spec: BenchmarkSpec, progress: bool
) -> tuple[Any, list[Codebook], pd.DataFrame]:
    from rap_benchmark.core.errors import InputError
    from rap_benchmark.pipeline.codebook import build_codebooks, drop_fields, field_summary
    from rap_benchmark.pipeline.fields import fit_fields
    from rap_benchmark.pipeline.instrument.frozen import FrozenInstrument
    from rap_benchmark.pipeline.instrument.offline import AssignRules, calibrate_and_assign
    from rap_benchmark.pipeline.phrases import forget_tables

    memberships, candidates, field_model = fit_fields(papers, spec, progress=progress)
    codebooks, prototypes, unfit = build_codebooks(papers, memberships, candidates, spec, progress=progress)
    forget_tables()  # the phrase table served fields and codebooks; labelling does not read it
    memberships, field_info, field_model, codebooks, prototypes = drop_fields(
        sorted(unfit), memberships, candidates, field_model, codebooks, prototypes
    )
    if not codebooks:
        raise InputError(
            f"no field of {len(candidates)} candidates could hold eight directions (too few papers before "
            f"{spec.codebook_cutoff}); nothing was built"
        )
    assignments, calibration = calibrate_and_assign(papers, memberships, codebooks, prototypes, spec)
    frozen = FrozenInstrument(
        fields=field_model,
        prototypes=prototypes,
        rules=AssignRules.from_spec(spec),
        calibration=calibration,
        codebooks=tuple(codebook_to_dict(cb) for cb in sorted(codebooks, key=lambda cb: cb.field_id)),
        codebook_cutoff=spec.codebook_cutoff,
        summary=field_summary(candidates, unfit, field_info),
    )
    return frozen, codebooks, assignments


def _split_counts(blocks: pd.DataFrame, canonical: pd.DataFrame) -> dict[str, dict[str, int]]:
    """Per split (enum order): its fields, blocks and canonical episodes."""
    out = {}
    for split in Split:
        rows = blocks.loc[blocks["split"] == split.value]
        out[split.value] = {
            "fields": int(rows["field_id"].nunique()),
            "blocks": int(rows["block_id"].nunique()),
            "episodes": int((canonical["split"] == split.value).sum()),
        }
    return out


def _flag_counts(canonical: pd.DataFrame) -> dict[str, int]:
    flags = pd.Series([f for fl in canonical["flags"] for f in fl], dtype=object).value_counts()
    return {str(k): int(v) for k, v in sorted(flags.items())}


def _derived(
    spec: BenchmarkSpec,
    papers: pd.DataFrame,
    codebooks: list[Codebook],
    assignments: pd.DataFrame,
    blocks: pd.DataFrame,
    episodes: pd.DataFrame,
    inputs: dict[str, Any],
) -> dict[str, Any]:
    from rap_benchmark.pipeline.blocks import dev_seed_fields

    canonical = episodes.loc[episodes["policy"] == Policy.CANONICAL.value]
    splits = _split_counts(blocks, canonical)
    instrument, fields_summary = inputs.get("instrument"), inputs.get("fields_summary")
    return {
        **({} if instrument is None else {"instrument": instrument}),
        "corpus": inputs["corpus"],
        "n_papers": len(papers),
        "n_fields": len(codebooks),
        "n_memberships": len(assignments),
        "assignment_type_shares": type_shares(assignments),
        "n_blocks": int(blocks["block_id"].nunique()),
        "dev_seed_fields": list(dev_seed_fields(blocks["field_id"].tolist(), spec)),
        "n_fields_by_split": {s: c["fields"] for s, c in splits.items()},
        "n_blocks_by_split": {s: c["blocks"] for s, c in splits.items()},
        "n_episodes_by_split": {s: c["episodes"] for s, c in splits.items()},
        "canonical_episode_flags": _flag_counts(canonical),
        **({"fields": fields_summary} if fields_summary else {}),
    }


def build_instance(
    spec: BenchmarkSpec,
    out: str | Path,
    source: str | Path | None = None,
    *,
    progress: bool = False,
    instrument: Any = None,
    freeze_instrument: bool = False,
    cache: bool = True,
) -> Path:
    """Build every artifact of an instance into ``out`` (replaced atomically); return ``out``.

    ``instrument``: None for the spec's own (source route: the LLM instrument answered from the
    replies the spec ships, when it names them, e.g. arxiv-sample; else the offline one),
    ``"offline"`` for the offline one, or an ``LLMInstrument`` (source route only).
    ``freeze_instrument`` also writes the frozen offline instrument that ``rap extend`` labels
    with (:mod:`.instrument.frozen`); ``cache`` reuses an offline instrument fitted before on the
    same inputs (:mod:`.instrument.cache`; the same bytes either way).
    """
    if instrument is None and source is not None:
        from rap_benchmark.pipeline.instrument.llm import LLMInstrument

        instrument = LLMInstrument.recorded_for(spec)
    instrument = None if instrument == "offline" else instrument
    if instrument is not None and source is None:
        raise ValueError("the LLM instrument needs a source corpus (the mini route uses its blueprints)")
    compact = instrument is not None and getattr(instrument.config, "construction", None) == "compact"
    if freeze_instrument and (source is None or (instrument is not None and not compact)):
        from rap_benchmark.core.errors import InputError

        raise InputError(
            "--freeze-instrument needs a source corpus and the offline instrument or the compact construction "
            "(mini's fields come from its generator; the paper construction's LLM labels cannot be frozen as weights)"
        )
    from tqdm import tqdm

    from rap_benchmark.pipeline.blocks import split_table
    from rap_benchmark.pipeline.episodes import episode_table, search_manifest

    out = Path(out)
    with (
        replacing_instance(out) as tmp,
        tqdm(
            total=sum(BUILD_STEPS.values()),
            desc=f"build {spec.name}",
            unit="%",
            bar_format=BUILD_BAR,
            disable=not progress,
        ) as steps,
    ):
        steps.set_postfix_str("corpus, fields, codebooks, assignments")
        inputs = (
            _synthetic_inputs(spec, progress)
            if source is None
            else _source_inputs(spec, Path(source), progress, instrument, freeze_instrument, cache)
        )
        papers: pd.DataFrame = inputs["papers"]
        codebooks: list[Codebook] = sorted(inputs["codebooks"], key=lambda cb: cb.field_id)
        assignments = normalise_assignments(inputs["assignments"], papers)
        field_ids = [cb.field_id for cb in codebooks]
        stray = sorted(set(assignments["field_id"]) - set(field_ids))
        if stray:
            raise ValueError(f"assignments for fields without a codebook: {stray[:5]}")
        steps.update(BUILD_STEPS["inputs"])

        steps.set_postfix_str("blocks and split")
        blocks = split_table(assignments, field_ids, spec)
        steps.update(BUILD_STEPS["blocks"])

        steps.set_postfix_str("episodes")
        episodes = episode_table(assignments, blocks, spec)
        steps.update(BUILD_STEPS["episodes"])

        steps.set_postfix_str("search manifest")
        manifest = search_manifest(assignments, field_ids, spec)
        steps.update(BUILD_STEPS["manifest"])

        steps.set_postfix_str("writing artifacts")
        write_table(tmp, "papers", papers)
        write_json(tmp / "codebooks.json", [codebook_to_dict(cb) for cb in codebooks])
        write_table(tmp, "assignments", assignments)
        write_table(tmp, "blocks", blocks)
        write_table(tmp, "episodes", episodes)
        write_table(tmp, "search_manifest", manifest)
        if inputs["truth"] is not None:
            write_table(tmp, "truth", inputs["truth"])
        if inputs.get("parallel") is not None:
            write_table(tmp, "parallel", inputs["parallel"].sort_values(["field_id", "arxiv_id"], kind="stable"))
        if inputs.get("model_labels") is not None:
            write_table(tmp, "model_labels", inputs["model_labels"])
        ledger = spec.ledger()
        ledger["derived"] = _derived(spec, papers, codebooks, assignments, blocks, episodes, inputs)
        if inputs.get("frozen") is not None:
            from rap_benchmark.pipeline.instrument.frozen import instrument_hash, save

            save(inputs["frozen"], tmp)
            ledger["derived"]["frozen_instrument_sha256"] = instrument_hash(tmp)
        write_json(tmp / LEDGER_FILE, ledger)
        steps.update(BUILD_STEPS["write"])

        steps.set_postfix_str("SHA256SUMS")
        write_sums(tmp)
        steps.update(BUILD_STEPS["sums"])
    return out


BUILD_STEPS = {"inputs": 95, "blocks": 1, "episodes": 2, "manifest": 1, "write": 0.5, "sums": 0.5}
"""Each build stage's share of a build's time, in percent (arxiv-sample on 2 cores), so the outer
bar's ETA is the remaining share."""

BUILD_BAR = "{desc}: {percentage:3.0f}%|{bar}| [{elapsed}<{remaining}{postfix}]"


def _spread(values: pd.Series) -> dict[str, float]:
    v = values.to_numpy(dtype=np.float64)
    if v.size == 0:
        return {"min": float("nan"), "median": float("nan"), "max": float("nan")}
    return {"min": float(v.min()), "median": float(np.median(v)), "max": float(v.max())}


def instance_info(instance: Instance) -> dict[str, Any]:
    """The figures ``rap info`` reports, as plain JSON-able values."""
    spec = instance.spec
    episodes = instance.episodes
    canonical = episodes.loc[episodes["policy"] == Policy.CANONICAL.value]
    blocks = instance.blocks
    directions = pd.Series([len(cb.directions) for cb in instance.codebooks.values()], dtype=np.int64)
    fields_summary = instance.ledger.get("derived", {}).get("fields", {})
    split_of = dict(zip(blocks["field_id"], blocks["split"], strict=True))
    return {
        "name": spec.name,
        "benchmark_version": instance.ledger.get("benchmark_version"),  # the instance's: what its scores mean
        "package_version": package_version(),  # the rap_benchmark package reading it
        "manifest_hash": instance.manifest_hash,
        "origins": list(spec.origins),
        "papers": len(instance.papers),
        "fields": len(instance.codebooks),
        "field_list": [
            {"field_id": fid, "name": cb.name, "split": str(split_of.get(fid, ""))}
            for fid, cb in sorted(instance.codebooks.items())
        ],
        "directions_per_field": {str(k): int(v) for k, v in directions.value_counts().sort_index().items()},
        "memberships": len(instance.assignments),
        "assignment_type_shares": type_shares(instance.assignments),
        "blocks": int(blocks["block_id"].nunique()),
        "split": _split_counts(blocks, canonical),
        "episodes": int(len(canonical)),
        "episode_rows": int(len(episodes)),
        "papers_per_window": {"n_x": _spread(canonical["n_x"]), "n_y": _spread(canonical["n_y"])},
        "canonical_flags": _flag_counts(canonical),
        "search_universes": int(len(instance.search_manifest)),
        "papers_per_universe": {
            str(regime): _spread(group["n_papers"])
            for regime, group in instance.search_manifest.groupby("regime", sort=True)
        },
        "instrument": instrument_provenance(instance.ledger),
        "fields_dropped": list(fields_summary.get("dropped", [])),
        "least_cohesive_fields": list(fields_summary.get("least_cohesive", [])),
    }


def instrument_provenance(ledger: dict[str, Any]) -> dict[str, Any]:
    """Who wrote an instance's directions and labels, read from its parameter ledger: the offline
    instrument, or the LLM construction with its model, the replies' provenance (who wrote them,
    when, through what, and what they took) and the distilled labeller's held-out agreement."""
    entry = ledger.get("derived", {}).get("instrument")
    if not entry:
        return {"kind": "offline", "line": "offline (text clusters named from their own phrases; no language model)"}
    config = entry.get("config", {})
    recorded = dict(ledger.get("spec", {}).get("extra", {}).get("llm_instrument", {}).get("provenance", {}))
    out: dict[str, Any] = {
        "kind": "llm",
        "construction": entry.get("construction", "paper"),
        "model": config.get("model"),
        "draft_models": config.get("draft_models"),
        **recorded,
    }
    held = entry.get("compact", {}).get("draft_A", {})
    if held:
        out["held_out_agreement"] = held.get("held_out_agreement")
        out["held_out_agreement_95ci"] = held.get("held_out_agreement_95ci")
        out["held_out_outside_recall"] = held.get("held_out_outside_recall")
    parts = [f"the {out['construction']} LLM construction; model {out['model']}"]
    if recorded.get("written_by"):
        parts.append(f"replies written by {recorded['written_by']}")
    if recorded.get("date"):
        parts.append(f"on {recorded['date']}")
    if recorded.get("via"):
        parts.append(f"through {recorded['via']}")
    if recorded.get("requests"):
        parts.append(
            f"{recorded['requests']:,} requests, {recorded.get('prompt_tokens', 0):,} prompt and "
            f"{recorded.get('completion_tokens', 0):,} completion tokens, {recorded.get('rounds', '?')} rounds"
        )
    if held:
        lo, hi = held.get("held_out_agreement_95ci") or (float("nan"), float("nan"))
        recall = held.get("held_out_outside_recall")
        outside = "" if recall is None else f"; papers the model placed outside the eight: {recall:.3f} placed outside"
        parts.append(
            f"every membership labelled by a classifier distilled from the model's labels (held-out agreement "
            f"{held['held_out_agreement']:.3f} [{lo:.3f}, {hi:.3f}]{outside})"
        )
    if entry.get("replayed_from"):
        parts.append(f"rebuilt offline from the recorded replies {entry['replayed_from']}")
    out["line"] = "; ".join(parts)
    return out


def format_info(info: dict[str, Any]) -> str:
    """``instance_info`` as the readable text ``rap info`` prints."""
    shares = ", ".join(f"{k} {100 * v:.2f}%" for k, v in info["assignment_type_shares"].items())
    dirs = ", ".join(f"{k} directions: {v} fields" for k, v in info["directions_per_field"].items())
    ppw = info["papers_per_window"]
    lines = [
        f"instance           {info['name']}, benchmark version {info['benchmark_version']} (what its scores mean)",
        f"package            rap_benchmark {info['package_version']}",
        f"manifest hash      {info['manifest_hash']}",
        f"instrument         {info['instrument']['line']}",
        f"origins            {', '.join(info['origins'])}",
        f"papers             {info['papers']:,}",
        f"fields             {info['fields']:,} ({dirs})",
        f"memberships        {info['memberships']:,}",
        f"assignment types   {shares}",
        f"blocks             {info['blocks']:,}",
    ]
    for split, row in info["split"].items():
        lines.append(f"{split:<18} {row['fields']:,} fields, {row['blocks']:,} blocks, {row['episodes']:,} episodes")
    lines.append(f"episodes           {info['episodes']:,} (x {len(Policy)} policies = {info['episode_rows']:,} rows)")
    for key, label in (("n_x", "papers in x window"), ("n_y", "papers in y window")):
        s = ppw[key]
        lines.append(
            f"{label:<18} min {s['min']:,.0f}, median {s['median']:,.1f}, max {s['max']:,.0f} (counted, canonical)"
        )
    flags = ", ".join(f"{k} {v}" for k, v in info["canonical_flags"].items()) or "none"
    lines.append(f"flagged episodes   {flags}")
    lines.append(f"search universes   {info['search_universes']:,}")
    for regime, s in info["papers_per_universe"].items():
        lines.append(f"  {regime:<16} min {s['min']:,.0f}, median {s['median']:,.1f}, max {s['max']:,.0f} papers")
    lines.append("field ids          (rap show DIR --field ID prints a field's eight directions)")
    lines.extend(f"  {f['field_id']:<8} {f['split']:<5} {f['name']}" for f in info["field_list"])
    dropped = info.get("fields_dropped", [])
    if dropped:
        lines.append(f"fields dropped     {len(dropped)} candidate(s) could not hold eight directions:")
        lines.extend(f"  {d['name']}: {d['reason']}" for d in dropped)
    least = info.get("least_cohesive_fields", [])
    if least:
        lines.append(f"least cohesive     {len(least)} fields (mean cosine of papers to their field's centre):")
        lines.extend(f"  {d['field_id']} {d['cohesion']:.3f} {d['name']}" for d in least)
    return "\n".join(lines)
