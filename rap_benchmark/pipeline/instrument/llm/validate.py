"""Validation of every LLM reply of the construction pipeline (pure functions).

Each validator takes the parsed JSON object and what the prompt showed and returns a typed value
or raises :class:`InvalidOutput`, whose message is shown to the model on a retry and recorded when
the retries run out. Unknown keys are rejected everywhere.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from rap_benchmark.core.records import DIRECTION_KEYS, N_DIRECTIONS, Assignment, AssignmentType, Codebook, Direction

MIN_DRAFT_DIRECTIONS = 4
MAX_DRAFT_DIRECTIONS = 16
MAX_EXEMPLARS = 5
MAX_PROGRAMS_PER_BATCH = 12
MAX_FIELD_NAME_WORDS = 8
DIRECTION_FIELDS = ("name", "definition", "inclusion", "exclusion", "exemplars")
_KEY = re.compile(r"^D(\d+)$")


class InvalidOutput(ValueError):
    """A model reply that fails validation; the message is the recorded reason."""


_LEADING_THINK = re.compile(r"\s*<think>(.*?)</think>", re.DOTALL | re.IGNORECASE)
_LEADING_OPEN = re.compile(r"\s*<think>", re.IGNORECASE)
_THINK_END = re.compile(r"</think>", re.IGNORECASE)
_DECODER = json.JSONDecoder()
MAX_JSON_STARTS = 64  # '{' positions tried before a reply is declared to hold no JSON object


def split_reasoning(text: str | None) -> tuple[str | None, str | None]:
    """(answer, reasoning) of a reply with inline ``<think>`` blocks (any case). Reasoning comes
    first: only blocks that open the reply are reasoning (a ``<think>`` inside the answer's JSON
    strings or a trailing note is text). A lone closing ``</think>`` (Qwen3's template opens the
    block in the prompt) cuts everything before it (:func:`_lone_close`); an unclosed ``<think>``
    that opens the reply (cut while thinking) leaves no answer."""
    if text is None:
        return None, None
    parts, rest = [], text
    while block := _LEADING_THINK.match(rest):
        parts.append(block.group(1))
        rest = rest[block.end() :]
    if not parts and (end := _lone_close(rest)) is not None:
        parts.append(rest[: end.start()])
        rest = rest[end.end() :]
    opened = _LEADING_OPEN.match(rest)
    if opened:
        parts.append(rest[opened.end() :])
        rest = ""
    if not parts:
        return text, None
    reasoning = "\n".join(p.strip() for p in parts if p.strip()) or None
    return rest.strip(), reasoning


def _lone_close(text: str) -> re.Match[str] | None:
    """The last ``</think>`` of ``text`` that ends reasoning: outside the reply's first complete
    JSON object (a tag inside its strings is text) and with a ``{`` after it (a tag in a trailing
    note ends nothing)."""
    ends = list(_THINK_END.finditer(text))
    if not ends:  # a plain reply: nothing to cut, no object to read twice
        return None
    _, why, span = _first_object(text)
    for end in reversed(ends):
        inside = why is None and span[0] < end.start() < span[1]
        if not inside and "{" in text[end.end() :]:
            return end
    return None


_STRING_OR_TRAILING_COMMA = re.compile(r'("(?:\\.|[^"\\])*(?:"|\\?\Z))|,([ \t\r\n]*[}\]])', re.S)
"""A string (an unclosed one runs to the end, as the old character loop read it), or a trailing comma."""


def _drop_trailing_commas(text: str) -> str:
    """``text`` without commas that directly precede ``}`` or ``]`` outside strings."""
    return _STRING_OR_TRAILING_COMMA.sub(lambda m: m.group(1) or m.group(2), text)


def _first_object(text: str) -> tuple[Any, str | None, tuple[int, int]]:
    """(the first complete JSON value that starts at a ``{`` of ``text``, None, its span) or
    (None, why not, (0, 0)); a value read without its trailing commas spans to the end."""
    pos = text.find("{")
    if pos < 0:
        return None, "no JSON object in the reply", (0, 0)
    end = len(text.rstrip())
    for _ in range(MAX_JSON_STARTS):
        if pos < 0:
            break
        try:
            value, stop = _DECODER.raw_decode(text, pos)
            return value, None, (pos, stop)
        except json.JSONDecodeError as exc:
            if exc.pos >= end:  # the value runs to the end of the reply: cut off, nothing after it
                return None, "the reply ends inside its JSON object (cut off before it was complete)", (0, 0)
        try:  # a trailing comma, the one slip that does not change what the object says
            return _DECODER.raw_decode(_drop_trailing_commas(text[pos:]))[0], None, (pos, len(text))
        except json.JSONDecodeError:
            pass
        pos = text.find("{", pos + 1)
    return None, "no complete JSON object in the reply", (0, 0)


def parse_json_reply(text: str | None) -> dict[str, Any]:
    """The reply's JSON object, read leniently for strict validation: the first complete object
    is the answer, whatever wraps it (a fence, a preamble, a trailing note, a ``<think>`` block, a
    trailing comma)."""
    answer, _ = split_reasoning(text)
    if answer is None or not answer.strip():
        if text is not None and _LEADING_OPEN.match(text) and not _THINK_END.search(text):
            raise InvalidOutput("no answer: the reply is an unclosed <think> block (cut while reasoning)")
        raise InvalidOutput("empty reply")
    body = answer.strip()
    try:
        obj = orjson.loads(body)
    except orjson.JSONDecodeError:
        obj, why, _ = _first_object(body)
        if why is not None:
            start = " ".join(body[:60].split())
            raise InvalidOutput(f"not valid JSON: {why} (it starts {start!r})") from None
    if not isinstance(obj, dict):
        raise InvalidOutput(f"expected a JSON object, got {type(obj).__name__}")
    return obj


def check_keys(obj: dict[str, Any], expected: Sequence[str], where: str) -> None:
    keys = set(obj)
    missing = [k for k in expected if k not in keys]
    extra = sorted(keys - set(expected))
    if missing or extra:
        parts = []
        if missing:
            parts.append("missing key " + ", ".join(repr(k) for k in missing))
        if extra:
            parts.append("unexpected key " + ", ".join(repr(k) for k in extra))
        raise InvalidOutput(f"{where}: {'; '.join(parts)} (expected keys: {', '.join(expected)})")


def _text(obj: dict[str, Any], key: str, where: str) -> str:
    value = obj[key]
    if not isinstance(value, str) or not value.strip():
        raise InvalidOutput(f"{where}: {key} must be a non-empty string")
    return " ".join(value.split())


def _ids(value: Any, allowed: set[str] | frozenset[str], where: str, *, lo: int, hi: int) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(e, str) for e in value):
        raise InvalidOutput(f"{where}: expected a list of arXiv ids")
    if not lo <= len(value) <= hi:
        raise InvalidOutput(f"{where}: {len(value)} ids (expected {lo} to {hi})")
    unknown = [e for e in value if e not in allowed]
    if unknown:
        raise InvalidOutput(f"{where}: ids not among the papers shown: {', '.join(unknown[:5])}")
    if len(set(value)) != len(value):
        raise InvalidOutput(f"{where}: duplicate ids")
    return tuple(value)


def _unique_names(names: Sequence[str], where: str) -> None:
    folded = [n.casefold() for n in names]
    if len(set(folded)) != len(folded):
        dup = sorted({n for n in folded if folded.count(n) > 1})
        raise InvalidOutput(f"{where}: duplicate direction names: {', '.join(dup[:3])}")


# -- fields -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class FieldName:
    name: str
    definition: str


def validate_field_name(obj: dict[str, Any]) -> FieldName:
    """``{"name": <2..8 words>, "definition": <sentence>}``."""
    check_keys(obj, ("name", "definition"), "field")
    name = _text(obj, "name", "field")
    if not 1 <= len(name.split()) <= MAX_FIELD_NAME_WORDS:
        raise InvalidOutput(f"field: name has {len(name.split())} words (expected 1 to {MAX_FIELD_NAME_WORDS})")
    return FieldName(name, _text(obj, "definition", "field"))


def validate_groups(obj: dict[str, Any], allowed: Sequence[str], where: str) -> tuple[tuple[str, ...], ...]:
    """``{"groups": [[id, id, ...], ...]}``: disjoint groups of at least two known ids."""
    check_keys(obj, ("groups",), where)
    groups = obj["groups"]
    if not isinstance(groups, list):
        raise InvalidOutput(f"{where}: groups must be a list")
    known = set(allowed)
    seen: set[str] = set()
    out = []
    for i, group in enumerate(groups):
        if not isinstance(group, list) or not all(isinstance(g, str) for g in group) or len(group) < 2:
            raise InvalidOutput(f"{where}: group {i} must be a list of at least two ids")
        unknown = [g for g in group if g not in known]
        if unknown:
            raise InvalidOutput(f"{where}: group {i} names unknown ids {', '.join(unknown[:5])}")
        if seen.intersection(group) or len(set(group)) != len(group):
            raise InvalidOutput(f"{where}: groups must be disjoint (an id appears twice)")
        seen.update(group)
        out.append(tuple(sorted(group)))
    return tuple(sorted(out))


@dataclass(frozen=True)
class NamedGroup:
    """A group of ids that are one thing, with the one name and description that cover them."""

    ids: tuple[str, ...]
    name: str
    description: str


def validate_named_groups(obj: dict[str, Any], allowed: Sequence[str], where: str) -> tuple[NamedGroup, ...]:
    """``{"groups": [{"ids": [...], "name", "description"}]}``: disjoint groups of at least two
    known ids, each named (1..8 words) and described."""
    check_keys(obj, ("groups",), where)
    groups = obj["groups"]
    if not isinstance(groups, list):
        raise InvalidOutput(f"{where}: groups must be a list")
    for i, g in enumerate(groups):
        if not isinstance(g, dict):
            raise InvalidOutput(f"{where}: group {i} must be an object with ids, name and description")
        check_keys(g, ("ids", "name", "description"), f"{where} group {i}")
    ids = validate_groups({"groups": [g["ids"] for g in groups]}, allowed, where)
    out = []
    for i, g in enumerate(groups):
        name = _text(g, "name", f"{where} group {i}")
        if len(name.split()) > MAX_FIELD_NAME_WORDS:
            raise InvalidOutput(f"{where} group {i}: name has {len(name.split())} words (at most 8)")
        out.append(NamedGroup(tuple(sorted(g["ids"])), name, _text(g, "description", f"{where} group {i}")))
    assert sorted(o.ids for o in out) == list(ids)
    return tuple(sorted(out, key=lambda o: o.ids))


# -- atomic research programs -----------------------------------------------------------------


@dataclass(frozen=True)
class Program:
    """An atomic research program: a short name, a description and the papers that show it."""

    name: str
    description: str
    papers: tuple[str, ...]


def validate_programs(obj: dict[str, Any], allowed: set[str] | frozenset[str]) -> tuple[Program, ...]:
    """``{"programs": [{"name", "description", "papers"}]}``: 1..12 programs, ids among those shown."""
    check_keys(obj, ("programs",), "programs")
    items = obj["programs"]
    if not isinstance(items, list) or not 1 <= len(items) <= MAX_PROGRAMS_PER_BATCH:
        n = len(items) if isinstance(items, list) else "no"
        raise InvalidOutput(f"programs: {n} programs (expected 1 to {MAX_PROGRAMS_PER_BATCH})")
    out = []
    for i, item in enumerate(items):
        where = f"program {i}"
        if not isinstance(item, dict):
            raise InvalidOutput(f"{where}: expected an object")
        check_keys(item, ("name", "description", "papers"), where)
        papers = _ids(item["papers"], allowed, f"{where}: papers", lo=1, hi=len(allowed))
        out.append(Program(_text(item, "name", where), _text(item, "description", where), papers))
    _unique_names([p.name for p in out], "programs")
    return tuple(out)


# -- drafts, absorption, consolidation ---------------------------------------------------------


def direction_payload(obj: Any, allowed: set[str] | frozenset[str], where: str) -> dict[str, Any]:
    """One direction object: the five documented keys, texts non-empty, 1..5 exemplars shown."""
    if not isinstance(obj, dict):
        raise InvalidOutput(f"{where}: expected an object")
    check_keys(obj, DIRECTION_FIELDS, where)
    out: dict[str, Any] = {k: _text(obj, k, where) for k in DIRECTION_FIELDS[:4]}
    out["exemplars"] = list(_ids(obj["exemplars"], allowed, f"{where}: exemplars", lo=1, hi=MAX_EXEMPLARS))
    return out


@dataclass(frozen=True)
class Draft:
    """A draft or a frozen revision: its directions, and the direction (1-based) it places each
    paper it was shown in (None: no direction fits the paper)."""

    directions: tuple[dict[str, Any], ...]
    papers: dict[str, int | None]

    def held(self) -> list[int]:
        """How many of the placed papers each direction holds (in direction order)."""
        counts = [0] * len(self.directions)
        for d in self.papers.values():
            if d is not None:
                counts[d - 1] += 1
        return counts

    def unplaced(self) -> list[str]:
        """The papers no direction holds (in the order they were placed)."""
        return [p for p, d in self.papers.items() if d is None]


def validate_draft(obj: dict[str, Any], allowed: set[str] | frozenset[str], placed: Sequence[str]) -> Draft:
    """A draft or a revised draft: ``{"directions": [...], "papers": [...]}`` with 4..16
    distinctly named directions, and each of the ``placed`` papers in one of them or none (as
    :func:`validate_absorption` judges it)."""
    check_keys(obj, ("directions", "papers"), "draft")
    dirs = obj["directions"]
    if not isinstance(dirs, list):
        raise InvalidOutput("draft: directions must be a list")
    if not MIN_DRAFT_DIRECTIONS <= len(dirs) <= MAX_DRAFT_DIRECTIONS:
        raise InvalidOutput(
            f"draft: {len(dirs)} directions (expected {MIN_DRAFT_DIRECTIONS} to {MAX_DRAFT_DIRECTIONS})"
        )
    out = tuple(direction_payload(d, allowed, f"draft direction {i + 1}") for i, d in enumerate(dirs))
    _unique_names([d["name"] for d in out], "draft")
    return Draft(out, validate_absorption({"papers": obj["papers"]}, placed, len(out), "draft papers"))


def validate_absorption(
    obj: dict[str, Any], shown: Sequence[str], n_directions: int, where: str = "absorption"
) -> dict[str, int | None]:
    """``{"papers": [{"id", "direction": 1..n or null}]}``: every shown paper exactly once (in
    the order shown)."""
    check_keys(obj, ("papers",), where)
    items = obj["papers"]
    if not isinstance(items, list):
        raise InvalidOutput(f"{where}: papers must be a list")
    out: dict[str, int | None] = {}
    known = set(shown)
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise InvalidOutput(f"{where} item {i}: expected an object")
        check_keys(item, ("id", "direction"), f"{where} item {i}")
        pid, d = item["id"], item["direction"]
        if pid not in known:
            raise InvalidOutput(f"{where} item {i}: id {pid!r} was not shown")
        if pid in out:
            raise InvalidOutput(f"{where}: paper {pid} labelled twice")
        if d is not None and (isinstance(d, bool) or not isinstance(d, int) or not 1 <= d <= n_directions):
            raise InvalidOutput(f"{where} item {i}: direction {d!r} is not 1..{n_directions} or null")
        out[pid] = d
    missing = [p for p in shown if p not in out]
    if missing:
        raise InvalidOutput(f"{where}: papers not labelled: {', '.join(missing[:5])}")
    return {p: out[p] for p in shown}


def _directions_from_keyed(obj: dict[str, Any], allowed: set[str] | frozenset[str]) -> list[dict[str, Any]]:
    """The directions of a ``{"D0": {...}, ...}`` object in key order (any number of D<k> keys)."""
    bad = [k for k in obj if not _KEY.match(k)]
    if bad:
        raise InvalidOutput(f"codebook: unexpected key {', '.join(repr(k) for k in sorted(bad)[:5])} (expected D0..D7)")
    keys = sorted(obj, key=lambda k: int(_KEY.match(k).group(1)))  # type: ignore[union-attr]
    out = [direction_payload(obj[k], allowed, k) for k in keys]
    _unique_names([d["name"] for d in out], "codebook")
    return out


def validate_codebook(
    obj: dict[str, Any], allowed: set[str] | frozenset[str], field_id: str, name: str, definition: str
) -> Codebook:
    """A consolidated codebook: exactly the keys D0..D7, well-formed, distinctly named directions."""
    check_keys(obj, DIRECTION_KEYS, "codebook")
    return to_codebook(_directions_from_keyed(obj, allowed), field_id, name, definition)


def to_codebook(dirs: Sequence[dict[str, Any]], field_id: str, name: str, definition: str) -> Codebook:
    directions = tuple(
        Direction(
            key=key,
            name=d["name"],
            definition=d["definition"],
            inclusion=d["inclusion"],
            exclusion=d["exclusion"],
            exemplars=tuple(d["exemplars"]),
        )
        for key, d in zip(DIRECTION_KEYS, dirs, strict=True)
    )
    return Codebook(field_id, name, definition, directions)


def _name_tokens(name: str) -> frozenset[str]:
    return frozenset(re.findall(r"[a-z0-9]+", name.casefold()))


def _similarity(a: str, b: str) -> float:
    ta, tb = _name_tokens(a), _name_tokens(b)
    return len(ta & tb) / max(len(ta | tb), 1)


def repair_consolidation(
    text: str | None, allowed: set[str] | frozenset[str], candidates: Sequence[dict[str, Any]]
) -> tuple[list[dict[str, Any]], str]:
    """Deterministic repair of a consolidation with a count other than eight; (directions, note).

    The reply must otherwise be well formed (``D<k>`` keys, valid directions, distinct names).
    Too many: the most similar pair of names (token Jaccard; first pair in key order on ties)
    is merged into the earlier direction (exemplars pooled, at most five) until eight remain.
    Too few: union candidates whose names are least similar to every kept direction are added,
    in candidate order on ties, one per name. Raises InvalidOutput when the reply cannot be repaired.
    """
    dirs = _directions_from_keyed(parse_json_reply(text), allowed)
    n0 = len(dirs)
    notes = []
    while len(dirs) > N_DIRECTIONS:
        best = (-1.0, 0, 1)
        for i in range(len(dirs)):
            for j in range(i + 1, len(dirs)):
                s = _similarity(dirs[i]["name"], dirs[j]["name"])
                if s > best[0]:
                    best = (s, i, j)
        _, i, j = best
        merged = dict(dirs[i])
        merged["exemplars"] = list(dict.fromkeys([*dirs[i]["exemplars"], *dirs[j]["exemplars"]]))[:MAX_EXEMPLARS]
        notes.append(f"merged {dirs[j]['name']!r} into {dirs[i]['name']!r}")
        dirs = [*dirs[:i], merged, *dirs[i + 1 : j], *dirs[j + 1 :]]
    if len(dirs) < N_DIRECTIONS:
        kept = {d["name"].casefold() for d in dirs}
        pool = [c for c in candidates if c["name"].casefold() not in kept]
        pool = sorted(
            enumerate(pool),
            key=lambda ic: (max((_similarity(ic[1]["name"], d["name"]) for d in dirs), default=0), ic[0]),
        )
        for _, cand in pool:
            if len(dirs) == N_DIRECTIONS:
                break
            if cand["name"].casefold() in kept:  # the union keeps candidates that share a name
                continue
            kept.add(cand["name"].casefold())
            dirs.append({k: cand[k] for k in DIRECTION_FIELDS})
            notes.append(f"added candidate {cand['name']!r}")
        if len(dirs) < N_DIRECTIONS:
            raise InvalidOutput(f"codebook: {n0} directions and too few distinct candidates to fill eight")
    return dirs, f"consolidation returned {n0} directions; " + "; ".join(notes)


# -- the compact construction's draft ------------------------------------------------------------


@dataclass(frozen=True)
class NoTopicalCore:
    """A compact draft's answer that the candidate field has no topical core (it is dropped, listed)."""

    reason: str


@dataclass(frozen=True)
class CompactDraft:
    """A compact draft: the field's name and definition, its eight directions (D0..D7 order) and
    a label for every sampled paper."""

    name: str
    definition: str
    directions: tuple[dict[str, Any], ...]
    labels: dict[str, Assignment | OutOfField]


def validate_compact_draft(
    obj: dict[str, Any], sample: Sequence[str], field_id: str, min_papers: int
) -> CompactDraft | NoTopicalCore:
    """``{"name", "definition", "directions": {"D0".."D7"}, "labels": [...]}``, or
    ``{"no_topical_core": reason}``: the field named (1..8 words), exactly eight distinctly named
    directions with exemplars from the sample, every sampled paper labelled once (as
    :func:`validate_label_batch` judges a batch), and every direction the primary of at least
    ``min_papers`` sampled papers."""
    if "no_topical_core" in obj:
        check_keys(obj, ("no_topical_core",), "reply")
        return NoTopicalCore(_text(obj, "no_topical_core", "reply"))
    check_keys(obj, ("name", "definition", "directions", "labels"), "reply")
    field = validate_field_name({"name": obj["name"], "definition": obj["definition"]})
    dirs = obj["directions"]
    if not isinstance(dirs, dict):
        raise InvalidOutput('directions: expected an object keyed "D0" to "D7"')
    check_keys(dirs, DIRECTION_KEYS, "directions")
    allowed = frozenset(sample)
    directions = tuple(direction_payload(dirs[k], allowed, k) for k in DIRECTION_KEYS)
    _unique_names([d["name"] for d in directions], "directions")
    check = validate_label_batch({"labels": obj["labels"]}, sample, field_id)
    if check.bad or check.faults:
        raise InvalidOutput(check.message())
    held = {k: 0 for k in DIRECTION_KEYS}
    for a in check.good.values():
        if isinstance(a, Assignment) and a.primary in held:
            held[a.primary] += 1
    thin = [f"{k} ({n})" for k, n in held.items() if n < min_papers]
    if thin:
        raise InvalidOutput(
            f"directions {', '.join(thin)} are the primary of fewer than {min_papers} sampled papers: "
            "redraw the eight so that each holds at least that many, and label again"
        )
    return CompactDraft(field.name, field.definition, directions, check.good)


# -- assignments --------------------------------------------------------------------------------


NOT_IN_FIELD = "not_in_field"


@dataclass(frozen=True)
class OutOfField:
    """A membership the model judged wrong (the paper is not about the field; unlike ``other``, it
    is not in the field at all): left out of the instance and counted."""

    arxiv_id: str
    field_id: str


def validate_assignment(obj: dict[str, Any], arxiv_id: str, field_id: str) -> Assignment | OutOfField:
    """An assignment: primary (D0..D7 or other), secondary (key or null), known type, coherent;
    or, for type ``not_in_field`` (primary other, no secondary), an :class:`OutOfField`."""
    check_keys(obj, ("primary", "secondary", "type"), "assignment")
    primary, secondary, kind = obj["primary"], obj["secondary"], obj["type"]
    if kind == NOT_IN_FIELD:
        if primary != "other" or secondary is not None:
            raise InvalidOutput(f"assignment: type {kind} needs primary 'other' and no secondary")
        return OutOfField(arxiv_id, field_id)
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


NOT_LABELLED = "not labelled"


@dataclass(frozen=True)
class LabelCheck:
    """One labels reply judged item by item: the valid labels, a reason per paper without one, and
    the faults that belong to no paper (an id that was not shown)."""

    good: dict[str, Assignment | OutOfField]
    bad: dict[str, str]
    faults: tuple[str, ...] = ()

    def message(self) -> str:
        """Every fault named once: each bad label with its paper, the unlabelled papers in one list."""
        missing = [p for p, r in self.bad.items() if r == NOT_LABELLED]
        parts = list(dict.fromkeys([*self.faults, *(r for r in self.bad.values() if r != NOT_LABELLED)]))
        if missing:
            parts.append(f"papers not labelled: {', '.join(missing)}")
        return "; ".join(parts)

    def reasons(self) -> dict[str, str]:
        """The reason per paper without a valid label (naming the unshown ids labelled instead)."""
        if not self.faults:
            return self.bad
        why = f"{NOT_LABELLED} ({'; '.join(self.faults)})"
        return {p: why if r == NOT_LABELLED else r for p, r in self.bad.items()}


def validate_label_batch(
    obj: dict[str, Any], ids: Sequence[str], field_id: str, shown: Sequence[str] = ()
) -> LabelCheck:
    """``{"labels": [{"id", "primary", "secondary", "type"}]}`` judged label by label.

    ``ids`` are the papers to label, ``shown`` further papers of the prompt whose labels are
    ignored (a follow-up asks about some of a batch). Good labels are kept beside bad ones; a
    missing or twice-labelled paper is a reason for that paper, an unshown id a fault of the reply.
    InvalidOutput when it is not a ``labels`` list or a label has no string ``id``.
    """
    check_keys(obj, ("labels",), "labels")
    items = obj["labels"]
    if not isinstance(items, list):
        raise InvalidOutput("labels: expected a list")
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise InvalidOutput(f"label {i}: expected an object, got {type(item).__name__}")
        if not isinstance(item.get("id"), str):
            check_keys(item, ("id", "primary", "secondary", "type"), f"label {i}")
            raise InvalidOutput(f"label {i}: id must be a string (the paper's arXiv id)")
    wanted = set(ids)
    ignored = set(shown) - wanted
    good: dict[str, Assignment | OutOfField] = {}
    bad: dict[str, str] = {}
    faults: list[str] = []
    seen: set[str] = set()
    for i, item in enumerate(items):
        pid = item["id"]
        if pid in ignored:
            continue
        if pid not in wanted:
            faults.append(f"label {i}: id {pid!r} is not one of the papers to label")
            continue
        if pid in seen:
            bad[pid] = f"paper {pid} labelled twice"
            good.pop(pid, None)
            continue
        seen.add(pid)
        try:
            good[pid] = validate_assignment({k: v for k, v in item.items() if k != "id"}, pid, field_id)
        except InvalidOutput as exc:
            bad[pid] = f"label {i} ({pid}): {str(exc).removeprefix('assignment: ')}"
    for pid in ids:
        if pid not in good and pid not in bad:
            bad[pid] = NOT_LABELLED
    return LabelCheck(good, bad, tuple(faults[:5]))


THINKING_HINT = (
    "; the model spent the budget reasoning: turn thinking off "
    """(--chat-template-kwargs '{"enable_thinking": false}') or give it room (--reasoning-tokens N)"""
)


def truncation_reason(reply: Any, budget: int) -> str:
    """Why a unit failed when its reply was cut at the token budget twice (with a hint for thinking models)."""
    hint = THINKING_HINT if reply.reasoning else ""
    return f"reply cut at the token budget (finish_reason length at max_tokens {budget}, twice){hint}"
