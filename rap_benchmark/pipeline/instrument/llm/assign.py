"""Stage 9 of the construction: every membership labelled against its field's frozen codebook,
several papers per request (primary, secondary, type; :func:`~.validate.validate_label_batch`).

A batch is asked through :func:`~.ask.ask`; a reply that labels some papers badly keeps its
good labels and is asked again about the other papers only (the follow-up quotes the reply and
names each fault once: the key, the paper, the label). A paper still without a valid label after
``max_attempts`` is kept as ``low_evidence`` (never counted) and listed with its reason.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd

from rap_benchmark.core.records import Assignment, AssignmentType, Codebook
from rap_benchmark.core.schemas import ASSIGNMENTS
from rap_benchmark.pipeline.instrument.llm import prompts as P
from rap_benchmark.pipeline.instrument.llm.ask import ask
from rap_benchmark.pipeline.instrument.llm.client import Client
from rap_benchmark.pipeline.instrument.llm.prompts import Stage
from rap_benchmark.pipeline.instrument.llm.records import PipelineConfig
from rap_benchmark.pipeline.instrument.llm.validate import (
    NOT_LABELLED,
    InvalidOutput,
    LabelCheck,
    OutOfField,
    validate_label_batch,
)

TOKENS_PER_PAPER = 60
"""max_tokens per paper of a labels request: a capable model's label (``{"id": "2401.01234",
"primary": "D3", "secondary": null, "type": "single"}``) takes about 30 tokens; 40 left 70 tokens
of headroom over 8 compact labels, and a model that adds a space or a field ran out."""
ASSIGNMENT_COLUMNS = [c for c in ASSIGNMENTS.names if c != "date"]  # the date is joined in by the build


class PartlyLabelled(InvalidOutput):
    """A labels reply that leaves some papers without a valid label (``check`` holds the rest)."""

    def __init__(self, check: LabelCheck) -> None:
        super().__init__(check.message())
        self.check = check


async def label_batch(
    client: Client,
    cfg: PipelineConfig,
    cb: Codebook,
    directions: str,
    papers: str,
    batch: list[str],
    model: str | None = None,
) -> tuple[dict[str, Assignment | OutOfField], dict[str, str]]:
    """(valid label per paper, reason per paper without one) for one batch of ``cb``'s papers,
    asked of ``model`` (default: the configured one).

    A reply cut at max_tokens is asked again once with twice the budget of a full batch: a
    thinking model reasons as long over the one paper left at a field's end as over eight."""
    prompt = P.render(
        Stage.ASSIGN, field_name=cb.name, field_definition=cb.definition, directions=directions, papers=papers
    )
    todo, judged = list(batch), 0
    good: dict[str, Assignment | OutOfField] = {}
    bad: dict[str, str] = {}

    def validate(obj: dict[str, Any]) -> LabelCheck:
        check = validate_label_batch(obj, todo, cb.field_id, batch)
        if check.bad:
            raise PartlyLabelled(check)
        return check

    def settle(fault: InvalidOutput, attempt: int) -> str:
        """Keep the reply's valid labels; ask again about the papers it left without one."""
        nonlocal todo, bad, judged
        if isinstance(fault, PartlyLabelled):
            good.update(fault.check.good)
        wrong = fault.check.reasons() if isinstance(fault, PartlyLabelled) else {p: str(fault) for p in todo}
        judged, prefix = attempt, f"invalid after {attempt} attempts: " if attempt == cfg.max_attempts else ""
        bad = {p: prefix + (f"paper {p} {r}" if r.startswith(NOT_LABELLED) else r) for p, r in wrong.items()}
        todo = [p for p in todo if p in wrong]
        return f", labelling only these papers: {', '.join(todo)}"

    budget = cfg.budget(TOKENS_PER_PAPER * len(batch) + 100)
    wide = cfg.budget(TOKENS_PER_PAPER * cfg.assign_batch + 100)
    out = await ask(
        client, Stage.ASSIGN, model or cfg.model, prompt, validate, cfg, budget=budget, wide=wide, settle=settle
    )
    if out.value is not None:
        return {**good, **out.value.good}, {}
    if out.attempts > judged:  # refused, or cut twice: every paper still to label has its reason
        bad = {p: str(out.reason) for p in todo}
    return good, bad


def assignment_table(
    batches: Sequence[tuple[Codebook, list[str]]],
    results: Sequence[tuple[dict[str, Assignment | OutOfField], dict[str, str]]],
) -> tuple[pd.DataFrame, list[dict[str, str]], list[OutOfField]]:
    """The assignments rows in batch order, the memberships kept as ``low_evidence``, and the
    memberships judged ``not_in_field`` (left out of the rows)."""
    rows: list[tuple[str, str, str, str | None, str]] = []
    invalid: list[dict[str, str]] = []
    outside: list[OutOfField] = []
    for (cb, batch), (good, bad) in zip(batches, results, strict=True):
        for pid in batch:
            a = good.get(pid)
            if isinstance(a, OutOfField):
                outside.append(a)
                continue
            if a is None:
                invalid.append({"field_id": cb.field_id, "arxiv_id": pid, "reason": bad[pid]})
                a = Assignment(pid, cb.field_id, "other", None, AssignmentType.LOW_EVIDENCE)
            rows.append((a.arxiv_id, a.field_id, a.primary, a.secondary, a.type.value))
    return pd.DataFrame(rows, columns=ASSIGNMENT_COLUMNS), invalid, outside
