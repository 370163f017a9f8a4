"""core.serial: the one record <-> JSON-object mechanism and its JSON-lines file."""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from rap_benchmark.core.errors import FileFormatError, InputError
from rap_benchmark.core.records import Regime, SearchCall
from rap_benchmark.core.serial import (
    FLAT,
    OMIT_EMPTY,
    SKIP,
    Record,
    from_dict,
    read_jsonl,
    renamed,
    to_dict,
    write_jsonl,
)


@dataclass(frozen=True, slots=True)
class Inner(Record):
    name: str
    when: dt.date


@dataclass(frozen=True, slots=True)
class Outer(Record):
    key: str
    inner: Inner = field(metadata=FLAT)
    regime: Regime
    nested: tuple[Inner, ...]
    pair: tuple[float, float]
    maybe: dt.date | None
    notes: tuple[str, ...] = field(default=(), metadata=OMIT_EMPTY)


def _outer(notes: tuple[str, ...] = ()) -> Outer:
    inner = Inner("a", dt.date(2025, 1, 2))
    return Outer("k", inner, Regime.FIXED, (inner, Inner("b", dt.date(2024, 7, 1))), (0.5, 1.0), None, notes)


def test_to_dict_writes_plain_json_in_field_order() -> None:
    d = to_dict(_outer())
    assert list(d) == ["key", "name", "when", "regime", "nested", "pair", "maybe"]  # flat; empty notes left out
    assert d["when"] == "2025-01-02" and d["regime"] == "fixed" and d["pair"] == [0.5, 1.0]
    assert d["nested"][1] == {"name": "b", "when": "2024-07-01"}
    assert to_dict(_outer(("x",)))["notes"] == ["x"]


@pytest.mark.parametrize("notes", [(), ("x", "y")])
def test_from_dict_reads_back_what_to_dict_wrote(notes: tuple[str, ...]) -> None:
    record = _outer(notes)
    assert Outer.from_dict(json.loads(json.dumps(record.to_dict()))) == record


def test_strict_refuses_unknown_keys_and_a_missing_field_is_an_error() -> None:
    data = to_dict(_outer())
    with pytest.raises(InputError, match="unknown outer keys: extra"):
        from_dict(Outer, {**data, "extra": 1}, strict=True, what="outer")
    assert from_dict(Outer, {**data, "extra": 1}) == _outer()  # not strict: ignored
    with pytest.raises(KeyError):
        from_dict(Outer, {k: v for k, v in data.items() if k != "regime"})


@dataclass(frozen=True)
class Shaped(Record):
    level: float = field(metadata=renamed("repeatability"))
    by_regime: dict[Regime, int] = field(default_factory=dict)
    by_h: dict[int, float] = field(default_factory=dict)
    cache: list[int] = field(default_factory=list, metadata=SKIP)
    kind: str = field(default="shaped", init=False)


def test_renamed_skipped_constant_fields_and_dict_keys() -> None:
    record = Shaped(0.5, {Regime.FIXED: 2}, {6: 0.1, 12: 0.2}, cache=[1])
    d = to_dict(record)
    assert d == {"repeatability": 0.5, "by_regime": {"fixed": 2}, "by_h": {"6": 0.1, "12": 0.2}, "kind": "shaped"}
    assert json.dumps(d, sort_keys=True).index('"12"') < json.dumps(d, sort_keys=True).index('"6"')  # str keys
    back = from_dict(Shaped, d, strict=True)  # the constant is known, not passed to __init__
    assert back.level == 0.5 and back.cache == [] and back.kind == "shaped"
    with pytest.raises(InputError, match="unknown keys: cache, level"):
        from_dict(Shaped, {**d, "level": 1, "cache": []}, strict=True)


def test_jsonl_round_trip_and_a_bad_line_names_file_and_line(tmp_path: Path) -> None:
    call = SearchCall("F001", dt.date(2025, 1, 1), Regime.FIXED, "q", None, dt.date(2024, 12, 1), ("x",), 3)
    path = tmp_path / "calls.jsonl"
    assert write_jsonl(path, [call, call]) == 2
    assert list(read_jsonl(path, lambda d: from_dict(SearchCall, d))) == [call, call]
    path.write_text(path.read_text() + "\n{not json\n", encoding="utf-8")
    with pytest.raises(FileFormatError, match=r"calls.jsonl:4: "):
        list(read_jsonl(path))
