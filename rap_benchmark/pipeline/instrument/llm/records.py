"""The records of the LLM construction: its configuration, what each stage lost, and the result
the review and the ledger read (:mod:`.stages` fills them)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from rap_benchmark.core.records import Codebook
from rap_benchmark.pipeline.fields import FieldInfo
from rap_benchmark.pipeline.instrument.llm.prompts import Stage
from rap_benchmark.pipeline.instrument.llm.validate import Draft, Program

MAX_TOKENS = {
    Stage.FIELD_NAME: 200,
    Stage.FIELD_MERGE: 4000,
    Stage.PROGRAMS: 2000,
    Stage.PROGRAMS_DEDUPE: 2000,  # groups of programs named alike come to it too
    Stage.DRAFT: 4000,
    Stage.ABSORB: 1500,
    Stage.REVISE: 4000,
    Stage.CONSOLIDATE: 4000,
}


@dataclass(frozen=True)
class PipelineConfig:
    """What the LLM construction asks, and of whom (stored in the ledger)."""

    model: str
    draft_models: tuple[str, str]
    max_attempts: int = 3
    name_titles: int = 30
    program_papers: int = 120
    program_batch: int = 20
    draft_papers: int = 40
    absorb_papers: int = 80
    absorb_batch: int = 20
    assign_batch: int = 8
    abstract_chars: int = 400
    assign_abstract_chars: int = 800
    reasoning_tokens: int = 0  # added to every budget: room for a thinking model's reasoning
    max_tokens_cap: int = 32768  # a truncated reply is re-asked once with twice the budget, at most this
    extra_body: dict[str, Any] = field(default_factory=dict)  # sent with every request (chat_template_kwargs)
    concurrency: int = 64
    construction: str = "paper"  # or "compact" (:mod:`.compact`)
    compact_papers: int = 80  # papers shown to (and labelled by) each compact draft
    compact_abstract_chars: int = 300
    parallel_fields: int = 60  # candidates that get a second, independent compact draft
    label_papers: int = 60  # further papers per field and draft the compact construction has the model label
    label_batch: int = 60
    label_abstract_chars: int = 300
    parallel_shared_labels: bool = True  # draft B's model also labels the papers drawn for draft A

    def to_dict(self) -> dict[str, Any]:
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.__dict__.items() if k != "concurrency"}

    def budget(self, base: int) -> int:
        """max_tokens of a first request whose answer needs about ``base`` tokens."""
        return min(base + self.reasoning_tokens, self.max_tokens_cap)

    def widened(self, budget: int) -> int:
        """The budget of the one re-ask after a reply cut at ``budget``."""
        return min(2 * budget, self.max_tokens_cap)


@dataclass
class Outcome:
    """A unit's value (None when it stayed invalid), the last reason and raw reply, attempts."""

    value: Any
    reason: str | None
    raw: str | None
    attempts: int


@dataclass
class FieldReport:
    """What the review file shows for one field."""

    field_id: str
    name: str
    sources: tuple[str, ...]  # candidate field ids merged into it
    n_pre: int
    programs: list[Program] = field(default_factory=list)
    programs_extracted: int = 0  # before deduplication
    drafts: dict[str, Draft | None] = field(default_factory=dict)  # each with its placement of its sample
    placed: dict[str, dict[str, int | None]] = field(default_factory=dict)  # its sample and the absorbed papers
    revised: dict[str, Draft | None] = field(default_factory=dict)  # frozen, with its placement of the same papers
    union: list[dict[str, Any]] = field(default_factory=list)
    union_papers: list[int] = field(default_factory=list)  # how many papers each candidate's draft placed in it
    codebook: Codebook | None = None
    notes: list[str] = field(default_factory=list)
    repaired: bool = False  # the codebook comes from the deterministic repair of a consolidation


@dataclass
class PipelineResult:
    codebooks: list[Codebook]
    field_info: dict[str, FieldInfo]
    memberships: pd.DataFrame
    assignments: pd.DataFrame
    reports: list[FieldReport]
    invalid_assignments: list[dict[str, str]]
    notes: list[str]
    drops: dict[str, StageDrops] = field(default_factory=dict)
    not_in_field: list[dict[str, str]] = field(default_factory=list)  # memberships judged wrong, left out
    compact: Any = None  # the compact construction's fields, labeller and parallel slots (.compact.CompactOutcome)


@dataclass
class StageDrops:
    """Of a stage's units (a field to name, a batch, a draft, a membership to label), how many
    stayed without a valid answer, and the first reasons why."""

    units: int = 0
    dropped: int = 0
    reasons: list[str] = field(default_factory=list)

    def add(self, n: int = 1, dropped: int = 0, reason: str | None = None) -> None:
        self.units += n
        self.dropped += dropped
        if reason is not None and len(self.reasons) < 3 and reason not in self.reasons:
            self.reasons.append(reason)

    @property
    def share(self) -> float:
        return self.dropped / self.units if self.units else 0.0


class StageLost(Exception):
    """A stage left more than the allowed share of its units without a valid answer."""

    def __init__(self, stage: str, drops: StageDrops) -> None:
        super().__init__(stage)
        self.stage = stage
        self.drops = drops


def stage_sizes(result: PipelineResult) -> dict[str, Any]:
    """Summary figures of a finished pipeline (ledger and CLI)."""
    types = result.assignments["type"].value_counts()
    return {
        "fields": len(result.codebooks),
        "memberships": len(result.assignments),
        "invalid_assignments": len(result.invalid_assignments),
        "not_in_field": len(result.not_in_field),
        "type_counts": {str(k): int(v) for k, v in sorted(types.items())},
        "repaired_consolidations": sorted(r.field_id for r in result.reports if r.repaired),
        "dropped_fields": sorted(r.field_id for r in result.reports if r.codebook is None),
        "mean_draft_size": float(
            np.mean([len(d.directions) for r in result.reports for d in r.revised.values() if d is not None] or [0.0])
        ),
    }
