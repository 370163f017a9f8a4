"""Model-facing prompts for the RAP conditions, filled from package template files.

Templates live in ``rap_benchmark/prompts/*.txt`` (package data) and use ``$name`` placeholders
(``string.Template``), so JSON braces in the text need no escaping. A prompt holds the field's
definition, its eight written directions (name, definition, inclusion, exclusion), the origin T,
the task window and the answer format. It never holds the target y.

``PROMPT_VERSION`` changes whenever the wording of any template changes; every run records it.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence
from enum import StrEnum
from functools import cache
from string import Template

from rap_benchmark.core import resources
from rap_benchmark.core.dates import add_months, parse_date
from rap_benchmark.core.records import DIRECTION_KEYS, Codebook, Condition, Regime, Task
from rap_benchmark.core.spec import BenchmarkSpec

PROMPTS_DIR = resources.PROMPTS_DIR
"""Package data folder of the templates (a plain folder path: works for editable and wheel installs)."""

PROMPT_VERSION = "rap-prompts-1.2"
"""Version of the template wording (bump on any change to a template file)."""

ANSWER_PREFILL = '{"D0": '
"""The opening of the final answer written into the assistant turn when answer prefill is on."""
PREFILLED_ANSWER_STOPS: tuple[str, ...] = ("}",)
"""A prefilled answer stops where its (flat) JSON object closes."""


class Evidence(StrEnum):
    """What the task prompt says about the evidence available to the model."""

    CLOSED = "closed"  # A0: no tools
    FIXED = "fixed"  # A1/A2: Search over [T-6mo, T)
    EXPANDING = "expanding"  # A3/A4: Search over everything before T

    @classmethod
    def for_condition(cls, condition: Condition) -> Evidence:
        regime = Condition(condition).regime
        if regime is None:
            return cls.CLOSED
        return cls.FIXED if regime is Regime.FIXED else cls.EXPANDING


@cache
def template(name: str) -> Template:
    """The package template ``rap_benchmark/prompts/<name>.txt`` (trailing newline stripped)."""
    text = (PROMPTS_DIR / f"{name}.txt").read_text(encoding="utf-8")
    return Template(text.rstrip("\n"))


def fill(name: str, **values: object) -> str:
    """Fill a template; a missing placeholder raises KeyError naming it."""
    return template(name).substitute({k: str(v) for k, v in values.items()})


EXAMPLE_TITLES = 2
"""Exemplar titles shown per direction (when the codebook records them)."""


def format_directions(codebook: Codebook) -> str:
    """The eight written directions, one block each, in D0..D7 order: name, definition,
    inclusion, exclusion and (when recorded) the first two exemplar titles."""
    blocks = []
    for d in codebook.directions:
        block = (
            f"{d.key}. {d.name}\n"
            f"    Definition: {d.definition}\n"
            f"    Includes: {d.inclusion}\n"
            f"    Excludes: {d.exclusion}"
        )
        if d.exemplar_titles:
            shown = "; ".join(f"\u201c{t}\u201d" for t in d.exemplar_titles[:EXAMPLE_TITLES])
            block += f"\n    Examples: {shown}"
        blocks.append(block)
    return "\n".join(blocks)


def task_window(task: Task, origin: dt.date, spec: BenchmarkSpec) -> tuple[dt.date, dt.date]:
    """[T, T+6mo) for Forecast, [T-6mo, T) for State."""
    if Task(task) is Task.FORECAST:
        return origin, add_months(origin, spec.window_months)
    return add_months(origin, -spec.window_months), origin


def evidence_text(evidence: Evidence, origin: dt.date, spec: BenchmarkSpec, *, max_calls: int | None = None) -> str:
    calls = spec.max_search_calls if max_calls is None else max_calls
    return fill(
        f"evidence_{Evidence(evidence).value}",
        origin=origin.isoformat(),
        universe_start=add_months(origin, -spec.window_months).isoformat(),
        top_k=spec.top_k,
        max_calls=calls,
    )


def task_prompt(codebook: Codebook, origin: dt.date | str, task: Task, spec: BenchmarkSpec, *, evidence: str) -> str:
    """The user message of a unit: field, directions, origin, task, evidence paragraph, format."""
    origin = parse_date(origin)
    start, end = task_window(task, origin, spec)
    return fill(
        Task(task).value,
        field_name=codebook.name,
        field_definition=codebook.definition,
        directions=format_directions(codebook),
        origin=origin.isoformat(),
        target_start=start.isoformat(),
        target_end=end.isoformat(),
        evidence=evidence,
        answer_format=fill("answer_format"),
    )


def condition_prompt(
    codebook: Codebook,
    origin: dt.date | str,
    condition: Condition,
    spec: BenchmarkSpec,
    *,
    max_calls: int | None = None,
) -> str:
    """The native prompt of a condition A0-A4."""
    origin = parse_date(origin)
    condition = Condition(condition)
    ev = evidence_text(Evidence.for_condition(condition), origin, spec, max_calls=max_calls)
    return task_prompt(codebook, origin, condition.task, spec, evidence=ev)


def initial_messages(user_prompt: str) -> list[dict[str, object]]:
    return [{"role": "system", "content": fill("system")}, {"role": "user", "content": user_prompt}]


def nudge_message(reason: str, *, tools_available: bool) -> str:
    expected = (
        "a single search tool call or the final JSON answer"
        if tools_available
        else "the final JSON answer only: one JSON object with exactly the keys D0 to D7 and percentages summing to 100"
    )
    return fill("nudge", reason=reason, expected=expected)


def format_answer(weights: Sequence[float], *, decimals: int = 2) -> str:
    """A final answer in the required format: percentages for D0..D7 summing to 100.

    Rounded to ``decimals`` places with the rounding residue put on the largest weight, so the
    printed numbers sum to exactly 100 (up to float formatting).
    """
    w = [max(0.0, float(v)) for v in weights]
    if len(w) != len(DIRECTION_KEYS):
        raise ValueError(f"need {len(DIRECTION_KEYS)} weights, got {len(w)}")
    total = sum(w)
    if total <= 0:
        w, total = [1.0] * len(DIRECTION_KEYS), float(len(DIRECTION_KEYS))
    pct = [round(100.0 * v / total, decimals) for v in w]
    top = max(range(len(pct)), key=lambda i: (pct[i], -i))
    pct[top] = round(pct[top] + (100.0 - sum(pct)), decimals)
    return json.dumps(dict(zip(DIRECTION_KEYS, pct, strict=True)))
