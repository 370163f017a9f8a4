"""Validating prediction rows against an instance: the manifest hash, conditions, unknown,
pending, duplicate and missing episodes; and which file owns a (model, condition)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from rap_benchmark.core.records import Condition, Split, parse_enum
from rap_benchmark.core.schemas import pending_mask
from rap_benchmark.evaluation.predictions.problems import (
    DEFAULT_MAX_BYTES,
    KEY_COLUMNS,
    LINE,
    MAX_LISTED,
    Problem,
    ProblemKind,
    Severity,
    ValidationReport,
    echo,
    empty_frame,
    line_list,
    lines_text,
    listing,
    short,
)
from rap_benchmark.evaluation.predictions.reading import Rows, load_predictions

if TYPE_CHECKING:
    from rap_benchmark.core.artifacts import Instance


def _episode_table(inst: Instance, split: Split | None, *, pending: bool = False) -> pd.DataFrame:
    """The (field, origin, split) episodes; those whose y is pending only with ``pending``."""
    cols = ["field_id", "origin", "split", *(["flags"] if "flags" in inst.episodes else [])]
    eps = inst.episodes[cols].drop_duplicates(["field_id", "origin"])
    if not pending and "flags" in eps:
        eps = eps[~pending_mask(eps)]
    eps = eps[["field_id", "origin", "split"]].assign(origin=eps["origin"].astype(str).str[:10])
    if split is not None:
        eps = eps[eps["split"] == parse_enum(Split, split).value]
    return eps.sort_values(["field_id", "origin"]).reset_index(drop=True)


def n_expected_episodes(inst: Instance, split: Split | None) -> int:
    """How many (field, origin) episodes a complete prediction file covers for ``split`` (None: all)."""
    return len(_episode_table(inst, split))


def validate_predictions(
    df_or_path: pd.DataFrame | str | Path,
    inst: Instance,
    *,
    expected_conditions: Iterable[Condition | str] | None = None,
    split: Split | None = None,
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> ValidationReport:
    """Validate a prediction file (or an in-memory frame) against a built instance.

    Every problem is named: file-level ones (size, encoding, truncation, bad JSON lines, columns,
    types), unknown conditions, conditions outside ``expected_conditions``, unknown episodes,
    duplicate keys, bad weights on rows that claim to be valid, a manifest hash other than the
    instance's, and missing episodes (counted and listed per model and condition; with ``split``
    only that split's episodes are expected). Never raises: a failure of the validator itself is
    reported as a fatal problem of that file, so other files are still scored.
    """
    try:
        return _validate(df_or_path, inst, expected_conditions, split, max_bytes)
    except Exception as exc:  # noqa: BLE001 - the validator's contract: a message, never an exception
        source = "<frame>" if isinstance(df_or_path, pd.DataFrame) else str(df_or_path)
        problem = Problem(
            ProblemKind.UNREADABLE,
            Severity.FATAL,
            f"could not be validated ({type(exc).__name__}: {short(str(exc), 200)}); please report this",
        )
        return ValidationReport(source, (problem,), empty_frame(), 0)


def _frame_rows(raw: pd.DataFrame, problems: list[Problem]) -> pd.DataFrame:
    """An in-memory frame through the same row checks as a file (NaN counts as null in a frame)."""
    rows = Rows(nan_is_null=True)
    line_no = raw[LINE].to_numpy(np.int64) if LINE in raw else np.arange(1, len(raw) + 1)
    records = raw.drop(columns=[LINE], errors="ignore").to_dict(orient="records")
    for line, rec in zip(line_no.tolist(), records, strict=True):
        rows.add({str(k): v for k, v in rec.items()}, line)
    return rows.finish(problems)


def _rows_problem(kind: ProblemKind, severity: Severity, text: str, bad: np.ndarray, count: int = 0) -> Problem:
    """A problem about the rows at source lines ``bad``: ``text``, then which lines."""
    shown = lines_text(bad[:MAX_LISTED].tolist(), len(bad))
    return Problem(kind, severity, f"{text}{shown}", lines=line_list(bad[:MAX_LISTED]), count=count or len(bad))


def _validate(
    df_or_path: pd.DataFrame | str | Path,
    inst: Instance,
    expected_conditions: Iterable[Condition | str] | None,
    split: Split | None,
    max_bytes: int,
) -> ValidationReport:
    problems: list[Problem] = []
    if not isinstance(df_or_path, pd.DataFrame):
        source = str(df_or_path)
        frame, problems = load_predictions(df_or_path, max_bytes=max_bytes)
        n_read = int(frame.attrs.get("n_rows_read", len(frame)))
    elif len(df_or_path):
        source, n_read = "<frame>", len(df_or_path)
        frame = _frame_rows(df_or_path, problems)
    else:
        source, n_read, frame = "<frame>", 0, empty_frame()
        problems.append(Problem(ProblemKind.EMPTY_FILE, Severity.FATAL, "the frame has no rows"))
    if any(p.severity is Severity.FATAL for p in problems):
        return ValidationReport(source, tuple(problems), empty_frame(), n_read)
    lines = frame[LINE].to_numpy(np.int64)

    # manifest hash: every row must name the instance it was built against
    wrong_hash = (frame["manifest_hash"] != inst.manifest_hash).to_numpy(bool)
    if wrong_hash.any():
        seen = frame.loc[wrong_hash, "manifest_hash"].value_counts()
        listed = listing([f"{short(h[:12])}... ({c} rows)" for h, c in seen.items()], total=len(seen))
        text = (
            f"{int(wrong_hash.sum())} row(s) were built against another instance: {listed}; "
            f"this instance is {inst.manifest_hash[:12]}... (rebuild the predictions against it)"
        )
        bad = line_list(lines[wrong_hash][:MAX_LISTED])
        problem = Problem(ProblemKind.MANIFEST_HASH, Severity.FATAL, text, bad, int(wrong_hash.sum()))
        return ValidationReport(source, (*problems, problem), empty_frame(), n_read)

    keep = np.ones(len(frame), bool)
    expected = None if expected_conditions is None else {Condition(c).value for c in expected_conditions}
    if expected is not None:
        unexpected = ~frame["condition"].isin(expected).to_numpy(bool)
        if unexpected.any():
            values = listing(sorted(set(frame.loc[unexpected, "condition"])))
            text = (
                f"{int(unexpected.sum())} row(s) have condition {values}, not among the expected "
                f"{', '.join(sorted(expected))} (dropped): "
            )
            problems.append(_rows_problem(ProblemKind.UNEXPECTED_CONDITION, Severity.ERROR, text, lines[unexpected]))
            keep &= ~unexpected

    def index(eps: pd.DataFrame) -> pd.MultiIndex:
        return pd.MultiIndex.from_arrays([eps["field_id"].astype(object), eps["origin"].astype(object)])

    row_keys = index(frame)
    unknown = ~row_keys.isin(index(_episode_table(inst, None, pending=True)))
    if unknown.any():
        bad_keys = frame.loc[unknown, ["field_id", "origin"]].drop_duplicates()
        ids = sorted(f"{echo(f)}@{o}" for f, o in bad_keys.head(1000).itertuples(index=False))
        text = (
            f"{int(unknown.sum())} row(s) name {len(bad_keys)} episode(s) the instance does not have (dropped): "
            f"{listing(ids, total=len(bad_keys))}; "
        )
        problems.append(_rows_problem(ProblemKind.UNKNOWN_EPISODE, Severity.ERROR, text, lines[unknown]))
        keep &= ~unknown
    pending = ~unknown & ~row_keys.isin(index(_episode_table(inst, None)))
    if pending.any():
        origins = ", ".join(sorted(set(frame.loc[pending, "origin"].astype(str))))
        text = (
            f"{int(pending.sum())} row(s) forecast episodes whose y is pending (origin {origins}; dropped): "
            "a pending window takes sealed forecasts only (rap submit seal), scored on the live track after "
            "rap resolve; "
        )
        problems.append(_rows_problem(ProblemKind.PENDING_EPISODE, Severity.ERROR, text, lines[pending]))
        keep &= ~pending
    if not keep.all():
        frame = frame.loc[keep]

    # duplicates: every copy is dropped
    dup = frame.duplicated(list(KEY_COLUMNS), keep=False).to_numpy(bool)
    if dup.any():
        copies = frame.loc[dup, [*KEY_COLUMNS, LINE]].sort_values([*KEY_COLUMNS, LINE], kind="stable")
        n_keys = int((~copies.duplicated(list(KEY_COLUMNS))).sum())
        detail = []
        for (m, c, f, o), grp in copies.head(MAX_LISTED * 50).groupby(list(KEY_COLUMNS), sort=True):
            if len(detail) == MAX_LISTED:
                break
            detail.append(f"{echo(m)}/{c}/{echo(f)}@{o} (lines {listing(grp[LINE].tolist(), 5)})")
        text = (
            f"{n_keys} key(s) appear more than once ({int(dup.sum())} rows); every copy was dropped and the "
            f"episode counts as missing: {listing(detail, total=n_keys)}"
        )
        first = line_list(copies[LINE].head(MAX_LISTED))
        problems.append(Problem(ProblemKind.DUPLICATE, Severity.ERROR, text, first, n_keys))
        frame = frame.loc[~dup]
    if not frame.index.equals(pd.RangeIndex(len(frame))):
        frame = frame.reset_index(drop=True)

    # missing episodes, per (model, condition)
    expected_eps = _episode_table(inst, split)
    expected_ids = (expected_eps["field_id"] + "@" + expected_eps["origin"]).tolist()
    expected_keys = list(zip(expected_eps["field_id"], expected_eps["origin"], strict=True))
    missing: dict[tuple[str, str], tuple[str, ...]] = {}
    groups = {k: g for k, g in frame.groupby(["model", "condition"], sort=True)[["field_id", "origin"]]}
    pairs = sorted(groups) if expected is None else sorted({(m, c) for m, _ in groups for c in expected})
    for model, cond in pairs:
        grp = groups.get((model, cond))
        have = set() if grp is None else set(zip(grp["field_id"], grp["origin"], strict=True))
        lacking = tuple(i for i, k in zip(expected_ids, expected_keys, strict=True) if k not in have)
        if lacking:
            missing[(model, cond)] = lacking
    for (model, cond), ids in list(missing.items())[:MAX_LISTED]:
        text = (
            f"{echo(model)} / {cond}: {len(ids)} of {len(expected_ids)} expected episode(s) missing "
            f"(not guessed; excluded from its scores): {listing(list(ids))}"
        )
        problems.append(Problem(ProblemKind.MISSING_EPISODES, Severity.WARNING, text, count=len(ids)))
    if len(missing) > MAX_LISTED:
        rest = len(missing) - MAX_LISTED
        text = f"... and {rest} more (model, condition) pair(s) with missing episodes"
        problems.append(Problem(ProblemKind.MISSING_EPISODES, Severity.WARNING, text, count=rest))
    return ValidationReport(source, tuple(problems), frame, n_read, missing)


def keep_first_owner(reports: Sequence[ValidationReport]) -> list[ValidationReport]:
    """Reports where each (model, condition) belongs to the first file that holds it.

    A later file that reuses a (model, condition) of an earlier one loses those rows, with an
    error naming the earlier file: a file can never remove or replace another file's scores.
    """
    owner: dict[tuple[str, str], str] = {}
    out = []
    for rep in reports:
        if not rep.scorable or not len(rep.frame):
            out.append(rep)
            continue
        units = list(rep.frame[["model", "condition"]].drop_duplicates().itertuples(index=False, name=None))
        taken = {u: owner[u] for u in units if u in owner}
        for u in units:
            owner.setdefault(u, rep.source)
        if not taken:
            out.append(rep)
            continue
        clash = pd.MultiIndex.from_arrays([rep.frame["model"], rep.frame["condition"]]).isin(list(taken))
        listed = listing([f"{echo(m)} / {c} (in {echo(src)})" for (m, c), src in sorted(taken.items())])
        problem = Problem(
            ProblemKind.REPEATED_UNIT,
            Severity.ERROR,
            f"{int(clash.sum())} row(s) reuse a model and condition of an earlier file: {listed}; the earlier "
            "file keeps them and these rows are not scored (rename the model)",
            lines=line_list(rep.frame.loc[clash, LINE].head(MAX_LISTED)),
            count=int(clash.sum()),
        )
        frame = rep.frame.loc[~clash].reset_index(drop=True)
        missing = {k: v for k, v in rep.missing.items() if k not in taken}
        out.append(ValidationReport(rep.source, (*rep.problems, problem), frame, rep.n_rows_read, missing))
    return out


def combine_validated(reports: Sequence[ValidationReport]) -> tuple[pd.DataFrame, list[str]]:
    """Usable rows of every scorable file, and the problems (one string each, file-prefixed); a
    (model, condition) in several files belongs to the first (:func:`keep_first_owner`)."""
    problems: list[str] = []
    frames: list[pd.DataFrame] = []
    for rep in keep_first_owner(reports):
        problems += [f"{rep.source}: {p}" for p in rep.problems]
        if not rep.scorable:
            problems.append(f"{rep.source}: not scored (fatal problem)")
            continue
        if len(rep.frame):
            frames.append(rep.frame)
    if not frames:
        return empty_frame(), problems
    combined = pd.concat(frames, ignore_index=True)
    return combined.drop(columns=[LINE], errors="ignore").reset_index(drop=True), problems
