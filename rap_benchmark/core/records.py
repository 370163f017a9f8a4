"""Frozen, typed records and the benchmark's fixed vocabularies.

Bulk data moves between stages as Arrow/pandas tables whose contract is their schema
(:mod:`rap_benchmark.core.schemas`: papers, assignments, blocks, episodes, search manifest,
predictions). The records here are what code constructs one at a time:

    fields/codebook -> Direction, Codebook
    instruments -> Assignment (one label, checked)
    blocks/splits -> Block
    episodes -> Episode (typed view of an ``episodes`` row)
    search -> SearchHit, SearchObservation, SearchCall

Fixed vocabularies are enums; constructing a record or enum with a value outside its vocabulary
raises ``ValueError``. :func:`parse_enum` is the boundary check for user-given strings.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TypeVar

from rap_benchmark.core.errors import InputError
from rap_benchmark.core.serial import OMIT_EMPTY

N_DIRECTIONS = 8
DIRECTION_KEYS: tuple[str, ...] = tuple(f"D{i}" for i in range(N_DIRECTIONS))


class Condition(StrEnum):
    """The five agent conditions of the paper (its agent protocol)."""

    A0 = "A0"  # Forecast, closed book
    A1 = "A1"  # Forecast, Search over the fixed window
    A2 = "A2"  # State, fixed window
    A3 = "A3"  # Forecast, Search over expanding history
    A4 = "A4"  # State, expanding history

    @property
    def task(self) -> Task:
        return Task.STATE if self in (Condition.A2, Condition.A4) else Task.FORECAST

    @property
    def regime(self) -> Regime | None:
        """The search universe offered, or None for the closed-book condition."""
        if self is Condition.A0:
            return None
        return Regime.FIXED if self in (Condition.A1, Condition.A2) else Regime.EXPANDING


class Task(StrEnum):
    FORECAST = "forecast"  # predict y, the composition of [T, T+6mo)
    STATE = "state"  # reconstruct x, the composition of [T-6mo, T)


class Regime(StrEnum):
    """Search universes (the paper's Search environment)."""

    FIXED = "fixed"  # the field's papers in [T-6mo, T)
    EXPANDING = "expanding"  # the field's papers before T


class Policy(StrEnum):
    """Counting policies that turn assignments into direction counts (the paper's counting policies)."""

    CANONICAL = "canonical"
    SPLIT_BOUNDARY = "split_boundary"
    SINGLE_ONLY = "single_only"
    SECONDARY = "secondary"


class AssignmentType(StrEnum):
    SINGLE = "single"
    BOUNDARY = "boundary"
    BRIDGE = "bridge"
    OTHER = "other"
    LOW_EVIDENCE = "low_evidence"


class Split(StrEnum):
    DEV = "dev"
    TEST = "test"


_E = TypeVar("_E", bound=StrEnum)


def parse_enum(kind: type[_E], value: object, *, what: str | None = None) -> _E:
    """``value`` as a member of ``kind`` (a member passes through; a string must be one of its
    values). Anything else raises :class:`~rap_benchmark.core.errors.InputError` (a ``ValueError``) naming the allowed values, e.g.
    ``unknown split 'train' (expected one of: dev, test)``."""
    if isinstance(value, kind):
        return value
    try:
        return kind(value)
    except ValueError:
        label = what or kind.__name__.lower()
        allowed = ", ".join(m.value for m in kind)
        raise InputError(f"unknown {label} {value!r} (expected one of: {allowed})") from None


def is_count(value: object) -> bool:
    """Is ``value`` a nonnegative ``int``? A bool is not one, though Python makes it an int (a JSON
    ``true`` must not count as 1); neither is a float, even an integral one."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


class InvalidReason(StrEnum):
    """Why an agent unit ended without a valid answer. The reason is a value; what happened in
    words goes in a separate detail field (``invalid_detail``), never parsed back."""

    BACKEND_ERROR = "backend_error"  # every attempt of a request failed (or the backend crashed)
    OVER_LENGTH = "over_length"  # the reply hit the token cap and does not parse
    INVALID_ANSWER = "invalid_answer"  # a second reply that is neither a tool call nor a valid answer
    TOOL_CALL_WHEN_NO_TOOLS = "tool_call_when_no_tools_available"  # a second tool call after the budget
    MISSING = "missing"  # no unit record says why (a record written without a reason)


def _check_direction_key(key: str | None, *, allow_other: bool, allow_none: bool) -> None:
    if key is None and allow_none:
        return
    if key in DIRECTION_KEYS or (allow_other and key == "other"):
        return
    raise ValueError(f"not a direction key: {key!r} (expected one of {', '.join(DIRECTION_KEYS)})")


@dataclass(frozen=True, slots=True)
class Direction:
    """One of a field's eight research directions (a codebook entry)."""

    key: str  # D0..D7
    name: str
    definition: str
    inclusion: str
    exclusion: str
    exemplars: tuple[str, ...]  # pre-cutoff arXiv ids
    # their titles, same order; empty when not recorded, and then not written (older codebooks keep their bytes)
    exemplar_titles: tuple[str, ...] = field(default=(), metadata=OMIT_EMPTY)

    def __post_init__(self) -> None:
        _check_direction_key(self.key, allow_other=False, allow_none=False)
        for name in ("name", "definition", "inclusion", "exclusion"):
            if not getattr(self, name).strip():
                raise ValueError(f"Direction {self.key}: {name} is empty")


@dataclass(frozen=True, slots=True)
class Codebook:
    """A field and its frozen slate of exactly eight directions D0..D7."""

    field_id: str
    name: str
    definition: str
    directions: tuple[Direction, ...]

    def __post_init__(self) -> None:
        keys = tuple(d.key for d in self.directions)
        if keys != DIRECTION_KEYS:
            raise ValueError(f"field {self.field_id}: directions must be exactly D0..D7 in order, got {keys}")


@dataclass(frozen=True, slots=True)
class Assignment:
    """The instrument's label for one paper-field membership."""

    arxiv_id: str
    field_id: str
    primary: str  # D0..D7 or "other"
    secondary: str | None
    type: AssignmentType

    def __post_init__(self) -> None:
        _check_direction_key(self.primary, allow_other=True, allow_none=False)
        _check_direction_key(self.secondary, allow_other=False, allow_none=True)
        object.__setattr__(self, "type", AssignmentType(self.type))
        if self.type is AssignmentType.BOUNDARY and self.secondary is None:
            raise ValueError(f"{self.arxiv_id}/{self.field_id}: a boundary assignment needs a secondary")


@dataclass(frozen=True, slots=True)
class Block:
    """A frozen dependency block: a connected component of strongly overlapping fields."""

    block_id: str
    field_ids: tuple[str, ...]
    split: Split


@dataclass(frozen=True, slots=True)
class Episode:
    """One (field, origin) forecasting episode under a counting policy.

    ``history`` holds the three six-month windows before T, oldest first; ``x`` is the newest of
    them. A composition is None when its window holds no counted paper (the episode is flagged).
    """

    field_id: str
    origin: dt.date
    policy: Policy
    x: tuple[float, ...] | None
    history: tuple[tuple[float, ...] | None, ...]
    y: tuple[float, ...] | None
    n_x: float
    n_y: float

    @property
    def episode_id(self) -> str:
        return episode_id(self.field_id, self.origin)


def episode_id(field_id: str, origin: dt.date | str) -> str:
    """The stable key of an episode: ``<field_id>@<YYYY-MM-DD>``."""
    origin_s = origin.isoformat() if isinstance(origin, dt.date) else str(origin)
    return f"{field_id}@{origin_s}"


@dataclass(frozen=True, slots=True)
class SearchHit:
    arxiv_id: str
    title: str
    date: str  # YYYY-MM-DD
    abstract: str  # cut to the spec's ``abstract_chars``
    score: float


@dataclass(frozen=True, slots=True)
class SearchObservation:
    """Exactly what an agent sees for one Search call."""

    hits: tuple[SearchHit, ...]
    total_hits: int


@dataclass(frozen=True, slots=True)
class SearchCall:
    """A logged Search call: the arguments and the exact observation."""

    field_id: str
    origin: dt.date
    regime: Regime
    query: str
    start: dt.date | None
    end: dt.date | None
    result_ids: tuple[str, ...]
    total_hits: int
