"""The pipeline's prompts: package files (``rap_benchmark/prompts/<name>.txt``, ``string.Template``)
and the line formats they are filled with. The parsers at the end read those lines back (the
stand-in replies of the dry run and the scripted server use them).
"""

from __future__ import annotations

import hashlib
import re
import string
from collections.abc import Iterable, Sequence
from enum import StrEnum
from functools import cache
from typing import Any

from rap_benchmark.core import resources
from rap_benchmark.core.records import Codebook
from rap_benchmark.pipeline.phrases import listing

PROMPT_VERSION = 2  # of the prompt set, recorded in the ledger beside each file's sha256


class Stage(StrEnum):
    """The pipeline's stages, in order (each has one prompt file)."""

    FIELD_NAME = "field_name"
    FIELD_MERGE = "field_merge"
    PROGRAMS = "programs"
    PROGRAMS_DEDUPE = "programs_dedupe"
    DRAFT = "draft"
    ABSORB = "absorb"
    REVISE = "revise"
    CONSOLIDATE = "consolidate"
    ASSIGN = "assign"
    COMPACT_DRAFT = "compact_draft"  # the compact construction: a field's codebook and sample labels at once


TASKS = {
    Stage.FIELD_NAME: "field_name",
    Stage.FIELD_MERGE: "field_merge",
    Stage.PROGRAMS: "programs_extract",
    Stage.PROGRAMS_DEDUPE: "programs_dedupe",
    Stage.DRAFT: "codebook_draft",
    Stage.ABSORB: "codebook_absorb",
    Stage.REVISE: "codebook_revise",
    Stage.CONSOLIDATE: "codebook_consolidate",
    Stage.ASSIGN: "assign_papers",
    Stage.COMPACT_DRAFT: "compact_draft",
}
"""Pipeline stage -> prompt file."""


@cache
def load_prompt(name: str) -> string.Template:
    """A prompt template shipped in ``rap_benchmark/prompts/<name>.txt``."""
    return string.Template((resources.PROMPTS_DIR / f"{name}.txt").read_text(encoding="utf-8"))


def prompt_hashes() -> dict[str, str]:
    """sha256 of every prompt file the pipeline uses (recorded in the ledger)."""
    return {
        name: hashlib.sha256((resources.PROMPTS_DIR / f"{name}.txt").read_bytes()).hexdigest()
        for name in sorted(TASKS.values())
    }


def render(stage: Stage, **values: Any) -> str:
    return load_prompt(TASKS[stage]).substitute(**values)


def _cut(text: str, limit: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit].rstrip() + " ..."


def paper_lines(rows: Iterable[tuple[str, str, str]], abstract_chars: int | None) -> str:
    """``[id] title -- abstract`` per paper (abstract cut), or ``[id] title`` when chars is None."""
    if abstract_chars is None:
        return "\n".join(f"[{pid}] {' '.join(str(title).split())}" for pid, title, _ in rows)
    return "\n".join(f"[{pid}] {' '.join(str(t).split())} -- {_cut(a, abstract_chars)}" for pid, t, a in rows)


def direction_line(label: str, d: dict[str, Any], papers: int | None = None) -> str:
    line = (
        f"{label}. {d['name']}: {d['definition']} Include: {d['inclusion']} Exclude: {d['exclusion']} "
        f"Exemplars: {', '.join(d['exemplars'])}"
    )
    return line if papers is None else f"{line} Papers: {papers}"


def corpus_description(categories: Sequence[str]) -> str:
    """The corpus as the field-naming prompt names it: the spec's arXiv categories."""
    return listing(list(categories)) or "any category"


def merged_line(names: Sequence[tuple[str, str]]) -> str:
    """The field-naming prompt's note on a merged field: the names and definitions it merges."""
    if not names:
        return ""
    listed = "; ".join(f'"{n}" ({d.rstrip(".")})' for n, d in names)
    return (
        f"It merges candidate fields that were named separately: {listed}. Give the merged field one name "
        "that covers all of them.\n"
    )


def codebook_lines(codebook: Codebook) -> str:
    return "\n".join(
        f"{d.key}: {d.name}. {d.definition} Include: {d.inclusion} Exclude: {d.exclusion}" for d in codebook.directions
    )


# -- reading the lines back (stand-in replies) ------------------------------------------------

_TASK = re.compile(r"^# Task: (.+)$", re.MULTILINE)
_PAPER = re.compile(r"^\[([^\]\s]+)\] (.*?)(?: -- .*)?$", re.MULTILINE)
_DIRECTION = re.compile(
    r"^(C?\d+)\. (.+?): (.+?) Include: (.+?) Exclude: (.+?) Exemplars: ([^\n]*?)(?: Papers: \d+)?$", re.MULTILINE
)
_PROGRAM = re.compile(r"^(P\d+)\. (.+?): ", re.MULTILINE)
_FIELD = re.compile(r"^([A-Za-z0-9_.-]+): (.+?)\. ", re.MULTILINE)


@cache
def _stage_by_heading() -> dict[str, Stage]:
    """The stage of each prompt file's ``# Task:`` heading."""
    return {_TASK.search(load_prompt(name).template).group(1).strip(): s for s, name in TASKS.items()}  # type: ignore[union-attr]


def task_of(prompt: str) -> Stage | None:
    """The stage whose prompt ``prompt`` is (by its ``# Task:`` heading), or None."""
    m = _TASK.search(prompt)
    return _stage_by_heading().get(m.group(1).strip()) if m else None


def papers_in(prompt: str) -> list[tuple[str, str]]:
    return [(m.group(1), m.group(2)) for m in _PAPER.finditer(prompt)]


def directions_in(prompt: str) -> list[dict[str, Any]]:
    return [
        {
            "label": m.group(1),
            "name": m.group(2),
            "definition": m.group(3),
            "inclusion": m.group(4),
            "exclusion": m.group(5),
            "exemplars": [e for e in m.group(6).split(", ") if e],
        }
        for m in _DIRECTION.finditer(prompt)
    ]


def programs_in(prompt: str) -> list[tuple[str, str]]:
    return [(m.group(1), m.group(2)) for m in _PROGRAM.finditer(prompt)]


def fields_in(prompt: str) -> list[tuple[str, str]]:
    return [(m.group(1), m.group(2)) for m in _FIELD.finditer(prompt)]
