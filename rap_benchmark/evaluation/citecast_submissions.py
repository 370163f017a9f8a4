"""CiteCast submissions: one forecast per Test task plus metadata, checked against a CiteCast instance.

The file is JSON lines, one row per task (what ``rap submit prepare`` writes from a
``rap citecast run`` folder)::

    {"model": "org/name", "task_id": "cc_02068fd99e34b9b2", "prediction": 12, "valid": true,
     "invalid_reason": null, "prompt_tokens": 5120, "completion_tokens": 310, "cost_usd": 0.0021,
     "n_tool_calls": 6, "attempts": 1, "response_model": "org/name", "invalid_detail": null}

and ``FILE.meta.json`` beside it::

    {"benchmark": "citecast", "model": "org/name", "manifest_hash": "<the instance's SHA256SUMS sha256>",
     "knowledge_cutoff": "2025-06-01", "submitter": "...", "notes": "...", "citecast_version": "1.0.0",
     "usage": {"source": "...", "prices_as_of": null, "tasks": 30, "input_tokens": 153600,
               "output_tokens": 9300, "tool_calls": 180, "cost_usd": 0.063}}

``"benchmark": "citecast"`` is what tells it from a RAP submission. A usage number that is null is
unknown, never 0. The rows carry no reward: the scorer computes it from the targets it holds
(:mod:`rap_benchmark.evaluation.board.citecast`). Validation never raises on bad input; it names
every problem as ``[fatal]``, ``[error]`` (the row is dropped or scored as invalid) or ``[warning]``.
"""

from __future__ import annotations

import datetime as dt
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rap_benchmark.citecast.records import TaskSplit
from rap_benchmark.citecast.reward import PredictionError, validate_prediction
from rap_benchmark.core.errors import InputError
from rap_benchmark.core.records import is_count
from rap_benchmark.core.serial import Record
from rap_benchmark.core.spec import CITECAST_VERSION
from rap_benchmark.core.sums import manifest_hash
from rap_benchmark.evaluation.predictions import DEFAULT_MAX_BYTES, Problem, ProblemKind, Severity
from rap_benchmark.evaluation.predictions.missing import RUN_RECORD, run_kind
from rap_benchmark.evaluation.predictions.problems import Tally, listing, short
from rap_benchmark.evaluation.predictions.reading import read_json_lines
from rap_benchmark.evaluation.submissions import META_SUFFIX, read_metadata, run_folder_problem

CITECAST = "citecast"
"""The ``benchmark`` of a CiteCast submission's metadata (and the board's track)."""
REQUIRED_META = ("benchmark", "model", "manifest_hash")
OPTIONAL_META = ("knowledge_cutoff", "submitter", "notes", "citecast_version", "usage")
USAGE_KEYS = ("source", "prices_as_of", "tasks", "input_tokens", "output_tokens", "tool_calls", "cost_usd")
USAGE_ROWS = {"input_tokens": "prompt_tokens", "output_tokens": "completion_tokens", "tool_calls": "n_tool_calls"}
"""Usage count -> the row column that sums to it (``cost_usd`` sums ``cost_usd``)."""
REQUIRED_COLUMNS = ("model", "task_id", "prediction", "valid")
COUNT_COLUMNS = ("attempts", "prompt_tokens", "completion_tokens", "n_tool_calls")
TEXT_COLUMNS = ("invalid_reason", "invalid_detail", "response_model")
COLUMNS = (*REQUIRED_COLUMNS, *TEXT_COLUMNS, *COUNT_COLUMNS, "cost_usd")
"""Every column a CiteCast submission may have, in file order."""


def is_citecast(path: str | Path, meta_path: str | Path | None = None) -> bool:
    """Whether the metadata of the submission at ``path`` says ``"benchmark": "citecast"`` (or
    ``path`` is the folder of a ``rap citecast run``)."""
    if (Path(path) / RUN_RECORD).is_file():
        return run_kind(Path(path)) == CITECAST
    data, _ = read_metadata(Path(path), Path(meta_path) if meta_path else None)
    return data is not None and data.get("benchmark") == CITECAST


@dataclass(frozen=True)
class CiteCastMeta(Record):
    """The validated metadata of a CiteCast submission."""

    model: str
    manifest_hash: str
    knowledge_cutoff: dt.date | None = None
    submitter: str | None = None
    notes: str | None = None
    citecast_version: str | None = None
    usage: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        """The ``.meta.json`` object (``benchmark`` first)."""
        return {"benchmark": CITECAST, **super().to_dict()}


@dataclass(frozen=True)
class CiteCastReport:
    """A CiteCast submission after validation: its metadata (None when unusable), every problem,
    and the forecast of each Test task it covers (None: an invalid row, which scores 0)."""

    path: Path
    meta: CiteCastMeta | None
    problems: tuple[str, ...]
    predictions: dict[str, int | None] = field(default_factory=dict, repr=False)
    n_test_tasks: int = 0

    @property
    def accepted(self) -> bool:
        return self.meta is not None and not any(p.startswith("[fatal]") for p in self.problems)

    def summary(self) -> str:
        verdict = "accepted" if self.accepted else "REJECTED"
        covered = f" ({len(self.predictions)} of {self.n_test_tasks} Test tasks)" if self.accepted else ""
        return "\n".join([f"{self.path}: {verdict}{covered}", *(f"  {p}" for p in self.problems)])


class _Rows:
    """The sink of the strict JSON-lines reader: checks each row, keeps the usable ones."""

    def __init__(self) -> None:
        self.tally = Tally()
        self.rows: list[dict[str, Any]] = []
        self.unknown: dict[str, int] = {}  # unknown column -> first line

    def add(self, obj: dict[str, Any], line: int) -> None:
        for key in obj:
            if key not in COLUMNS:
                self.unknown.setdefault(str(key), line)
        model, task = obj.get("model"), obj.get("task_id")
        if not isinstance(model, str) or not model.strip() or not isinstance(task, str) or not task.strip():
            self.tally.add(ProblemKind.BAD_TYPE, "have a missing or empty 'model' or 'task_id' (dropped)", line)
            return
        if not isinstance(obj.get("valid"), bool):
            self.tally.add(ProblemKind.BAD_TYPE, "have no boolean 'valid' (dropped)", line)
            return
        row = {"model": model, "task_id": task, "line": line, "prediction": None, "valid": obj["valid"]}
        for col in COUNT_COLUMNS:
            value = obj.get(col)
            row[col] = value if is_count(value) else None
            if value is not None and not is_count(value):
                self.tally.add(ProblemKind.BAD_TYPE, f"have a {col!r} that is not a count (read as unknown)", line)
        cost = obj.get("cost_usd")
        finite = isinstance(cost, int | float) and not isinstance(cost, bool) and math.isfinite(cost) and cost >= 0
        row["cost_usd"] = float(cost) if finite else None
        if cost is not None and not finite:
            self.tally.add(ProblemKind.BAD_TYPE, "have a 'cost_usd' that is not a number >= 0 (read as unknown)", line)
        if row["valid"]:
            try:
                row["prediction"] = validate_prediction(obj.get("prediction"))
            except PredictionError as exc:
                row["valid"] = False
                what = "claim valid but carry no usable prediction (scored as invalid: 0)"
                self.tally.add(ProblemKind.BAD_TYPE, what, line, example=short(str(exc), 60))
        elif not isinstance(obj.get("invalid_reason"), str) or not obj["invalid_reason"].strip():
            self.tally.add(ProblemKind.NO_REASON, "are valid: false without an invalid_reason (kept, scored 0)", line)
        self.rows.append(row)


def _fatal(message: str) -> str:
    return f"[fatal] metadata: {message}"


def _check_usage(usage: Any, rows: list[dict[str, Any]]) -> list[str]:
    """The usage block against the rows: known keys, counts, and totals equal to the rows' own sums."""
    if usage is None:
        return ["[warning] metadata: no usage stated (tokens and cost shown as unknown)"]
    if not isinstance(usage, dict):
        return [_fatal("usage must be a JSON object")]
    problems = []
    unknown = sorted(set(usage) - set(USAGE_KEYS))
    if unknown:
        problems.append(_fatal(f"unknown usage key(s) {', '.join(unknown)} (allowed: {', '.join(USAGE_KEYS)})"))
    if usage.get("tasks") != len(rows):
        problems.append(_fatal(f"usage.tasks is {short(usage.get('tasks'))}, the file has {len(rows)} rows"))
    for key in (*USAGE_ROWS, "cost_usd"):
        value = usage.get(key)
        ok = is_count(value) if key != "cost_usd" else isinstance(value, int | float) and not isinstance(value, bool)
        if value is None:
            continue
        if not ok or (key == "cost_usd" and not (math.isfinite(value) and value >= 0)):
            problems.append(_fatal(f"usage.{key} must be a nonnegative {'count' if key != 'cost_usd' else 'number'}"))
            continue
        column = USAGE_ROWS.get(key, "cost_usd")
        values = [r[column] for r in rows]
        if values and all(v is not None for v in values) and not math.isclose(sum(values), value, abs_tol=1e-6):
            problems.append(_fatal(f"usage.{key} is {value}, the rows' {column} sum to {sum(values)}"))
    return problems


def parse_meta(data: dict[str, Any], *, instance_hash: str) -> tuple[CiteCastMeta | None, list[str]]:
    """Check a CiteCast metadata dict; return the typed metadata (None when unusable) and the problems."""
    problems = []
    unknown = sorted(set(data) - set(REQUIRED_META) - set(OPTIONAL_META))
    if unknown:
        problems.append(
            _fatal(f"unknown key(s) {', '.join(unknown)} (allowed: {', '.join(REQUIRED_META + OPTIONAL_META)})")
        )
    missing = [k for k in REQUIRED_META if k not in data]
    if missing:
        problems.append(_fatal(f"missing key(s) {', '.join(missing)}"))
    if problems:
        return None, problems
    if data["benchmark"] != CITECAST:
        problems.append(_fatal(f"benchmark is {short(data['benchmark'])}, not 'citecast'"))
    if not isinstance(data["model"], str) or not data["model"].strip():
        problems.append(_fatal("model must be a non-empty string"))
    mh = data["manifest_hash"]
    if mh != instance_hash:
        problems.append(
            _fatal(
                f"manifest_hash {short(mh, 20)} is not this CiteCast instance's ({instance_hash[:12]}...): "
                "run the tasks of the instance you submit to"
            )
        )
    cutoff = None
    if data.get("knowledge_cutoff") is not None:
        try:
            cutoff = dt.date.fromisoformat(str(data["knowledge_cutoff"]))
        except ValueError:
            problems.append(
                _fatal(f"knowledge_cutoff must be YYYY-MM-DD or null, got {short(data['knowledge_cutoff'])}")
            )
    if problems:
        return None, problems
    keep = {k: data.get(k) for k in ("submitter", "notes", "citecast_version", "usage")}
    return CiteCastMeta(model=data["model"], manifest_hash=mh, knowledge_cutoff=cutoff, **keep), problems


def validate_citecast_submission(
    path: str | Path, inst: Any, *, meta_path: str | Path | None = None, max_bytes: int = DEFAULT_MAX_BYTES
) -> CiteCastReport:
    """Validate one CiteCast submission against the instance ``inst`` (a loaded
    :class:`~rap_benchmark.citecast.instance.CiteCastInstance`); never raises on bad input.

    Rows of tasks the instance does not have, of train tasks, and every copy of a repeated task
    are dropped; one model per file, the metadata's. A Test task without a row is a warning: it
    scores 0, as the card's mean over tasks counts it."""
    path = Path(path)
    if (not_one := run_folder_problem(path)) is not None:
        return CiteCastReport(path, None, (str(not_one),))
    data, problems = read_metadata(path, Path(meta_path) if meta_path else None)
    if data is not None and data.get("benchmark") != CITECAST:
        what = 'not a CiteCast submission (no "benchmark": "citecast"): score a RAP one against a RAP instance'
        return CiteCastReport(path, None, (_fatal(what),))
    meta, more = parse_meta(data, instance_hash=manifest_hash(inst.root)) if data is not None else (None, [])
    problems += more
    sink = _Rows()
    file_problems: list[Problem] = read_json_lines(path, sink, max_bytes=max_bytes)
    if sink.unknown:
        cols = sorted(sink.unknown, key=sink.unknown.get)
        file_problems.append(
            Problem(
                ProblemKind.UNKNOWN_COLUMN,
                Severity.FATAL,
                f"unknown column(s) {listing([short(c, 40) for c in cols])} (allowed: {', '.join(COLUMNS)})",
            )
        )
    test = {t for t, task in inst.tasks.items() if task.split is TaskSplit.TEST}
    seen: dict[str, list[int]] = {}
    for row in sink.rows:
        seen.setdefault(row["task_id"], []).append(row["line"])
    for row in sink.rows:
        task = inst.tasks.get(row["task_id"])
        if task is None:
            sink.tally.add(
                ProblemKind.UNKNOWN_EPISODE, "name a task this instance does not have (dropped)", row["line"]
            )
        elif task.split is not TaskSplit.TEST:
            sink.tally.add(ProblemKind.UNKNOWN_EPISODE, "are train tasks; the board scores Test (dropped)", row["line"])
        elif len(seen[row["task_id"]]) > 1:
            sink.tally.add(ProblemKind.DUPLICATE, "repeat a task; every copy is dropped", row["line"])
    kept = [r for r in sink.rows if r["task_id"] in test and len(seen[r["task_id"]]) == 1]
    file_problems += sink.tally.problems()
    problems += [str(p) for p in file_problems]
    if not any(p.severity is Severity.FATAL for p in file_problems):
        models = sorted({r["model"] for r in kept})
        if not kept:
            problems.append("[fatal] no usable rows: every row was dropped (see the problems above)")
        elif len(models) > 1:
            problems.append(f"[fatal] mixed models: one submission is one model, found {listing(models, 5)}")
        elif meta is not None and models[0] != meta.model:
            problems.append(f"[fatal] model column {short(models[0])} differs from the metadata's {short(meta.model)}")
        missing = len(test) - len(kept)
        if kept and missing:
            problems.append(f"[warning] {missing} of {len(test)} Test tasks have no row: each scores 0")
        if meta is not None:
            problems += _check_usage(meta.usage, sink.rows)
    fatal = any(p.startswith("[fatal]") for p in problems)
    predictions = {} if fatal else {r["task_id"]: r["prediction"] for r in sorted(kept, key=lambda r: r["task_id"])}
    return CiteCastReport(path, None if fatal else meta, tuple(problems), predictions, len(test))


def citecast_usage(rows: list[dict[str, Any]], *, source: str, prices: Any = None) -> dict[str, Any]:
    """The ``usage`` of a submission's rows: token and tool-call sums (unknown when a row lacks
    one), the cost summed when every row has one, else the price table's cost of the tokens."""
    usage: dict[str, Any] = {"source": source, "prices_as_of": None, "tasks": len(rows)}
    for key, column in USAGE_ROWS.items():
        values = [r.get(column) for r in rows]
        usage[key] = sum(values) if all(v is not None for v in values) else None
    costs = [r.get("cost_usd") for r in rows]
    usage["cost_usd"] = float(sum(costs)) if rows and all(c is not None for c in costs) else None
    model = rows[0]["model"] if rows else ""
    if usage["cost_usd"] is None and prices is not None and None not in (usage["input_tokens"], usage["output_tokens"]):
        usage["cost_usd"] = prices.cost_usd(model, usage["input_tokens"], usage["output_tokens"])
        usage["prices_as_of"] = prices.as_of if usage["cost_usd"] is not None else None
    return usage


def write_citecast_submission(
    rows: list[dict[str, Any]],
    out: str | Path,
    *,
    manifest_hash: str,
    usage: dict[str, Any],
    knowledge_cutoff: str | None = None,
    submitter: str | None = None,
    notes: str | None = None,
) -> tuple[Path, Path]:
    """Write ``out`` (one row per task, :data:`COLUMNS`) and ``out.meta.json``; return both paths.
    Every input is checked before the first write; both files are replaced atomically."""
    from rap_benchmark.core.fsio import atomic_write_text

    out = Path(out)
    if out.suffix.lower() != ".jsonl":
        raise InputError(f"a CiteCast submission is JSON lines: --out must end in .jsonl, got {out.name}")
    models = sorted({r["model"] for r in rows})
    if len(models) != 1:
        raise InputError(f"one submission is one model, the rows name {', '.join(models) or 'none'}")
    try:
        cutoff = None if knowledge_cutoff is None else dt.date.fromisoformat(str(knowledge_cutoff))
    except ValueError:
        raise InputError(f"knowledge_cutoff must be YYYY-MM-DD, got {knowledge_cutoff!r}") from None
    meta = CiteCastMeta(models[0], manifest_hash, cutoff, submitter, notes, CITECAST_VERSION, usage)
    out.parent.mkdir(parents=True, exist_ok=True)
    lines = "".join(json.dumps({c: r.get(c) for c in COLUMNS}, ensure_ascii=False) + "\n" for r in rows)
    atomic_write_text(out, lines)
    meta_path = atomic_write_text(
        out.with_name(out.name + META_SUFFIX), json.dumps(meta.to_dict(), indent=1, ensure_ascii=False) + "\n"
    )
    return out, Path(meta_path)
