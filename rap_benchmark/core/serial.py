"""The one way a record becomes a JSON object and back, driven by its dataclass fields.

:func:`to_dict` writes the fields in declaration order: an enum as its value, a date as
YYYY-MM-DD, a tuple as a list, a nested record as an object, a dict with its values converted
the same way and its keys as strings (an enum key as its value). A field declared with
``field(metadata=FLAT)`` is merged into its parent's object; one with ``OMIT_EMPTY`` is left out
while empty (older files keep their bytes); one with ``SKIP`` is never written or read (it keeps
its default: data held for Python callers only); one with ``renamed("key")`` is written under
that key (a file's name for it that the code calls otherwise). :func:`from_dict` reads the same
shapes back by each field's annotation; an absent field takes its default, a field outside
``__init__`` (a constant the file states) is written but not read back, and ``strict`` rejects
unknown keys. :class:`Record` gives a dataclass both as methods; :func:`write_jsonl` and
:func:`read_jsonl` are the one JSON-lines file of records.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import functools
import json
import types
import typing
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, TypeVar

from rap_benchmark.core.dates import parse_date
from rap_benchmark.core.errors import FileFormatError, InputError
from rap_benchmark.core.fsio import atomic_open

FLAT = {"flat": True}
OMIT_EMPTY = {"omit_empty": True}
SKIP = {"skip": True}


def renamed(key: str) -> dict[str, str]:
    """Field metadata: the field is written and read under ``key``."""
    return {"key": key}


_R = TypeVar("_R")


def to_dict(record: Any) -> dict[str, Any]:
    """``record`` (a dataclass instance) as a JSON-ready dict."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(record):
        if f.metadata.get("skip"):
            continue
        value = getattr(record, f.name)
        if f.metadata.get("flat"):
            out.update(to_dict(value))
        elif not (f.metadata.get("omit_empty") and not value):
            out[_key(f)] = _plain(value)
    return out


def _plain(value: Any) -> Any:
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k.value if isinstance(k, enum.Enum) else str(k): _plain(v) for k, v in value.items()}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return to_dict(value)
    return value


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def from_dict(cls: type[_R], data: Mapping[str, Any], *, strict: bool = False, what: str = "") -> _R:
    """The record of type ``cls`` that :func:`to_dict` wrote as ``data``. With ``strict``, a key
    that names no field raises :class:`~rap_benchmark.core.errors.InputError` (``unknown
    <what> keys: a, b``); a missing field without a default raises ``KeyError``."""
    fields = [f for f in dataclasses.fields(cls) if not f.metadata.get("skip")]  # type: ignore[arg-type]
    hints = _hints(cls)
    if strict:
        known = {n for f in fields for n in (_keys(hints[f.name]) if f.metadata.get("flat") else (_key(f),))}
        unknown = sorted(set(data) - known)
        if unknown:
            raise InputError(f"unknown {what + ' ' if what else ''}keys: {', '.join(unknown)}")
    kwargs: dict[str, Any] = {}
    for f in fields:
        if not f.init:
            continue
        if f.metadata.get("flat"):
            kwargs[f.name] = from_dict(hints[f.name], data)
        elif _key(f) in data:
            kwargs[f.name] = _read(hints[f.name], data[_key(f)])
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise KeyError(f.name)
    return cls(**kwargs)


def _key(f: dataclasses.Field[Any]) -> str:
    return str(f.metadata.get("key", f.name))


def _keys(cls: type) -> tuple[str, ...]:
    return tuple(_key(f) for f in dataclasses.fields(cls))  # type: ignore[arg-type]


def _read(tp: Any, value: Any) -> Any:
    if value is None:
        return None
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is typing.Union or origin is types.UnionType:
        inner = [a for a in args if a is not type(None)]
        return _read(inner[0], value) if len(inner) == 1 else value
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_read(args[0], v) for v in value)
        return tuple(_read(a, v) for a, v in zip(args, value, strict=True)) if len(args) == len(value) else tuple(value)
    if isinstance(tp, type):
        if issubclass(tp, enum.Enum):
            return tp(value)
        if tp is dt.date:
            return parse_date(value)
        if dataclasses.is_dataclass(tp):
            return from_dict(tp, value)
    return value


class Record:
    """Mixin for a dataclass: ``to_dict`` and ``from_dict`` by :func:`to_dict` and :func:`from_dict`."""

    __slots__ = ()

    def to_dict(self) -> dict[str, Any]:
        return to_dict(self)

    @classmethod
    def from_dict(cls: type[_R], data: Mapping[str, Any]) -> _R:
        return from_dict(cls, data)


def write_jsonl(path: str | Path, rows: Iterable[Any]) -> int:
    """Write records (or plain dicts) as JSON lines, keys sorted, UTF-8, replacing ``path``
    atomically; return how many were written."""
    n = 0
    with atomic_open(path) as fh:
        for row in rows:
            fh.write(json.dumps(row if isinstance(row, dict) else to_dict(row), sort_keys=True, ensure_ascii=False))
            fh.write("\n")
            n += 1
    return n


def read_jsonl(path: str | Path, parse: Callable[[dict[str, Any]], _R] | None = None) -> Iterator[_R]:
    """Each JSON line of ``path`` (blank lines skipped) through ``parse``; a line that is not JSON
    or that ``parse`` refuses raises :class:`~rap_benchmark.core.errors.FileFormatError` naming
    the file and the line."""
    with Path(path).open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                data = json.loads(line)
                yield data if parse is None else parse(data)
            except (KeyError, ValueError, TypeError) as exc:
                problem = f"missing key {exc}" if isinstance(exc, KeyError) else str(exc)
                raise FileFormatError(path, problem, line=lineno) from exc
