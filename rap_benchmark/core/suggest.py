""" "Did you mean ...?": the closest name to a mistyped one, an option or a path's last part.

Every message that refuses a name it does not know offers the closest known one, found the same
way (difflib's ratio, at least 0.6): ``rap run: unrecognized argument --conditons; did you mean
--conditions?``, ``no instance folder at build/minii; did you mean build/mini?``.
"""

from __future__ import annotations

import difflib
import itertools
from collections.abc import Callable, Iterable
from pathlib import Path

MAX_LOOKED_AT = 1000
"""Entries of a folder looked at for a path's neighbour (a huge folder is not listed whole)."""


def closest(word: str, known: Iterable[str]) -> str | None:
    """The name in ``known`` closest to ``word``, or None when none is close."""
    close = difflib.get_close_matches(word, list(known), n=1, cutoff=0.6)
    return close[0] if close else None


def nearby(path: str | Path, keep: Callable[[Path], bool]) -> Path | None:
    """The entry beside ``path`` (same folder) whose name is closest to its own, among those
    ``keep`` accepts; None when there is none or the folder is not there."""
    path = Path(path)
    folder = path.parent
    try:
        entries = list(itertools.islice(folder.iterdir(), MAX_LOOKED_AT))
    except OSError:
        return None
    names = {p.name: p for p in entries if p.name != path.name and keep(p)}
    name = closest(path.name, names)
    return names[name] if name is not None else None
