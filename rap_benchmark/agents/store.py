"""A crash-safe run store: one atomic JSON file per unit plus an append-only execution log.

Layout of a run directory::

    run.json                 what the run was built against (model, backend, manifest hash,
                             prompt version, caps); a restart must match it
    units/<model>/<variant>/<condition>/<field>@<origin>.json
                             one finished unit (valid or invalid), written atomically
    executions.jsonl         one line per unit start and finish (fsync'd), to audit reruns
    predictions.jsonl        written from the units by ``rap run`` (rap_benchmark.evaluation.predictions format)

Atomicity: every file is written with :mod:`rap_benchmark.core.fsio` (temporary file in the same
folder, fsync, rename, fsync of the folder). A SIGKILL at any point leaves either the old state or
the new file, never a torn one; temporaries of dead writers are removed. One writer at a time:
:meth:`RunStore.writer` holds the folder's lock (``.lock`` names the holder's PID) and a second
process is refused at once. A torn last line of ``executions.jsonl`` is cut before the next append.

Unit files are checked on load (:func:`check_unit`): schema, weights, and a file name that matches
the unit's key. An unusable file is reported, never merged into predictions, and its unit rerun.
A restarted run skips units whose file holds a valid answer and reruns missing or invalid ones.
The store never holds or reads targets.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from rap_benchmark.core.errors import InputError, UserError, json_reason
from rap_benchmark.core.fsio import FolderLock, atomic_write_text, open_append_repaired, remove_stale, slug
from rap_benchmark.core.records import Condition, is_count
from rap_benchmark.core.serial import Record
from rap_benchmark.evaluation.scoring import weight_fault

RUN_FILE = "run.json"
UNITS_DIR = "units"
EXEC_LOG = "executions.jsonl"


class StoreKey(Protocol):
    """The identity of a stored unit: a model, a stable id, a shard, a file path, a dict form."""

    model: str

    @property
    def id(self) -> str: ...

    def shard(self, n: int) -> int: ...

    def relpath(self) -> Path: ...

    def to_dict(self) -> dict[str, str]: ...


def _shard(key: StoreKey, n: int) -> int:
    """Deterministic shard of a unit among ``n`` (sha256 of its id, not Python's hash)."""
    return int(hashlib.sha256(key.id.encode("utf-8")).hexdigest(), 16) % n


@dataclass(frozen=True, slots=True, order=True)
class UnitKey(Record):
    """The identity of a RAP unit: (model, field, origin, condition) and a variant (``native`` for A0-A4)."""

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

    shard = _shard

    def relpath(self) -> Path:
        return (
            Path(UNITS_DIR)
            / slug(self.model)
            / slug(self.variant)
            / self.condition.value
            / f"{slug(self.field_id)}@{self.origin}.json"
        )

    @staticmethod
    def is_key(d: Any) -> bool:
        """Whether a stored key dict is a RAP unit's (a CiteCast task's has no condition)."""
        return isinstance(d, dict) and "condition" in d


CITECAST_VARIANT = "citecast"


@dataclass(frozen=True, slots=True, order=True)
class TaskKey(Record):
    """The identity of a CiteCast unit: (model, task id)."""

    model: str
    task_id: str
    variant: str = field(default=CITECAST_VARIANT, init=False)  # written, so a stored key says what it is

    @property
    def id(self) -> str:
        return f"{self.model}|{CITECAST_VARIANT}|{self.task_id}"

    shard = _shard

    def relpath(self) -> Path:
        return Path(UNITS_DIR) / slug(self.model) / CITECAST_VARIANT / f"{slug(self.task_id)}.json"


def key_from_dict(d: Any) -> UnitKey | TaskKey:
    """The key of a stored unit record (RAP unit or CiteCast task)."""
    if UnitKey.is_key(d):
        return UnitKey.from_dict(d)
    if not isinstance(d, dict) or d.get("variant") != CITECAST_VARIANT:
        raise ValueError("not a CiteCast task key")
    return TaskKey.from_dict(d)


def parse_shard(text: str | None) -> tuple[int, int]:
    """``"i/n"`` -> (i, n) with 0 <= i < n; None -> (0, 1)."""
    if not text:
        return 0, 1
    m = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text)
    if not m or not 0 <= int(m.group(1)) < int(m.group(2)):
        raise InputError(f"--shard must be i/n with 0 <= i < n, got {text!r}")
    return int(m.group(1)), int(m.group(2))


class RunFolderError(UserError, ValueError):
    """A run folder's ``run.json`` is damaged or belongs to another run."""


UNIT_INT_FIELDS = ("attempts", "retries", "prompt_tokens", "completion_tokens", "n_search_calls", "n_tool_calls")
UNIT_FLOAT_FIELDS = ("wall_s", "cost_usd")
UNIT_STR_FIELDS = ("invalid_reason", "invalid_detail", "response_model")


def _finite(v: int | float) -> bool:
    """A finite float, or an int a float can hold (``math.isfinite(10**400)`` raises)."""
    return abs(v) < 1e300 if isinstance(v, int) else math.isfinite(v)


def check_unit(rec: Any, relpath: Path) -> str | None:
    """Why a unit file's content cannot be used (None when it can).

    The record must be an object whose ``key`` is a valid unit key that maps back to ``relpath``
    (a copied or renamed file, e.g. ``zz-backup.json``, is not a unit), whose ``valid`` is a bool,
    whose answer (when valid) is usable (RAP: eight finite nonnegative weights with a positive
    total; CiteCast: a nonnegative integer prediction), and whose counters and metadata have
    their types.
    """
    if not isinstance(rec, dict):
        return f"holds a JSON {type(rec).__name__}, not an object"
    raw_key = rec.get("key")
    try:
        key = key_from_dict(raw_key)
        if not all(isinstance(v, str) for v in raw_key.values()):
            raise ValueError
        if isinstance(key, UnitKey) and not re.fullmatch(r"\d{4}-\d{2}-\d{2}", key.origin):
            raise ValueError
    except (AttributeError, KeyError, TypeError, ValueError):
        return "has no valid 'key' (model, field_id, origin, condition, variant; or model, task_id)"
    if key.relpath() != relpath:
        return f"is named {relpath.as_posix()} but holds unit {key.id} (expected at {key.relpath().as_posix()})"
    if rec.get("unit_id", key.id) != key.id:
        return "has a 'unit_id' that disagrees with its 'key'"
    valid = rec.get("valid")
    if not isinstance(valid, bool):
        return "has a 'valid' that is not true/false"
    if valid and isinstance(key, TaskKey):
        p = rec.get("prediction")
        if not is_count(p):
            return "claims valid but 'prediction' is not a nonnegative integer"
    elif valid:
        w = rec.get("weights")
        if not isinstance(w, list) or len(w) != 8:
            return "claims valid but 'weights' is not a list of eight numbers"
        fault = weight_fault(w)  # evaluation's one weight rule
        if fault is not None:
            return f"claims valid but its weights are unusable: {fault[1]}"
    for name in UNIT_INT_FIELDS:
        v = rec.get(name, 0)
        if not is_count(v):
            return f"has a {name!r} that is not a nonnegative integer"
    for name in UNIT_FLOAT_FIELDS:
        v = rec.get(name)
        if v is not None and (isinstance(v, bool) or not isinstance(v, int | float) or not _finite(v)):
            return f"has a {name!r} that is not a finite number"
    for name in UNIT_STR_FIELDS:
        if rec.get(name) is not None and not isinstance(rec.get(name), str):
            return f"has a {name!r} that is not a string"
    return None


class RunStore:
    """The run directory (see the module docstring)."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)

    # -- one writer at a time ----------------------------------------------------------------------
    @contextlib.contextmanager
    def writer(self) -> Iterator[RunStore]:
        """Hold the folder's lock (re-entrant within a process); a second process is refused.

        Raises :class:`rap_benchmark.core.fsio.FolderBusy` naming the holder's PID. A lock left by a
        killed process is taken over, and the temporary files of dead writers are removed.
        """
        with FolderLock(self.root):
            self.clean_temporaries()
            yield self

    # -- run metadata --------------------------------------------------------------------------
    def read_run(self) -> dict[str, Any] | None:
        """``run.json`` (None when absent); a damaged one raises :class:`RunFolderError` naming it."""
        path = self.root / RUN_FILE
        if not path.is_file():
            return None
        try:
            data = json.loads(path.read_bytes().decode("utf-8"))
        except UnicodeDecodeError:
            raise RunFolderError(f"{path} is not UTF-8 text: the run folder is damaged") from None
        except json.JSONDecodeError as exc:
            raise RunFolderError(
                f"{path} is not valid JSON ({json_reason(exc)} at line {exc.lineno} column {exc.colno}): the run folder "
                "is damaged; restore run.json or start a new --out"
            ) from None
        if not isinstance(data, dict):
            raise RunFolderError(f"{path} must hold a JSON object, got {type(data).__name__}")
        return data

    def init_run(self, meta: dict[str, Any], *, must_match: tuple[str, ...] = ()) -> dict[str, Any]:
        """Create run.json, or check that an existing one agrees on the ``must_match`` keys."""
        self.root.mkdir(parents=True, exist_ok=True)
        old = self.read_run()
        if old is not None:
            diffs = [k for k in must_match if old.get(k) != meta.get(k)]
            if diffs:
                detail = ", ".join(f"{k}: {old.get(k)!r} != {meta.get(k)!r}" for k in diffs)
                raise RunFolderError(f"{self.root} holds a different run ({detail}); use a new --out")
            return old
        atomic_write_text(self.root / RUN_FILE, json.dumps(meta, sort_keys=True, indent=1) + "\n")
        return meta

    # -- units -----------------------------------------------------------------------------------
    def path(self, key: StoreKey) -> Path:
        return self.root / key.relpath()

    def read_unit_file(self, path: Path) -> tuple[dict[str, Any] | None, str | None]:
        """(record, None) for a usable unit file, (None, why) otherwise; never raises on content."""
        rel = path.relative_to(self.root)
        try:
            rec = json.loads(path.read_bytes().decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
            return None, f"{rel.as_posix()}: not valid UTF-8 JSON ({type(exc).__name__})"
        except OSError as exc:
            return None, f"{rel.as_posix()}: unreadable ({exc.strerror})"
        why = check_unit(rec, rel)
        return (rec, None) if why is None else (None, f"{rel.as_posix()} {why}")

    def load(self, key: StoreKey) -> dict[str, Any] | None:
        """The unit's record, or None when it is missing or its file is unusable (then it is rerun)."""
        path = self.path(key)
        if not path.is_file():
            return None
        rec, _ = self.read_unit_file(path)
        return rec

    def is_done(self, key: StoreKey) -> bool:
        """A unit is done when its file holds a usable, valid answer (invalid ones are rerun)."""
        rec = self.load(key)
        return bool(rec and rec["valid"])

    def save(self, key: StoreKey, record: dict[str, Any]) -> Path:
        payload = {"key": key.to_dict(), "unit_id": key.id, **record}
        path = self.path(key)
        atomic_write_text(path, json.dumps(payload, sort_keys=True, ensure_ascii=False, indent=1) + "\n")
        return path

    def scan_units(self) -> tuple[list[dict[str, Any]], list[str]]:
        """(usable unit records in path order, one message per unusable file under ``units/``)."""
        base = self.root / UNITS_DIR
        if not base.is_dir():
            return [], []
        good, bad = [], []
        for path in sorted(base.rglob("*")):
            if not path.is_file() or path.name.startswith("."):  # a writer's temporary
                continue
            if path.suffix != ".json":
                bad.append(f"{path.relative_to(self.root).as_posix()} is not a unit file (ignored)")
                continue
            rec, why = self.read_unit_file(path)
            if rec is not None:
                good.append(rec)
            else:
                bad.append(f"{why} (ignored; the unit is rerun)")
        return good, bad

    def iter_units(self) -> Iterator[dict[str, Any]]:
        """Every usable unit record, in a deterministic (path) order; unusable files are skipped."""
        yield from self.scan_units()[0]

    def clean_temporaries(self) -> int:
        """Remove temporary files left by a killed writer (dead PIDs only); return how many."""
        return len(remove_stale(self.root / UNITS_DIR, recursive=True)) + len(remove_stale(self.root))

    # -- execution log --------------------------------------------------------------------------
    def log_event(self, key: StoreKey | None, event: str, **extra: Any) -> None:
        """Append one line to executions.jsonl and fsync it (a torn last line is cut first)."""
        fields = {"event": event, "pid": os.getpid(), **extra}
        if key is not None:
            fields["unit_id"] = key.id
        self._append_events([fields])

    def _append_events(self, events: list[dict[str, Any]]) -> None:
        with open_append_repaired(self.root / EXEC_LOG) as fh:
            fh.write("".join(json.dumps(e, sort_keys=True) + "\n" for e in events))
            fh.flush()
            os.fsync(fh.fileno())

    def events(self) -> list[dict[str, Any]]:
        """The execution log; a line torn by a crash is skipped."""
        path = self.root / EXEC_LOG
        if not path.is_file():
            return []
        out = []
        for line in path.read_bytes().decode("utf-8", "replace").splitlines():
            try:
                ev = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(ev, dict):
                out.append(ev)
        return out


def merge_stores(sources: list[str | Path], dest: str | Path) -> int:
    """Merge shard stores into one run directory; return the number of units copied.

    Shards hold disjoint unit keys, so files never collide; a key present in two sources with
    different content is an error (the shards were not disjoint runs of the same configuration).
    The destination is locked for the whole merge.
    """
    out = RunStore(dest)
    with out.writer():
        n = 0
        metas = [{k: v for k, v in (RunStore(s).read_run() or {}).items() if k != "shard"} for s in sources]
        base = metas[0]
        for src, mine in zip(sources, metas, strict=True):
            if mine != base:
                raise RunFolderError(f"{src}: run.json differs from {sources[0]}; refusing to merge different runs")
        out.init_run({**base, "shard": None, "merged_from": [str(s) for s in sources]})
        for src in sources:
            store = RunStore(src)
            for rec in store.iter_units():
                key = key_from_dict(rec["key"])
                existing = out.load(key)
                if existing is not None and existing != rec:
                    if existing.get("valid") and not rec.get("valid"):
                        continue
                    if not (rec.get("valid") and not existing.get("valid")):
                        raise RunFolderError(f"unit {key.id} differs between shard stores")
                out.save(key, {k: v for k, v in rec.items() if k not in ("key", "unit_id")})
                n += 1
            out._append_events(store.events())
        return n
