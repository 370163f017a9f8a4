"""A crash-safe run store: one atomic JSON file per unit plus an append-only execution log.

Layout of a run directory::

    run.json                 what the run was built against (model, backend, manifest hash,
                             prompt version, caps); a restart must match it
    units/<model>/<variant>/<condition>/<field>@<origin>.json
                             one finished unit (valid or invalid), written atomically
    executions.jsonl         one line per unit start and finish (fsync'd), to audit reruns
    predictions.jsonl        written from the units by ``rap run`` (rap_benchmark.evaluation.predictions format)

Atomicity: a unit file is written to a temporary file in the same folder, flushed and fsync'd,
then renamed over the final name, and the folder is fsync'd. A SIGKILL at any point leaves either
the old state or the new file, never a torn one; leftover temporary files are ignored and removed.

A restarted run skips units whose file holds a valid answer and reruns missing or invalid ones.
The store never holds or reads targets.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rap_benchmark.core.records import Condition

RUN_FILE = "run.json"
UNITS_DIR = "units"
EXEC_LOG = "executions.jsonl"
_SAFE = re.compile(r"[^A-Za-z0-9._-]+")


def _slug(value: str) -> str:
    """A filesystem-safe, collision-free name: readable part plus a short hash when changed."""
    safe = _SAFE.sub("_", value).strip("._") or "_"
    if safe == value:
        return safe
    return f"{safe}-{hashlib.sha256(value.encode()).hexdigest()[:8]}"


@dataclass(frozen=True, slots=True, order=True)
class UnitKey:
    """The identity of a unit: (model, field, origin, condition) and a variant (``native`` for A0-A4)."""

    model: str
    field_id: str
    origin: str  # YYYY-MM-DD
    condition: Condition
    variant: str = "native"

    def __post_init__(self) -> None:
        object.__setattr__(self, "condition", Condition(self.condition))

    @property
    def id(self) -> str:
        return f"{self.model}|{self.variant}|{self.condition.value}|{self.field_id}@{self.origin}"

    def shard(self, n: int) -> int:
        """Deterministic shard of this unit among ``n`` (sha256 of the key, not Python's hash)."""
        return int(hashlib.sha256(self.id.encode("utf-8")).hexdigest(), 16) % n

    def relpath(self) -> Path:
        return (
            Path(UNITS_DIR)
            / _slug(self.model)
            / _slug(self.variant)
            / self.condition.value
            / f"{_slug(self.field_id)}@{self.origin}.json"
        )

    def to_dict(self) -> dict[str, str]:
        return {
            "model": self.model,
            "field_id": self.field_id,
            "origin": self.origin,
            "condition": self.condition.value,
            "variant": self.variant,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> UnitKey:
        return cls(d["model"], d["field_id"], d["origin"], Condition(d["condition"]), d.get("variant", "native"))


def parse_shard(text: str | None) -> tuple[int, int]:
    """``"i/n"`` -> (i, n) with 0 <= i < n; None -> (0, 1)."""
    if not text:
        return 0, 1
    m = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text)
    if not m or not 0 <= int(m.group(1)) < int(m.group(2)):
        raise ValueError(f"--shard must be i/n with 0 <= i < n, got {text!r}")
    return int(m.group(1)), int(m.group(2))


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` so that a crash leaves the old file or the new one, never a torn one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".tmp-{path.name}-{os.getpid()}"
    with tmp.open("w", encoding="utf-8") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    _fsync_dir(path.parent)


class RunStore:
    """The run directory (see the module docstring)."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)

    # -- run metadata --------------------------------------------------------------------------
    def read_run(self) -> dict[str, Any] | None:
        path = self.root / RUN_FILE
        return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None

    def init_run(self, meta: dict[str, Any], *, must_match: tuple[str, ...] = ()) -> dict[str, Any]:
        """Create run.json, or check that an existing one agrees on the ``must_match`` keys."""
        self.root.mkdir(parents=True, exist_ok=True)
        old = self.read_run()
        if old is not None:
            diffs = [k for k in must_match if old.get(k) != meta.get(k)]
            if diffs:
                detail = ", ".join(f"{k}: {old.get(k)!r} != {meta.get(k)!r}" for k in diffs)
                raise ValueError(f"{self.root} holds a different run ({detail}); use a new --out")
            return old
        atomic_write_text(self.root / RUN_FILE, json.dumps(meta, sort_keys=True, indent=1) + "\n")
        return meta

    # -- units -----------------------------------------------------------------------------------
    def path(self, key: UnitKey) -> Path:
        return self.root / key.relpath()

    def load(self, key: UnitKey) -> dict[str, Any] | None:
        path = self.path(key)
        if not path.is_file():
            return None
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError):
            return None  # cannot happen with atomic writes; treat as missing and rerun

    def is_done(self, key: UnitKey) -> bool:
        """A unit is done when its file holds a valid answer (invalid ones are rerun)."""
        rec = self.load(key)
        return bool(rec and rec.get("valid") and rec.get("key") == key.to_dict())

    def save(self, key: UnitKey, record: dict[str, Any]) -> Path:
        payload = {"key": key.to_dict(), "unit_id": key.id, **record}
        path = self.path(key)
        atomic_write_text(path, json.dumps(payload, sort_keys=True, ensure_ascii=False, indent=1) + "\n")
        return path

    def iter_units(self) -> Iterator[dict[str, Any]]:
        """Every stored unit record, in a deterministic (path) order."""
        base = self.root / UNITS_DIR
        if not base.is_dir():
            return
        for path in sorted(base.rglob("*.json")):
            if path.name.startswith(".tmp-"):
                continue
            try:
                yield json.loads(path.read_text(encoding="utf-8"))
            except (json.JSONDecodeError, UnicodeDecodeError):
                continue

    def clean_temporaries(self) -> int:
        """Remove temporary files left by a killed writer; return how many."""
        base = self.root / UNITS_DIR
        n = 0
        if base.is_dir():
            for tmp in base.rglob(".tmp-*"):
                tmp.unlink(missing_ok=True)
                n += 1
        return n

    # -- execution log --------------------------------------------------------------------------
    def log_event(self, key: UnitKey, event: str, **extra: Any) -> None:
        """Append one line to executions.jsonl and fsync it."""
        self.root.mkdir(parents=True, exist_ok=True)
        line = json.dumps({"unit_id": key.id, "event": event, "pid": os.getpid(), **extra}, sort_keys=True)
        with (self.root / EXEC_LOG).open("a", encoding="utf-8") as fh:
            fh.write(line + "\n")
            fh.flush()
            os.fsync(fh.fileno())

    def events(self) -> list[dict[str, Any]]:
        """The execution log; a final line torn by a crash is skipped."""
        path = self.root / EXEC_LOG
        if not path.is_file():
            return []
        out = []
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                continue
        return out


def merge_stores(sources: list[str | Path], dest: str | Path) -> int:
    """Merge shard stores into one run directory; return the number of units copied.

    Shards hold disjoint unit keys, so files never collide; a key present in two sources with
    different content is an error (the shards were not disjoint runs of the same configuration).
    """
    out = RunStore(dest)
    n = 0
    metas = [RunStore(s).read_run() for s in sources]
    base = {k: v for k, v in (metas[0] or {}).items() if k not in ("shard",)}
    for src, meta in zip(sources, metas, strict=True):
        mine = {k: v for k, v in (meta or {}).items() if k not in ("shard",)}
        if mine != base:
            raise ValueError(f"{src}: run.json differs from {sources[0]}; refusing to merge different runs")
    out.init_run({**base, "shard": None, "merged_from": [str(s) for s in sources]})
    for src in sources:
        store = RunStore(src)
        for rec in store.iter_units():
            key = UnitKey.from_dict(rec["key"])
            existing = out.load(key)
            if existing is not None and existing != rec:
                if existing.get("valid") and not rec.get("valid"):
                    continue
                if not (rec.get("valid") and not existing.get("valid")):
                    raise ValueError(f"unit {key.id} differs between shard stores")
            out.save(key, {k: v for k, v in rec.items() if k not in ("key", "unit_id")})
            n += 1
        for ev in store.events():
            with (out.root / EXEC_LOG).open("a", encoding="utf-8") as fh:
                fh.write(json.dumps(ev, sort_keys=True) + "\n")
    return n
