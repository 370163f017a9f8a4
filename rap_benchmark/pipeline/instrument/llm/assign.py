"""Stage 9 of the construction: every membership labelled against its field's frozen codebook,
several papers per request (primary, secondary, type; :func:`~.validate.validate_label_batch`).

A batch whose reply labels some papers badly is asked again about those papers only (the
follow-up quotes the reply and names each fault once: the key, the paper, the label); a paper still without a valid label after
``max_attempts`` is kept as ``low_evidence`` (never counted) and listed with its reason.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd

from rap_benchmark.core.records import Assignment, AssignmentType, Codebook
from rap_benchmark.core.schemas import ASSIGNMENTS
from rap_benchmark.pipeline.instrument.llm import prompts as P
from rap_benchmark.pipeline.instrument.llm.prompts import Stage
from rap_benchmark.pipeline.instrument.llm.validate import (
    NOT_LABELLED,
    InvalidOutput,
    OutOfField,
    parse_json_reply,
    truncation_reason,
    validate_label_batch,
)

TOKENS_PER_PAPER = 40
ASSIGNMENT_COLUMNS = [c for c in ASSIGNMENTS.names if c != "date"]  # the date is joined in by the build


async def label_batch(
    client: Any, cfg: Any, cb: Codebook, directions: str, papers: str, batch: list[str]
) -> tuple[dict[str, Assignment | OutOfField], dict[str, str]]:
    """(valid label per paper, reason per paper without one) for one batch of ``cb``'s papers.

    ``cfg`` is the pipeline's config (model, max_attempts, budgets). A reply cut at max_tokens is
    asked again once, as is, with twice the budget of a full batch (not one of the attempts): a
    thinking model reasons as long over the one paper left at a field's end as over eight."""
    prompt = P.render(
        Stage.ASSIGN, field_name=cb.name, field_definition=cb.definition, directions=directions, papers=papers
    )
    messages = [{"role": "user", "content": prompt}]
    good: dict[str, Assignment | OutOfField] = {}
    bad: dict[str, str] = {}
    todo = list(batch)
    budget = cfg.budget(TOKENS_PER_PAPER * len(batch) + 100)
    widened = False
    attempt = 0
    while attempt < cfg.max_attempts:
        reply = await client.complete(Stage.ASSIGN, cfg.model, messages, budget, retry=attempt > 0 or widened)
        if reply.error is not None:
            bad.update({p: f"request refused: {reply.error}" for p in todo})
            break
        try:
            check = validate_label_batch(parse_json_reply(reply.content), todo, cb.field_id, batch)
            wrong, message = check.bad, check.message()
            if check.faults:  # a paper not labelled because its label went to an id that was not shown
                why = f"{NOT_LABELLED} ({'; '.join(check.faults)})"
                wrong = {p: why if r == NOT_LABELLED else r for p, r in wrong.items()}
        except InvalidOutput as exc:
            check, wrong, message = None, {p: str(exc) for p in todo}, str(exc)
        if wrong and reply.truncated:
            if widened or budget >= cfg.max_tokens_cap:
                bad.update({p: truncation_reason(reply, budget) for p in todo})
                break
            full = cfg.budget(TOKENS_PER_PAPER * cfg.assign_batch + 100)
            widened, budget = True, cfg.widened(max(budget, full))
            continue
        if check is not None:
            good.update(check.good)
        attempt += 1
        last = attempt == cfg.max_attempts
        bad = {p: _reason(p, r, attempt, last) for p, r in wrong.items()}
        todo = [p for p in todo if p in wrong]
        if not todo:
            break
        messages = [
            *messages,
            {"role": "assistant", "content": reply.content or ""},
            {
                "role": "user",
                "content": f"Your reply was invalid: {message}. Reply again with the JSON object only, labelling only "
                f"these papers: {', '.join(todo)}.",
            },
        ]
    return good, bad


def _reason(pid: str, reason: str, attempt: int, last: bool) -> str:
    if reason.startswith(NOT_LABELLED):
        reason = f"paper {pid} {reason}"
    return f"invalid after {attempt} attempts: {reason}" if last else reason


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
