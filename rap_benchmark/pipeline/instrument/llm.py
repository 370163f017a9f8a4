"""The LLM path of SPEC 3.2-3.3: codebooks and assignments through an OpenAI-compatible endpoint.

``client`` is ``openai.OpenAI(base_url=..., api_key=...)`` or any object with
``client.chat.completions.create(model=..., messages=..., temperature=...)`` returning an object
with ``choices[0].message.content`` (and optionally ``model`` and ``usage``). Requests use
temperature 0. Prompts are package files (``rap_benchmark/prompts/codebook_*.txt`` and
``assign_*.txt``, ``string.Template`` syntax).

Replies must be one JSON object (optionally inside a single fenced code block) that passes a
strict validator: known keys only, exactly ``D0``..``D7`` where eight directions are due, known
assignment types, exemplar ids among the papers shown. An invalid reply is retried (the
follow-up shows the model its reply and the reason) up to ``max_attempts``; after that the unit
is recorded as invalid with the raw text and the reason. Every request is kept as an
:class:`LLMCall`, so nothing is lost.

Codebook construction (:func:`draft_codebook_llm`): two independent drafts (different models
when ``draft_models`` names two, and the papers in two different orders), an anonymous union of
their candidate directions (sorted by name, draft of origin removed), and a consolidation call
that must return exactly eight directions.
"""

from __future__ import annotations

import json
import re
import string
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from rap_benchmark.core import resources
from rap_benchmark.core.records import DIRECTION_KEYS, Assignment, AssignmentType, Codebook, Direction
from rap_benchmark.pipeline.fields import FieldInfo

__all__ = [
    "InvalidOutput",
    "LLMAssignmentResult",
    "LLMCall",
    "LLMResult",
    "assign_llm",
    "draft_codebook_llm",
    "load_prompt",
    "parse_json_reply",
    "validate_assignment",
    "validate_codebook",
    "validate_draft",
]

_PROMPT_DIR = resources.PROMPTS_DIR
PROMPT_ABSTRACT_CHARS = 400
MIN_DRAFT_DIRECTIONS = 4
MAX_DRAFT_DIRECTIONS = 16
MAX_EXEMPLARS = 5
_DIRECTION_FIELDS = ("name", "definition", "inclusion", "exclusion", "exemplars")


class InvalidOutput(ValueError):
    """A model reply that fails validation; the message is the recorded reason."""


@dataclass(frozen=True)
class LLMCall:
    """One request and its reply (or failure)."""

    step: str  # draft_a, draft_b, consolidate, assign
    attempt: int  # 1-based
    messages: tuple[dict[str, str], ...]
    raw_text: str | None  # None when the request itself failed
    error: str | None  # None when the reply was valid
    response_model: str | None
    prompt_tokens: int
    completion_tokens: int


@dataclass(frozen=True)
class LLMResult:
    """A codebook drafted by the LLM path, or the record of why there is none."""

    field_id: str
    codebook: Codebook | None
    valid: bool
    invalid_reason: str | None
    raw_text: str | None  # the last reply of the step that decided the outcome
    drafts: tuple[tuple[dict[str, Any], ...] | None, tuple[dict[str, Any], ...] | None]
    calls: tuple[LLMCall, ...]


@dataclass(frozen=True)
class LLMAssignmentResult:
    """The LLM instrument's label for one paper-field membership (or the invalid record)."""

    arxiv_id: str
    field_id: str
    assignment: Assignment | None
    valid: bool
    invalid_reason: str | None
    raw_text: str | None
    calls: tuple[LLMCall, ...]


# --------------------------------------------------------------------------------------------
# Prompts
# --------------------------------------------------------------------------------------------


def load_prompt(name: str) -> string.Template:
    """A prompt template shipped in ``rap_benchmark/prompts/<name>.txt``."""
    # a plain path, not importlib.resources: the latter fails under editable installs whose
    # finder adds a path hook to the package's __path__ (NotADirectoryError on Python 3.11)
    return string.Template((_PROMPT_DIR / f"{name}.txt").read_text(encoding="utf-8"))


def _paper_lines(papers: pd.DataFrame) -> str:
    lines = []
    for row in papers.itertuples(index=False):
        abstract = str(row.abstract)
        if len(abstract) > PROMPT_ABSTRACT_CHARS:
            abstract = abstract[:PROMPT_ABSTRACT_CHARS].rstrip() + " ..."
        lines.append(f"[{row.arxiv_id}] {row.title} -- {abstract}")
    return "\n".join(lines)


def _direction_lines(codebook: Codebook) -> str:
    return "\n".join(
        f"{d.key}: {d.name}. {d.definition} Include: {d.inclusion} Exclude: {d.exclusion}" for d in codebook.directions
    )


# --------------------------------------------------------------------------------------------
# Validation (pure)
# --------------------------------------------------------------------------------------------

_FENCE = re.compile(r"^```(?:json)?\s*\n(.*)\n```$", re.DOTALL)


def parse_json_reply(text: str | None) -> dict[str, Any]:
    """The reply's JSON object: the whole text, or a single fenced block that is the whole text."""
    if text is None or not text.strip():
        raise InvalidOutput("empty reply")
    body = text.strip()
    fenced = _FENCE.match(body)
    if fenced:
        body = fenced.group(1).strip()
    try:
        obj = json.loads(body)
    except json.JSONDecodeError as exc:
        raise InvalidOutput(f"not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    if not isinstance(obj, dict):
        raise InvalidOutput(f"expected a JSON object, got {type(obj).__name__}")
    return obj


def _check_keys(obj: dict[str, Any], expected: Sequence[str], where: str) -> None:
    keys = set(obj)
    missing = [k for k in expected if k not in keys]
    extra = sorted(keys - set(expected))
    if missing or extra:
        parts = []
        if missing:
            parts.append(f"missing {', '.join(missing)}")
        if extra:
            parts.append(f"unknown {', '.join(extra)}")
        raise InvalidOutput(f"{where}: {'; '.join(parts)}")


def _direction_payload(obj: Any, allowed_ids: set[str], where: str) -> dict[str, Any]:
    if not isinstance(obj, dict):
        raise InvalidOutput(f"{where}: expected an object")
    _check_keys(obj, _DIRECTION_FIELDS, where)
    for key in _DIRECTION_FIELDS[:4]:
        if not isinstance(obj[key], str) or not obj[key].strip():
            raise InvalidOutput(f"{where}: {key} must be a non-empty string")
    ex = obj["exemplars"]
    if not isinstance(ex, list) or not all(isinstance(e, str) for e in ex):
        raise InvalidOutput(f"{where}: exemplars must be a list of arXiv ids")
    if not 1 <= len(ex) <= MAX_EXEMPLARS:
        raise InvalidOutput(f"{where}: {len(ex)} exemplars (expected 1 to {MAX_EXEMPLARS})")
    unknown = [e for e in ex if e not in allowed_ids]
    if unknown:
        raise InvalidOutput(f"{where}: exemplar ids not among the papers shown: {', '.join(unknown[:5])}")
    if len(set(ex)) != len(ex):
        raise InvalidOutput(f"{where}: duplicate exemplar ids")
    return {k: (obj[k].strip() if isinstance(obj[k], str) else list(obj[k])) for k in _DIRECTION_FIELDS}


def validate_draft(obj: dict[str, Any], allowed_ids: set[str]) -> tuple[dict[str, Any], ...]:
    """A draft: ``{"directions": [...]}`` with 4..16 well-formed, distinctly named directions."""
    _check_keys(obj, ("directions",), "draft")
    dirs = obj["directions"]
    if not isinstance(dirs, list):
        raise InvalidOutput("draft: directions must be a list")
    if not MIN_DRAFT_DIRECTIONS <= len(dirs) <= MAX_DRAFT_DIRECTIONS:
        raise InvalidOutput(
            f"draft: {len(dirs)} directions (expected {MIN_DRAFT_DIRECTIONS} to {MAX_DRAFT_DIRECTIONS})"
        )
    out = tuple(_direction_payload(d, allowed_ids, f"draft direction {i}") for i, d in enumerate(dirs))
    names = [d["name"].casefold() for d in out]
    if len(set(names)) != len(names):
        raise InvalidOutput("draft: duplicate direction names")
    return out


def validate_codebook(obj: dict[str, Any], allowed_ids: set[str], field_info: FieldInfo) -> Codebook:
    """A consolidated codebook: exactly the keys D0..D7, each a well-formed direction."""
    _check_keys(obj, DIRECTION_KEYS, "codebook")
    directions = []
    for key in DIRECTION_KEYS:
        d = _direction_payload(obj[key], allowed_ids, key)
        directions.append(
            Direction(
                key=key,
                name=d["name"],
                definition=d["definition"],
                inclusion=d["inclusion"],
                exclusion=d["exclusion"],
                exemplars=tuple(d["exemplars"]),
            )
        )
    names = [d.name.casefold() for d in directions]
    if len(set(names)) != len(names):
        raise InvalidOutput("codebook: duplicate direction names")
    return Codebook(field_info.field_id, field_info.name, field_info.definition, tuple(directions))


def validate_assignment(obj: dict[str, Any], arxiv_id: str, field_id: str) -> Assignment:
    """An assignment: primary (D0..D7 or other), secondary (key or null), known type, coherent."""
    _check_keys(obj, ("primary", "secondary", "type"), "assignment")
    primary, secondary, kind = obj["primary"], obj["secondary"], obj["type"]
    if primary not in (*DIRECTION_KEYS, "other"):
        raise InvalidOutput(f"assignment: primary {primary!r} is not D0..D7 or other")
    if secondary is not None and secondary not in DIRECTION_KEYS:
        raise InvalidOutput(f"assignment: secondary {secondary!r} is not D0..D7 or null")
    try:
        atype = AssignmentType(kind)
    except ValueError:
        raise InvalidOutput(f"assignment: unknown type {kind!r}") from None
    no_direction = atype in (AssignmentType.OTHER, AssignmentType.LOW_EVIDENCE)
    if no_direction and (primary != "other" or secondary is not None):
        raise InvalidOutput(f"assignment: type {kind} needs primary 'other' and no secondary")
    if not no_direction and primary == "other":
        raise InvalidOutput(f"assignment: type {kind} needs a direction as primary")
    if atype in (AssignmentType.BOUNDARY, AssignmentType.BRIDGE) and (secondary is None or secondary == primary):
        raise InvalidOutput(f"assignment: type {kind} needs a secondary different from the primary")
    if atype is AssignmentType.SINGLE and secondary is not None:
        raise InvalidOutput("assignment: a single-direction paper has no secondary")
    return Assignment(arxiv_id=arxiv_id, field_id=field_id, primary=primary, secondary=secondary, type=atype)


# --------------------------------------------------------------------------------------------
# Requests with retries
# --------------------------------------------------------------------------------------------


def _request(
    client: Any, model: str, messages: list[dict[str, str]]
) -> tuple[str | None, str | None, int, int, str | None]:
    """(content, response model, prompt tokens, completion tokens, request error)."""
    try:
        resp = client.chat.completions.create(model=model, messages=messages, temperature=0.0)
    except Exception as exc:  # noqa: BLE001 - any transport failure is recorded, not raised
        return None, None, 0, 0, f"request failed: {type(exc).__name__}: {exc}"
    content = resp.choices[0].message.content
    usage = getattr(resp, "usage", None)
    return (
        content,
        getattr(resp, "model", None),
        int(getattr(usage, "prompt_tokens", 0) or 0),
        int(getattr(usage, "completion_tokens", 0) or 0),
        None,
    )


def _ask(
    client: Any, model: str, step: str, prompt: str, validate: Any, max_attempts: int
) -> tuple[Any, list[LLMCall], str | None, str | None]:
    """Ask until ``validate(parsed)`` passes; return (value or None, calls, reason, last raw)."""
    if max_attempts < 1:
        raise ValueError("max_attempts must be at least 1")
    messages: list[dict[str, str]] = [{"role": "user", "content": prompt}]
    calls: list[LLMCall] = []
    reason: str | None = None
    raw: str | None = None
    for attempt in range(1, max_attempts + 1):
        content, resp_model, p_tok, c_tok, failure = _request(client, model, messages)
        raw = content
        value = None
        if failure is not None:
            reason = failure
        else:
            try:
                value = validate(parse_json_reply(content))
                reason = None
            except InvalidOutput as exc:
                reason = str(exc)
        calls.append(
            LLMCall(step, attempt, tuple(dict(m) for m in messages), content, reason, resp_model, p_tok, c_tok)
        )
        if reason is None:
            return value, calls, None, raw
        if content is not None:
            messages = [
                *messages,
                {"role": "assistant", "content": content},
                {
                    "role": "user",
                    "content": f"Your reply was invalid: {reason}. Reply again with the JSON object only.",
                },
            ]
    return None, calls, f"invalid after {max_attempts} attempts: {reason}", raw


# --------------------------------------------------------------------------------------------
# Codebooks
# --------------------------------------------------------------------------------------------


def draft_codebook_llm(
    client: Any,
    model: str,
    field_info: FieldInfo,
    exemplar_papers: pd.DataFrame,
    *,
    max_attempts: int = 3,
    draft_models: tuple[str, str] | None = None,
    cutoff: str | None = None,
    seed: int = 0,
) -> LLMResult:
    """Two independent drafts, anonymous union, consolidation to exactly eight (SPEC 3.2).

    ``exemplar_papers``: the field's pre-cutoff papers to show (arxiv_id, title, abstract, and
    date when ``cutoff`` is given: any paper dated on or after ``cutoff`` raises ValueError).
    Draft A sees the papers in the given order, draft B in a seeded permutation; ``draft_models``
    may name a different model for each draft (default: ``model`` for both). The consolidation
    call uses ``model``.
    """
    if exemplar_papers.empty:
        raise ValueError(f"field {field_info.field_id}: no papers to draft from")
    if cutoff is not None:
        late = exemplar_papers["date"].astype(str) >= cutoff
        if late.any():
            raise ValueError(f"{int(late.sum())} papers dated on or after the cutoff {cutoff} were passed")
    ids = set(exemplar_papers["arxiv_id"].astype(str))
    model_a, model_b = draft_models or (model, model)
    perm = np.random.default_rng(seed).permutation(len(exemplar_papers))
    orders = {"draft_a": exemplar_papers, "draft_b": exemplar_papers.iloc[perm]}
    models = {"draft_a": model_a, "draft_b": model_b}
    template = load_prompt("codebook_draft")
    calls: list[LLMCall] = []
    drafts: dict[str, tuple[dict[str, Any], ...] | None] = {}
    reasons: dict[str, str] = {}
    last_raw: str | None = None
    for step, papers in orders.items():
        prompt = template.substitute(
            field_name=field_info.name,
            field_definition=field_info.definition,
            n_papers=len(papers),
            papers=_paper_lines(papers),
        )
        value, step_calls, reason, last_raw = _ask(
            client, models[step], step, prompt, lambda obj: validate_draft(obj, ids), max_attempts
        )
        calls.extend(step_calls)
        drafts[step] = value
        if reason is not None:
            reasons[step] = reason
    pair = (drafts["draft_a"], drafts["draft_b"])
    if all(d is None for d in pair):
        why = "; ".join(f"{k}: {v}" for k, v in reasons.items())
        return LLMResult(field_info.field_id, None, False, f"no valid draft ({why})", last_raw, pair, tuple(calls))

    union = sorted(
        (d for draft in pair if draft is not None for d in draft), key=lambda d: (d["name"].casefold(), d["definition"])
    )
    candidates = "\n".join(
        f"C{i + 1}. {d['name']}: {d['definition']} Include: {d['inclusion']} Exclude: {d['exclusion']} "
        f"Exemplars: {', '.join(d['exemplars'])}"
        for i, d in enumerate(union)
    )
    prompt = load_prompt("codebook_consolidate").substitute(
        field_name=field_info.name,
        field_definition=field_info.definition,
        candidates=candidates,
        papers=_paper_lines(exemplar_papers),
    )
    codebook, step_calls, reason, raw = _ask(
        client, model, "consolidate", prompt, lambda obj: validate_codebook(obj, ids, field_info), max_attempts
    )
    calls.extend(step_calls)
    return LLMResult(field_info.field_id, codebook, codebook is not None, reason, raw, pair, tuple(calls))


# --------------------------------------------------------------------------------------------
# Assignments
# --------------------------------------------------------------------------------------------


def assign_llm(
    client: Any,
    model: str,
    codebook: Codebook,
    papers: pd.DataFrame,
    *,
    max_attempts: int = 3,
    progress: bool = False,
) -> list[LLMAssignmentResult]:
    """Label each paper (arxiv_id, title, abstract) of ``papers`` against ``codebook``.

    One request per paper (temperature 0), validated by :func:`validate_assignment`; results in
    the order of ``papers``. Invalid papers are recorded, never dropped.
    """
    from tqdm import tqdm

    template = load_prompt("assign_paper")
    directions = _direction_lines(codebook)
    out: list[LLMAssignmentResult] = []
    for row in tqdm(papers.itertuples(index=False), total=len(papers), desc="assign", disable=not progress):
        pid = str(row.arxiv_id)
        prompt = template.substitute(
            field_name=codebook.name,
            field_definition=codebook.definition,
            directions=directions,
            arxiv_id=pid,
            title=row.title,
            abstract=row.abstract,
        )
        assignment, calls, reason, raw = _ask(
            client,
            model,
            "assign",
            prompt,
            lambda obj, pid=pid: validate_assignment(obj, pid, codebook.field_id),
            max_attempts,
        )
        out.append(
            LLMAssignmentResult(pid, codebook.field_id, assignment, assignment is not None, reason, raw, tuple(calls))
        )
    return out
