"""Argument parsers shared by the ``rap`` commands: each refuses a bad value with a message that
names the flag, the value and what was expected (argparse turns it into ``rap <cmd>: ...``, exit 2)."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from enum import Enum
from pathlib import Path
from typing import TypeVar

from rap_benchmark.core.errors import ArtifactError, InputError
from rap_benchmark.core.records import parse_enum

E = TypeVar("E", bound=Enum)


def csv(text: str | None) -> list[str] | None:
    """``"a, b,,c"`` -> ``["a", "b", "c"]``; empty or None -> None (meaning: all)."""
    return [t.strip() for t in text.split(",") if t.strip()] if text else None


def enum_list(cls: type[E], text: str | None, flag: str) -> list[E]:
    """Comma-separated enum values (e.g. ``--conditions A0,A3``); none, or an unknown one, is refused by name."""
    values = csv(text)
    if not values:
        raise InputError(f"{flag}: give at least one of {', '.join(str(m.value) for m in cls)}")
    return [parse_enum(cls, v, what=f"{flag} value") for v in values]


def _number(kind: Callable[[str], float], low: float, inclusive: bool, what: str) -> Callable[[str], float]:
    def parse(text: str) -> float:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {what}") from None
        if value != value or value < low or (value == low and not inclusive) or value == float("inf"):
            raise argparse.ArgumentTypeError(f"{text!r} is not {what}")
        return value

    parse.__name__ = what  # argparse names the type in its messages
    return parse


positive_int = _number(int, 1, True, "a positive integer")
nonnegative_int = _number(int, 0, True, "an integer >= 0")
positive_float = _number(float, 0.0, False, "a number > 0")
nonnegative_float = _number(float, 0.0, True, "a number >= 0")


def existing_files(paths: Sequence[str | Path], what: str = "file") -> list[Path]:
    """The paths, each checked to be an existing file (a typo is refused before anything is written)."""
    out = [Path(p) for p in paths]
    missing = [str(p) for p in out if not p.is_file()]
    if missing:
        raise InputError(f"no such {what}: {', '.join(missing)}")
    return out


def run_folder(path: str | Path) -> Path:
    """A run folder written by ``rap run`` (it holds ``run.json``)."""
    from rap_benchmark.agents.store import RUN_FILE

    root = Path(path)
    if not (root / RUN_FILE).is_file():
        raise ArtifactError(f"{root} is not a run folder (no {RUN_FILE}; rap run --out writes one)")
    return root
