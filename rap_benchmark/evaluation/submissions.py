"""Leaderboard submissions: a prediction file plus metadata, validated and scored in isolation.

A submission is a prediction file (JSONL or parquet, ``rap_benchmark.evaluation.predictions`` format) and its
metadata, given in a sidecar ``<file>.meta.json`` (or ``--meta``) or, for parquet, in the file's
key-value metadata under ``rap_submission``::

    {"model": "org/model-name", "knowledge_cutoff": "2024-10-01" | null,
     "conditions": ["A1"], "tools": ["search"], "attempts": 1,
     "manifest_hash": "<sha256 of the instance's SHA256SUMS>",
     "submitter": "optional", "notes": "optional", "usage": {...}}

``usage`` (``rap_benchmark.evaluation.usage``) is what the run spent; a null is unknown, never 0.

Validation is the prediction validator of ``rap score`` (``validate_predictions``) plus the
metadata checks here (unknown keys rejected, one model per file, conditions and manifest hash
agreeing with the rows and the instance). Scoring is ``rap score``'s scorer
(``score_predictions`` + ``leaderboard``). Every submission is read, validated and scored on its
own, so a bad file can neither crash the run nor change another submission's score. The targets
live only in the scorer's instance folder; nothing here writes them out.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import math
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pandas as pd

from rap_benchmark.core.errors import InputError
from rap_benchmark.core.fsio import atomic_write_text, check_replaceable, replacing, slug
from rap_benchmark.core.records import Condition, Split, Task
from rap_benchmark.core.serial import Record
from rap_benchmark.core.spec import BENCHMARK_VERSION, package_version
from rap_benchmark.evaluation.board.display import NO_SUBMISSIONS, board_columns
from rap_benchmark.evaluation.board.page import write_page
from rap_benchmark.evaluation.board.stats import exposure_strata, model_contrasts, with_rank_intervals, with_strata
from rap_benchmark.evaluation.predictions import (
    DEFAULT_MAX_BYTES,
    Problem,
    ProblemKind,
    Severity,
    ValidationReport,
    n_expected_episodes,
    read_predictions,
    validate_predictions,
    write_predictions,
)
from rap_benchmark.evaluation.predictions.missing import RUN_RECORD
from rap_benchmark.evaluation.report.aggregates import leaderboard, resampling
from rap_benchmark.evaluation.report.tables import leaderboard_markdown
from rap_benchmark.evaluation.scoring import BASELINE_PREFIX, score_predictions
from rap_benchmark.evaluation.usage import BOARD_COLUMNS, Usage, check_usage, usage_from_rows

META_SUFFIX = ".meta.json"
PARQUET_META_KEY = b"rap_submission"
MAX_META_BYTES = 64 * 1024
REQUIRED_META = ("model", "conditions", "manifest_hash")
OPTIONAL_META = ("knowledge_cutoff", "tools", "attempts", "submitter", "notes", "benchmark_version", "usage")
KNOWN_TOOLS = frozenset({"search"})
RETROSPECTIVE = "retrospective"
BOARD_MARKERS = ("board.json", "submissions.json", "reveals.json")
"""Files that mark a board folder (retrospective or Forecast-Live): only such a folder is replaced."""


@dataclass(frozen=True)
class SubmissionMeta(Record):
    """The validated metadata of a submission."""

    model: str
    conditions: tuple[Condition, ...]
    manifest_hash: str
    knowledge_cutoff: dt.date | None = None
    tools: tuple[str, ...] = ()
    attempts: int | None = None
    submitter: str | None = None
    notes: str | None = None
    benchmark_version: str | None = None
    usage: Usage | None = None

    def usage_columns(self, condition: Condition | str) -> dict[str, float]:
        """The board's token, Search-call and cost columns for one condition (NaN: unknown)."""
        entry = self.usage.by_condition.get(Condition(condition)) if self.usage is not None else None
        return entry.board_columns() if entry is not None else dict.fromkeys(BOARD_COLUMNS, math.nan)


@dataclass(frozen=True)
class SubmissionReport:
    """Everything known about one submission after validation."""

    path: Path
    meta: SubmissionMeta | None
    problems: tuple[str, ...]
    validation: ValidationReport | None = field(default=None, repr=False)

    @property
    def accepted(self) -> bool:
        """True when the submission can be scored (no fatal problem in metadata or file)."""
        return self.meta is not None and self.validation is not None and self.validation.scorable

    def summary(self) -> str:
        verdict = "accepted" if self.accepted else "REJECTED"
        lines = [f"{self.path}: {verdict}"]
        lines += [f"  {p}" for p in self.problems]
        return "\n".join(lines)


def _meta_problem(message: str) -> str:
    return f"[fatal] metadata: {message}"


def read_metadata(path: Path, meta_path: Path | None = None) -> tuple[dict[str, Any] | None, list[str]]:
    """The raw metadata dict of a submission (sidecar, then parquet key-value metadata)."""
    sidecar = meta_path or path.with_name(path.name + META_SUFFIX)
    if sidecar.is_file():
        if sidecar.stat().st_size > MAX_META_BYTES:
            return None, [_meta_problem(f"{sidecar.name} is over {MAX_META_BYTES} bytes")]
        try:
            data = json.loads(sidecar.read_bytes().decode("utf-8"))
        except UnicodeDecodeError:
            return None, [_meta_problem(f"{sidecar.name} is not UTF-8")]
        except json.JSONDecodeError as exc:
            return None, [_meta_problem(f"{sidecar.name} is not valid JSON ({exc.msg} at line {exc.lineno})")]
        if not isinstance(data, dict):
            return None, [_meta_problem(f"{sidecar.name} must hold a JSON object, got {type(data).__name__}")]
        return data, []
    if meta_path is not None:
        return None, [_meta_problem(f"no metadata file at {meta_path}")]
    if path.is_file() and path.suffix.lower() == ".parquet":
        import pyarrow.parquet as pq

        try:
            kv = pq.read_metadata(path).metadata or {}
        except Exception:  # noqa: BLE001 - an unreadable file is reported by the file validator
            kv = {}
        if PARQUET_META_KEY in kv:
            try:
                data = json.loads(kv[PARQUET_META_KEY].decode("utf-8"))
            except (UnicodeDecodeError, json.JSONDecodeError):
                return None, [_meta_problem("the parquet key 'rap_submission' is not UTF-8 JSON")]
            if isinstance(data, dict):
                return data, []
            return None, [_meta_problem("the parquet key 'rap_submission' must hold a JSON object")]
    return None, [
        _meta_problem(f"none found: write {sidecar.name} next to the file (or rap_submission parquet metadata)")
    ]


def parse_metadata(data: dict[str, Any], *, instance_hash: str | None) -> tuple[SubmissionMeta | None, list[str]]:
    """Check the metadata dict; return the typed metadata (None when unusable) and the problems."""
    problems: list[str] = []

    def fatal(message: str) -> None:
        problems.append(_meta_problem(message))

    unknown = sorted(set(data) - set(REQUIRED_META) - set(OPTIONAL_META))
    if unknown:
        fatal(f"unknown key(s) {', '.join(unknown)} (allowed: {', '.join(REQUIRED_META + OPTIONAL_META)})")
    missing = [k for k in REQUIRED_META if k not in data]
    if missing:
        fatal(f"missing key(s) {', '.join(missing)}")
    if problems:
        return None, problems
    model = data["model"]
    if not isinstance(model, str) or not model.strip():
        fatal("model must be a non-empty string")
    raw_conditions = data["conditions"]
    if isinstance(raw_conditions, str):
        raw_conditions = [raw_conditions]
    conditions: list[Condition] = []
    if not isinstance(raw_conditions, list) or not raw_conditions:
        fatal('conditions must be a non-empty list such as ["A1"]')
    else:
        for c in raw_conditions:
            try:
                conditions.append(Condition(c))
            except ValueError:
                fatal(f"unknown condition {c!r} (expected A0..A4)")
    mh = data["manifest_hash"]
    if not isinstance(mh, str) or len(mh) != 64:
        fatal("manifest_hash must be the 64-hex sha256 of the instance's SHA256SUMS")
    elif instance_hash is not None and mh != instance_hash:
        fatal(f"manifest_hash {mh[:12]}... is not this instance's ({instance_hash[:12]}...): rebuild against it")
    cutoff = None
    if data.get("knowledge_cutoff") is not None:
        try:
            cutoff = dt.date.fromisoformat(str(data["knowledge_cutoff"]))
        except ValueError:
            fatal(f"knowledge_cutoff must be YYYY-MM-DD or null, got {data['knowledge_cutoff']!r}")
    tools = data.get("tools") or []
    if not isinstance(tools, list) or not all(isinstance(t, str) for t in tools):
        fatal("tools must be a list of strings")
        tools = []
    elif set(tools) - KNOWN_TOOLS:
        fatal(f"unknown tool(s) {', '.join(sorted(set(tools) - KNOWN_TOOLS))} (known: search)")
    attempts = data.get("attempts")
    if attempts is not None and (isinstance(attempts, bool) or not isinstance(attempts, int) or attempts < 1):
        fatal("attempts must be a positive integer")
    if conditions and "search" not in tools and any(c.regime is not None for c in conditions):
        problems.append("[warning] metadata: a Search condition is declared but tools does not list 'search'")
    if conditions and tools and all(c.regime is None for c in conditions):
        problems.append("[warning] metadata: every declared condition is closed-book, yet tools are listed")
    if any(p.startswith("[fatal]") for p in problems):
        return None, problems
    meta = SubmissionMeta(
        model=model,
        conditions=tuple(dict.fromkeys(conditions)),
        manifest_hash=mh,
        knowledge_cutoff=cutoff,
        tools=tuple(tools),
        attempts=attempts,
        submitter=data.get("submitter"),
        notes=data.get("notes"),
        benchmark_version=data.get("benchmark_version"),
    )
    return meta, problems


def _row_problems(report: ValidationReport, meta: SubmissionMeta) -> list[str]:
    """Submission-level checks on the rows the validator kept: one model, the declared one."""
    frame = report.frame
    if not len(frame):
        return ["[fatal] no usable rows: every row was dropped (see the problems above)"]
    models = sorted(set(frame["model"].astype(str)))
    if len(models) > 1:
        return [f"[fatal] mixed models: one submission is one model, found {', '.join(models[:5])}"]
    if models[0] != meta.model:
        return [f"[fatal] model column {models[0]!r} differs from the metadata's {meta.model!r}"]
    return []


def run_folder_problem(path: Path) -> Problem | None:
    """A run folder given as a submission (RAP's or CiteCast's): its predictions.jsonl has no
    metadata, and ``rap submit prepare`` writes the submission and names what it needs."""
    if not (path / RUN_RECORD).is_file():
        return None
    what = (
        f"{path} is a run folder, not a submission: rap submit prepare {path} --out subs/{path.name}.jsonl writes one"
    )
    return Problem(ProblemKind.FILE_MISSING, Severity.FATAL, what)


def validate_submission(
    path: str | Path,
    inst: Any,
    *,
    meta_path: str | Path | None = None,
    split: Split | None = None,
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> SubmissionReport:
    """Validate one submission against an instance; never raises on bad input."""
    path = Path(path)
    if (not_one := run_folder_problem(path)) is not None:
        return SubmissionReport(path, None, (str(not_one),), None)
    try:
        data, problems = read_metadata(path, Path(meta_path) if meta_path else None)
        meta = None
        if data is not None:
            meta, more = parse_metadata(data, instance_hash=inst.manifest_hash)
            problems += more
        validation = validate_predictions(
            path,
            inst,
            expected_conditions=meta.conditions if meta else None,
            split=split,
            max_bytes=max_bytes,
        )
        problems += [str(p) for p in validation.problems]
        if meta is not None and validation.scorable:
            row_problems = _row_problems(validation, meta)
            if row_problems:
                problems += row_problems
                meta = None
        if meta is not None and data is not None:
            usage, more = check_usage(
                data.get("usage"),
                meta.conditions,
                validation.frame if validation.scorable else None,
                max_search_calls=int(inst.spec.max_search_calls),
            )
            problems += more
            meta = None if any(p.startswith("[fatal]") for p in more) else replace(meta, usage=usage)
        return SubmissionReport(path, meta, tuple(problems), validation)
    except Exception as exc:  # noqa: BLE001 - a submission must never take the leaderboard down
        problem = Problem(
            ProblemKind.UNREADABLE, Severity.FATAL, f"could not be validated: {type(exc).__name__}: {exc}"
        )
        return SubmissionReport(path, None, (str(problem),), None)


def episode_scores(report: SubmissionReport, inst: Any) -> pd.DataFrame:
    """The per-episode scores of an accepted submission (empty when rejected): Forecast conditions
    (A0, A1, A3) against ``y``, State conditions (A2, A4) against their State target ``x``;
    ``target`` says which. The board's rows, contrasts and rank intervals all start here."""
    if not report.accepted or report.validation is None or not len(report.validation.frame):
        return pd.DataFrame()
    preds = report.validation.frame.drop(columns=["_line"], errors="ignore")
    is_state = preds["condition"].map(lambda c: Condition(c).task is Task.STATE).to_numpy(bool)
    parts = []
    if (~is_state).any():
        parts.append(score_predictions(inst, preds[~is_state]).assign(target="y"))
    if is_state.any():
        parts.append(score_predictions(inst, preds[is_state], target="x").assign(target="x"))
    return pd.concat(parts, ignore_index=True)


def score_submission(
    report: SubmissionReport,
    inst: Any,
    *,
    split: Split | None = Split.TEST,
    scores: pd.DataFrame | None = None,
    **kwargs: Any,
) -> pd.DataFrame:
    """``rap score``'s leaderboard rows for one accepted submission (empty when rejected), one per
    condition and target as in :func:`episode_scores` (computed here unless ``scores`` are given).
    State rows add ``state_as_forecast``: the same outputs scored against ``y``. Each row carries
    the submission's stated usage for its condition (tokens, Search calls, USD; NaN when unknown).
    """
    if scores is None:
        scores = episode_scores(report, inst)
    if scores.empty:
        return pd.DataFrame()
    assert report.validation is not None and report.meta is not None
    boards = []
    for target, part in scores.groupby("target", sort=False):  # y, then x
        board = leaderboard(part, inst, split=split, forecast_only=False, **kwargs)
        if target == "x" and len(board):
            preds = report.validation.frame.drop(columns=["_line"], errors="ignore")
            state = preds[preds["condition"].isin(set(part["condition"]))]
            as_forecast = leaderboard(
                score_predictions(inst, state, target="y"), inst, split=split, forecast_only=False, **kwargs
            )
            if len(as_forecast):
                as_forecast = as_forecast[["model", "condition", "spearman"]].rename(
                    columns={"spearman": "state_as_forecast"}
                )
                board = board.merge(as_forecast, on=["model", "condition"], how="left")
        if len(board):
            boards.append(board.assign(target=target))
    if not boards:
        return pd.DataFrame()
    board = pd.concat(boards, ignore_index=True)
    meta = report.meta
    board.insert(2, "knowledge_cutoff", meta.knowledge_cutoff.isoformat() if meta.knowledge_cutoff else None)
    board.insert(3, "tools", ",".join(meta.tools))
    board.insert(4, "submission", report.path.name)
    usage = pd.DataFrame([meta.usage_columns(c) for c in board["condition"]], index=board.index)
    return pd.concat([board, usage], axis=1)


def apply_ranking_rule(
    board: pd.DataFrame, missing: dict[tuple[str, str], tuple[str, ...]], n_expected: int
) -> pd.DataFrame:
    """The ranking rule: a row is ranked only when it covers every expected episode of its split.

    Adds ``coverage`` (episodes covered, e.g. ``"2/40"``) and ``rank`` (1, 2, ... per condition
    over complete rows by Spearman, exact ties sharing the better rank; missing for partial rows, which are reported but never
    ranked, e.g. a two-episode ``--limit`` run). Within a condition, complete rows come first.
    """
    if board.empty:
        return board
    lacking = [len(missing.get((m, c), ())) for m, c in zip(board["model"], board["condition"], strict=True)]
    board = board.assign(coverage=[f"{n_expected - k}/{n_expected}" for k in lacking])
    complete = pd.Series([k == 0 for k in lacking], index=board.index)
    board = board.assign(_complete=complete).sort_values(
        ["condition", "_complete", "spearman", "model"], ascending=[True, False, False, True], kind="stable"
    )
    ranked = board["spearman"].where(board["_complete"])
    rank = ranked.groupby(board["condition"], sort=False).rank(method="min", ascending=False)
    return board.drop(columns="_complete").assign(rank=rank.astype("Int64")).reset_index(drop=True)


@dataclass(frozen=True)
class LeaderboardResult:
    """The scored board and what stands behind it.

    ``board``: one row per (model, condition) with coverage, rank, rank interval, usage and the
    strict/exposed strata; ``scores``: every accepted submission's episode scores; ``contrasts``:
    model-vs-model paired contrasts per Forecast condition; ``exposure``: the strict-vs-exposed
    table; ``meta``: what it was scored against (instance, manifest hash, split, resamples, seed).
    """

    reports: tuple[SubmissionReport, ...]
    board: pd.DataFrame
    scores: pd.DataFrame = field(default_factory=pd.DataFrame, repr=False)
    contrasts: pd.DataFrame = field(default_factory=pd.DataFrame, repr=False)
    exposure: pd.DataFrame = field(default_factory=pd.DataFrame, repr=False)
    meta: dict[str, Any] = field(default_factory=dict)

    def relocated(self, built: Path, final: Path) -> LeaderboardResult:
        """This result with each submission read from inside the folder ``built`` named by its place
        in ``final`` (its path and any problem quoting it): a :func:`building_board` folder's files,
        named as they will be once it is swapped into place."""

        return replace(self, reports=tuple(moved_report(r, built, final) for r in self.reports))


def moved_report(report: Any, built: Path, final: Path) -> Any:
    """A submission's validation report (RAP's or CiteCast's: a dataclass with ``path`` and
    ``problems``) read from inside the folder ``built``, named by its place in ``final``: its path
    and any problem quoting it. A report from elsewhere is returned as it is."""
    if not report.path.is_relative_to(built):
        return report
    problems = tuple(p.replace(str(built), str(final)) for p in report.problems)
    return replace(report, path=final / report.path.relative_to(built), problems=problems)


def board_meta(inst: Any, split: Split | None, n_resamples: int | None, seed: int | None) -> dict[str, Any]:
    """What a board was scored against, as its files and card state it."""
    n_res, seed_ = resampling(inst, n_resamples, seed)
    return {
        "instance": inst.spec.name,
        "benchmark_version": inst.spec.version,  # the instance's: what its scores mean
        "package_version": package_version(),  # the rap_benchmark package that scored it
        "manifest_hash": inst.manifest_hash,
        "split": split.value if split is not None else "all",
        "n_resamples": n_res,
        "seed": seed_,
    }


def _rejected(report: SubmissionReport, problem: str) -> SubmissionReport:
    return replace(report, meta=None, problems=(*report.problems, problem))


def score_submissions(
    paths: Iterable[str | Path],
    inst: Any,
    *,
    split: Split | None = Split.TEST,
    n_resamples: int | None = None,
    seed: int | None = None,
    max_bytes: int = DEFAULT_MAX_BYTES,
    registry: Any = None,
    contrasts: bool = True,
) -> LeaderboardResult:
    """Validate and score each submission on its own (``paths`` is read once, in order: a progress
    bar may wrap it); the board stacks the accepted ones.

    A submission whose model and condition were already given by an earlier accepted submission
    is refused (the earlier one is kept): a file can never remove or replace another's scores.
    Rows are ranked per condition under :func:`apply_ranking_rule` (complete coverage only), with
    bootstrap rank intervals; model-vs-model contrasts (``contrasts``) and the strict/exposed
    strata (cutoffs from the metadata, else ``registry``, a ``ModelRegistry``) come with them.
    """
    reports, boards, all_scores = [], [], []
    owners: dict[tuple[str, Condition], Path] = {}
    missing: dict[tuple[str, str], tuple[str, ...]] = {}
    cutoffs: dict[str, str | None] = {}
    for p in paths:
        rep = validate_submission(p, inst, split=split, max_bytes=max_bytes)
        if rep.accepted and rep.meta is not None:
            taken = sorted({(rep.meta.model, c) for c in rep.meta.conditions} & set(owners), key=str)
            if taken:
                clash = ", ".join(f"{m} / {c.value} (in {owners[(m, c)].name})" for m, c in taken)
                rep = _rejected(rep, f"[fatal] already submitted: {clash}; the earlier submission is kept")
        if rep.accepted and rep.meta is not None:
            try:
                scores = episode_scores(rep, inst)
                boards.append(
                    score_submission(rep, inst, split=split, scores=scores, n_resamples=n_resamples, seed=seed)
                )
                all_scores.append(scores)
                owners.update({(rep.meta.model, c): rep.path for c in rep.meta.conditions})
                missing.update(rep.validation.missing if rep.validation else {})
                cutoffs[rep.meta.model] = rep.meta.knowledge_cutoff.isoformat() if rep.meta.knowledge_cutoff else None
            except Exception as exc:  # noqa: BLE001 - reported, never fatal to the other submissions
                rep = _rejected(rep, f"[fatal] scoring failed: {exc}")
        reports.append(rep)
    boards = [b for b in boards if len(b)]
    board = pd.concat(boards, ignore_index=True) if boards else pd.DataFrame()
    scores = pd.concat(all_scores, ignore_index=True) if all_scores else pd.DataFrame()
    board = apply_ranking_rule(board, missing, n_expected_episodes(inst, split))
    if len(board):
        board.insert(0, "track", RETROSPECTIVE)
        board.insert(1, "split", split.value if split is not None else "all")
    kw: dict[str, Any] = {"split": split, "n_resamples": n_resamples, "seed": seed}
    board = with_rank_intervals(board, scores, inst, **kw)
    strata = exposure_strata(scores, inst, cutoffs, registry=registry, **kw) if len(scores) else pd.DataFrame()
    board = with_strata(board, strata)
    table = model_contrasts(scores, inst, **kw) if contrasts and len(scores) else pd.DataFrame()
    return LeaderboardResult(tuple(reports), board, scores, table, strata, board_meta(inst, split, n_resamples, seed))


def meta_from_rows(
    frame: pd.DataFrame,
    *,
    usage: dict[str, Any],
    knowledge_cutoff: str | dt.date | None = None,
    attempts: int = 1,
    submitter: str | None = None,
    notes: str | None = None,
    benchmark_version: str | None = BENCHMARK_VERSION,
) -> dict[str, Any]:
    """The ``.meta.json`` of a submission, read from its prediction rows so it cannot disagree
    with them: one model and one instance (else an :class:`InputError`), the conditions found,
    ``tools`` (``search`` when a Search condition is present), ``attempts``, and ``usage``.
    ``benchmark_version``: the instance version the rows forecast (None: unknown)."""
    if not len(frame):
        raise InputError("no predictions to submit")
    models = sorted(set(frame["model"].astype(str)))
    hashes = sorted(set(frame["manifest_hash"].astype(str)))
    if len(models) != 1:
        raise InputError(f"one submission is one model, the rows name {', '.join(models)}")
    if len(hashes) != 1:
        raise InputError(
            f"the rows of {models[0]} come from {len(hashes)} instances (manifest hashes "
            f"{', '.join(h[:12] for h in hashes)}); a submission is scored against one: convert each instance's "
            "predictions on their own"
        )
    try:
        cutoff = None if knowledge_cutoff is None else dt.date.fromisoformat(str(knowledge_cutoff))
    except ValueError:
        raise InputError(f"knowledge_cutoff must be YYYY-MM-DD, got {knowledge_cutoff!r}") from None
    conditions = tuple(sorted({Condition(c) for c in frame["condition"]}, key=lambda c: c.value))
    meta = SubmissionMeta(
        model=models[0],
        conditions=conditions,
        manifest_hash=hashes[0],
        knowledge_cutoff=cutoff,
        tools=("search",) if any(c.regime is not None for c in conditions) else (),
        attempts=attempts,
        submitter=submitter,
        notes=notes,
        benchmark_version=benchmark_version,
    )
    return {**meta.to_dict(), "usage": usage}


def write_submission(frame: pd.DataFrame, out: str | Path, meta: dict[str, Any]) -> tuple[Path, Path]:
    """Write the prediction file ``out`` and ``out.meta.json`` beside it (each replaced
    atomically); return both paths."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    write_predictions(frame, out)
    meta_path = atomic_write_text(
        out.with_name(out.name + META_SUFFIX), json.dumps(meta, indent=1, ensure_ascii=False) + "\n"
    )
    return out, Path(meta_path)


def split_by_model(
    path: str | Path, out_dir: str | Path, *, meta: dict[str, Any] | None = None, only_if_mixed: bool = False
) -> list[Path]:
    """Split a multi-model prediction file (e.g. ``rap baselines``'s) into one submission per model.

    Writes ``<out_dir>/<model slug>.jsonl`` and its :func:`meta_from_rows` sidecar for each model
    (an :class:`InputError` when one model's rows come from several instances); knowledge_cutoff,
    attempts, submitter, notes and benchmark_version come from ``meta`` (else the file's own
    sidecar; benchmark_version is null unless stated). With ``only_if_mixed`` a one-model file is
    returned as is. The file must read cleanly (:func:`read_predictions`).
    """
    frame = read_predictions(path)
    if only_if_mixed and frame["model"].nunique() <= 1:
        return [Path(path)]
    if meta is None:
        meta, _ = read_metadata(Path(path))
    keep = ("knowledge_cutoff", "attempts", "submitter", "notes", "benchmark_version")
    # the rows do not say which instance version they forecast: unknown unless the metadata states it
    given = {"benchmark_version": None} | {k: v for k, v in (meta or {}).items() if k in keep and v is not None}
    parts = []
    for model, rows in frame.groupby("model", sort=True):
        baseline = str(model).startswith(BASELINE_PREFIX)
        usage = usage_from_rows(
            rows,
            source=f"statistical baseline in {Path(path).name}: no model calls" if baseline else Path(path).name,
            no_model_calls=baseline,
        )
        rows = rows.reset_index(drop=True)
        parts.append((rows, Path(out_dir) / f"{slug(str(model))}.jsonl", meta_from_rows(rows, usage=usage, **given)))
    return [write_submission(rows, target, sidecar)[0] for rows, target, sidecar in parts]


def check_board_folder(out: str | Path) -> Path:
    """``out`` when a board may be written there: absent, an empty folder or a board folder (one
    holding a :data:`BOARD_MARKERS` file); anything else is refused, never replaced."""
    check_replaceable(out, BOARD_MARKERS, kind="board")
    return Path(out)


@contextlib.contextmanager
def building_board(out: str | Path) -> Iterator[Path]:
    """Build a board folder whole: yield a fresh folder beside ``out`` to write every file of the
    board into (split submissions included); when the block ends it takes the place of ``out`` in
    one swap. On an exception, or a kill, ``out`` is left as it was (a killed build's folder is
    removed by the next one). An ``out`` that :func:`check_board_folder` refuses is refused here too,
    before anything is written."""
    with replacing(out, BOARD_MARKERS, kind="board") as folder:
        yield folder


def write_leaderboard(result: LeaderboardResult, out: str | Path, *, page: bool = True) -> Path:
    """Write the board folder ``out`` whole (:func:`building_board`, :func:`leaderboard_files`)."""
    with building_board(out) as folder:
        leaderboard_files(result, folder, page=page)
    return Path(out)


def leaderboard_files(result: LeaderboardResult, folder: Path, *, page: bool = True) -> None:
    """Write the retrospective board's files into ``folder`` (a :func:`building_board` folder):
    ``leaderboard.csv`` and ``.md``, ``submissions.json`` (every verdict and problem, metadata and
    usage included), ``contrasts.csv`` (model vs model), ``strict_vs_exposed.csv``, ``board.json``
    (what it was scored against) and, with ``page``, ``forest.png``, ``cost_vs_score.png`` and the
    self-contained ``index.html``."""
    board_files(
        folder,
        result.board,
        verdict_rows(result.reports),
        stem="leaderboard",
        verdicts_name="submissions",
        meta=result.meta,
        note=BOARD_NOTE,
        title=f"RAP leaderboard: {result.meta.get('instance', '')}",
        contrasts=result.contrasts,
        page=page,
    )
    for name, frame in (("contrasts", result.contrasts), ("strict_vs_exposed", result.exposure)):
        atomic_write_text(folder / f"{name}.csv", frame.to_csv(index=False, lineterminator="\n"))


def verdict_rows(reports: Iterable[Any]) -> list[dict[str, Any]]:
    """``submissions.json``: per submission report (RAP or CiteCast), its path, verdict, metadata and problems."""
    return [
        {
            "submission": str(r.path),
            "accepted": r.accepted,
            "meta": r.meta.to_dict() if r.meta else None,
            "problems": list(r.problems),
        }
        for r in reports
    ]


def write_board_files(out: str | Path, board: pd.DataFrame, verdicts: list[dict[str, Any]], **kwargs: Any) -> Path:
    """Write the board folder ``out`` whole (:func:`building_board`) with :func:`board_files`."""
    with building_board(out) as folder:
        board_files(folder, board, verdicts, **kwargs)
    return Path(out)


def board_files(
    folder: Path,
    board: pd.DataFrame,
    verdicts: list[dict[str, Any]],
    *,
    stem: str,
    verdicts_name: str,
    meta: dict[str, Any],
    note: str,
    title: str,
    head: str = "",
    contrasts: pd.DataFrame | None = None,
    page: bool = True,
    columns: Sequence[tuple[str, Any]] | None = None,
) -> None:
    """What every board folder holds, written into ``folder``: ``<stem>.csv`` (raw numbers),
    ``<stem>.md`` (``head``, the board's cells, ``note``), ``<verdicts_name>.json`` and, when
    ``meta`` says what it was scored against, ``board.json`` and (with ``page``) the figures and
    ``index.html``. ``columns``: the markdown's (header, cell) pairs (default: the retrospective board's)."""
    atomic_write_text(folder / f"{stem}.csv", board.to_csv(index=False, lineterminator="\n"))
    board_md = leaderboard_markdown(board, columns or board_columns(board), note=note, empty=NO_SUBMISSIONS)
    atomic_write_text(folder / f"{stem}.md", head + board_md)
    atomic_write_text(folder / f"{verdicts_name}.json", json.dumps(verdicts, indent=1, ensure_ascii=False) + "\n")
    if meta:
        atomic_write_text(folder / "board.json", json.dumps(meta, indent=1, sort_keys=True) + "\n")
    if page and meta:
        contrasts = pd.DataFrame() if contrasts is None else contrasts
        write_page(folder, board, meta=meta, verdicts=verdicts, contrasts=contrasts, note=note, title=title)


BOARD_NOTE = (
    "Ranked per condition; a row without a rank covers only part of the split (reported, not ranked); in "
    "brackets the rank's 95% block-bootstrap interval (rows whose intervals overlap are not told apart). "
    "Scores are Forecast Spearman against y; a condition marked (x) is a State condition scored against x "
    "(State fidelity; State as Forecast scores the same outputs against y). Strict/exposed: Spearman on the "
    "cells whose origin is on or after / before the model's knowledge cutoff (n/a for a statistical baseline, "
    "which reads no text). Usage as the submission's metadata states it, per episode (totals in "
    "leaderboard.csv; unknown is never 0). "
    "95% intervals: block bootstrap over dependency blocks; no multiplicity correction."
)
