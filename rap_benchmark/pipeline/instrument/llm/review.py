"""The maintainers' review file: per field, the programs, both drafts and their frozen revisions
(with how many papers each direction holds), the anonymous union, the consolidated codebook and
every note (retries, repairs, failures, whatever code merged). Markdown, deterministic."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from rap_benchmark.pipeline.instrument.llm.records import FieldReport, PipelineResult
from rap_benchmark.pipeline.instrument.llm.validate import Draft


def _direction(head: str, d: dict[str, Any], pad: str) -> list[str]:
    """One direction: its heading line and definition, then inclusion, exclusion and exemplars."""
    rows = (("include", d["inclusion"]), ("exclude", d["exclusion"]), ("exemplars", ", ".join(d["exemplars"])))
    return [f"{head}: {d['definition']}", *(f"{pad}- {k}: {v}" for k, v in rows)]


def _directions(dirs: Sequence[dict[str, Any]], held: Sequence[int]) -> list[str]:
    out = []
    for i, d in enumerate(dirs):
        out += _direction(f"{i + 1}. **{d['name']}** (holds {held[i]})", d, "   ")
    return out


def _placed(draft: Draft) -> str:
    """How many papers a draft placed, and in no direction."""
    return f"{len(draft.directions)} directions; {len(draft.papers)} papers placed, {len(draft.unplaced())} in none"


def _field(r: FieldReport) -> list[str]:
    lines = [f"## {r.field_id}: {r.name}", ""]
    lines.append(f"Candidate fields merged: {', '.join(r.sources)}; pre-cutoff papers: {r.n_pre}.")
    lines.append("")
    lines.append(
        f"### Atomic research programs ({r.programs_extracted} extracted, {len(r.programs)} after deduplication)"
    )
    lines += [f"- {p.name}: {p.description} ({len(p.papers)} papers)" for p in r.programs] or ["- none"]
    for which in ("A", "B"):
        lines += ["", f"### Draft {which}"]
        draft = r.drafts.get(which)
        if draft is None:
            lines.append("invalid (see notes)")
            continue
        placed = Draft(draft.directions, r.placed.get(which, draft.papers))
        lines.append(
            f"{_placed(placed)} ({len(draft.papers)} of its sample, {len(placed.papers) - len(draft.papers)} absorbed)"
        )
        lines += _directions(placed.directions, placed.held())
        revised = r.revised.get(which)
        if revised is None:
            continue
        if revised.directions == draft.directions:
            held = ", ".join(f"{i + 1}: {n}" for i, n in enumerate(revised.held()))
            lines += [
                "",
                f"#### Draft {which}, frozen revision: directions unchanged",
                f"{_placed(revised)}; holds {held}",
            ]
        else:
            lines += ["", f"#### Draft {which}, frozen revision", _placed(revised)]
            lines += _directions(revised.directions, revised.held())
    lines += ["", f"### Anonymous union ({len(r.union)} candidates, each with the papers its draft placed in it)"]
    lines += [f"- C{i + 1}. {d['name']} ({n})" for i, (d, n) in enumerate(zip(r.union, r.union_papers, strict=True))]
    lines += [] if r.union else ["- none"]
    lines += ["", "### Consolidated codebook"]
    if r.codebook is None:
        lines.append("none: the field is dropped")
    else:
        for d in r.codebook.directions:
            lines += _direction(f"- **{d.key} {d.name}**", asdict(d), "  ")
    if r.notes:
        lines += ["", "### Notes"] + [f"- {n}" for n in r.notes]
    return lines + [""]


def _compact_field(f: Any) -> list[str]:
    """A field of the compact construction: its drafts with the model's labels per direction and
    the distilled labeller's held-out agreement."""
    from collections import Counter

    lines = [f"## {f.field_id}: {f.name}", ""]
    lines.append(
        f"Candidate fields: {', '.join(f.sources)}; memberships: {len(f.members)}; pre-cutoff papers: {f.n_pre}."
    )
    for which, d in sorted(f.drafts.items()):
        labels = f.labels.get(which, {})
        held = Counter(getattr(a, "primary", "not_in_field") for a in labels.values())
        agree = f.agreement.get(which)
        measured = (
            ""
            if agree is None
            else f"; distilled labeller's held-out agreement {agree.held.agreement:.3f} on {agree.held.n} papers"
            + (
                f", outside the eight {agree.held.outside_recall:.3f} on {agree.held.n_outside}"
                if agree.held.n_outside
                else ""
            )
        )
        lines += ["", f"### Draft {which}: {d.name}", "", d.definition, ""]
        lines.append(f"{len(labels)} papers labelled by the model{measured}.")
        for key, direction in zip(("D0", "D1", "D2", "D3", "D4", "D5", "D6", "D7"), d.directions, strict=True):
            lines += _direction(f"- **{key} {direction['name']}** ({held.get(key, 0)} labelled)", direction, "  ")
        rest = {k: v for k, v in held.items() if not k.startswith("D")}
        if rest:
            lines.append("- not in a direction: " + ", ".join(f"{k} {v}" for k, v in sorted(rest.items())))
    if f.notes:
        lines += ["", "### Notes"] + [f"- {n}" for n in f.notes]
    return lines + [""]


def _stages(result: PipelineResult, stages: dict[str, dict[str, Any]]) -> list[str]:
    """Per stage: requests, retries, truncated replies, refused requests, units lost."""
    lines = [
        "## Requests per stage",
        "",
        "| stage | requests | retries | truncated | refused | units lost |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for stage, row in stages.items():
        d = result.drops.get(stage)
        lost = f"{d.dropped} of {d.units}" if d is not None and d.units else "-"
        lines.append(
            f"| {stage} | {row['requests']} | {row['retries']} | {row['truncated']} | {row['refused']} | {lost} |"
        )
    return [*lines, ""]


def review_markdown(
    result: PipelineResult, header: dict[str, Any], stages: dict[str, dict[str, Any]] | None = None
) -> str:
    lines = ["# LLM codebook construction: review", ""]
    lines += [f"- {k}: {v}" for k, v in header.items()]
    compact = result.compact.fields if result.compact is not None else None
    lines += [
        f"- fields kept: {len(result.codebooks)} of {len(result.reports) if compact is None else len(compact)}",
        f"- memberships labelled: {len(result.assignments)} ({len(result.invalid_assignments)} invalid, kept as "
        f"low_evidence); judged not in the field and left out: {len(result.not_in_field)}",
        "",
    ]
    if stages:
        lines += _stages(result, stages)
    if result.notes:
        lines += ["## Pipeline notes", ""] + [f"- {n}" for n in result.notes] + [""]
    for r in result.reports:
        lines += _field(r)
    for f in compact or []:
        lines += _compact_field(f)
    if result.not_in_field:
        outside = [f"- {x['field_id']} {x['arxiv_id']}" for x in result.not_in_field]
        lines += [*_listed("Memberships judged not in the field (left out)", outside), ""]
    invalid = [f"- {x['field_id']} {x['arxiv_id']}: {x['reason']}" for x in result.invalid_assignments]
    return "\n".join(lines + _listed("Invalid assignments", invalid)) + "\n"


def _listed(heading: str, items: list[str], most: int = 1000) -> list[str]:
    """A section listing at most ``most`` items (none when there is nothing to list)."""
    more = [f"- ... and {len(items) - most} more"] if len(items) > most else []
    return [f"## {heading}", "", *items[:most], *more] if items else []
