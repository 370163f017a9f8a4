"""The report's tables: computed from validated predictions, written as CSV and markdown.

``compute_tables`` runs every table builder of ``report.aggregates`` once; the display
helpers turn a table into strings ("0.803 [0.790, 0.815]") for markdown and HTML. Numbers stay
unformatted in the CSV files.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from rap_benchmark.core.fsio import atomic_path, atomic_write_text
from rap_benchmark.core.records import Policy, Split
from rap_benchmark.core.spec import package_version
from rap_benchmark.evaluation.report.aggregates import (
    EWMA_MODEL,
    exposure_table,
    leaderboard,
    paired_contrasts,
    per_origin_table,
    policy_table,
    resampling,
    revision_table,
    state_table,
)
from rap_benchmark.evaluation.scoring import BASELINE_PREFIX, episode_arrays, reliability, score_predictions
from rap_benchmark.evaluation.usage import unknown
from rap_benchmark.pipeline.build import instrument_provenance

if TYPE_CHECKING:
    from rap_benchmark.core.artifacts import Instance

PAPER_TEST_EWMA = 0.803
PAPER_TEST_CEILING = 0.911
NO_MULTIPLICITY = (
    "No multiplicity correction is applied: every interval is a two-sided 95% percentile bootstrap for its own "
    "cell, and isolated exclusions of zero across many cells are descriptive."
)

BASELINE_LABELS: dict[str, str] = {
    "recent": "Recent",
    "ewma": "EWMA",
    "arima": "ARIMA(1,1,0)",
    "holt": "Holt",
    "ridge_var": "ridge VAR(1)",
    "uniform_random": "uniform random",
}


@dataclass(frozen=True)
class ReportTables:
    """Every table of the report (plain DataFrames) plus what they were computed under."""

    leaderboard: pd.DataFrame
    contrasts: pd.DataFrame
    per_origin: pd.DataFrame
    policy: pd.DataFrame
    state: pd.DataFrame
    revision: pd.DataFrame
    exposure: pd.DataFrame
    validation: pd.DataFrame
    reliability: dict[str, Any] | None
    meta: dict[str, Any] = field(default_factory=dict)
    instrument: pd.DataFrame = field(default_factory=pd.DataFrame)  # rap_benchmark.audit rows, when asked for

    def named(self) -> dict[str, pd.DataFrame]:
        """The tables written to disk, by file stem, in reporting order."""
        return {
            "leaderboard": self.leaderboard,
            "paired_contrasts": self.contrasts,
            "per_origin": self.per_origin,
            "strict_vs_exposed": self.exposure,
            "policy": self.policy,
            "state": self.state,
            "revision_alignment": self.revision,
            "instrument_audit": self.instrument,
            "validation": self.validation,
        }


def compute_tables(
    inst: Instance,
    preds: pd.DataFrame,
    *,
    validation: pd.DataFrame | None = None,
    exposure_masks: tuple[Mapping[tuple[str, str], bool], Mapping[tuple[str, str], bool]] | None = None,
    split: Split | None = Split.TEST,
    n_resamples: int | None = None,
    seed: int | None = None,
    reliability_splits: int | None = None,
    progress: bool = False,
) -> ReportTables:
    """Score ``preds`` (validated rows of one or more files) and build every table.

    ``exposure_masks`` is (Forecast-Strict, Joint-Strict), each mapping (model, origin) to a flag;
    without it the strict-vs-exposed table is empty. The reliability ceiling is computed on the
    same split under the canonical policy.
    """
    from tqdm.auto import tqdm

    n_res, seed_ = resampling(inst, n_resamples, seed)
    kw: dict[str, Any] = {"n_resamples": n_res, "seed": seed_, "split": split}

    eps = episode_arrays(inst)
    scores = score_predictions(inst, preds, episodes=eps)
    steps: dict[str, Any] = {
        "leaderboard": lambda: leaderboard(scores, inst, **kw),
        "contrasts": lambda: paired_contrasts(scores, inst, **kw),
        "per_origin": lambda: per_origin_table(scores, inst, **kw),
        "policy": lambda: policy_table(inst, preds, **kw),
        "state": lambda: state_table(inst, preds, **kw),
        "revision": lambda: revision_table(inst, preds, **kw),
        "exposure": lambda: (
            pd.DataFrame()
            if exposure_masks is None
            else exposure_table(scores, inst, exposure_masks[0], joint_strict=exposure_masks[1], **kw)
        ),
        "reliability": lambda: reliability(inst, split=split, n_splits=reliability_splits, progress=False).to_dict(),
    }
    done: dict[str, Any] = {}
    for name in tqdm(steps, desc="report tables", disable=not progress, leave=False):
        done[name] = steps[name]()
    return ReportTables(
        **done,
        validation=validation if validation is not None else pd.DataFrame(),
        meta={
            "instance": inst.spec.name,
            "benchmark_version": inst.spec.version,  # the instance's: what its scores mean
            "package_version": package_version(),  # the rap_benchmark package that scored it
            "manifest_hash": inst.manifest_hash,
            "instrument": instrument_provenance(inst.ledger)["line"],  # who wrote the directions and labels
            "split": split or "all",
            "n_resamples": n_res,
            "seed": seed_,
            "n_prediction_rows": len(preds),
        },
    )


# -- display ---------------------------------------------------------------------------------


def fmt(value: Any, digits: int = 3) -> str:
    """A number with fixed digits; blank when missing (None, NaN, pandas' NA and NaT: :func:`unknown`);
    ints and strings as they are."""
    if unknown(value):
        return ""
    if isinstance(value, bool | np.bool_):
        return "yes" if value else "no"
    if isinstance(value, int | np.integer):
        return str(int(value))
    if isinstance(value, float | np.floating):
        return f"{float(value):.{digits}f}"
    return str(value)


def _number(v: Any, digits: int, signed: bool) -> str:
    return f"{float(v):+.{digits}f}" if signed else fmt(v, digits)


def fmt_bounds(lo: Any, hi: Any, digits: int = 3, *, signed: bool = False) -> str:
    """``[0.790, 0.815]`` (``signed``: ``[-0.004, +0.030]``); empty when a bound is missing."""
    if unknown(lo) or unknown(hi):
        return ""
    return f"[{_number(lo, digits, signed)}, {_number(hi, digits, signed)}]"


def fmt_interval(est: Any, lo: Any, hi: Any, digits: int = 3, *, signed: bool = False) -> str:
    """``0.803 [0.790, 0.815]`` (``signed``, for contrasts: ``+0.012 [-0.004, +0.030]``); the bare
    estimate (``0.803``) when a bound is missing, and empty when the estimate is (None, NA, NaN)."""
    if unknown(est):
        return ""
    number, bounds = _number(est, digits, signed), fmt_bounds(lo, hi, digits, signed=signed)
    return f"{number} {bounds}" if bounds else number


def interval_cell(row: Mapping[str, Any], prefix: str = "spearman", *, signed: bool = False) -> str:
    """A row's ``prefix`` estimate with its ``prefix_lo``/``prefix_hi`` interval as one cell (the
    report's tables and the board's ``Spearman [95% block CI]`` column)."""
    return fmt_interval(row.get(prefix), row.get(f"{prefix}_lo"), row.get(f"{prefix}_hi"), signed=signed)


def display(df: pd.DataFrame, columns: Sequence[tuple[str, Any]]) -> pd.DataFrame:
    """Build a display frame: each (header, column name or function of a row) becomes strings."""
    if df.empty:
        return pd.DataFrame(columns=[h for h, _ in columns])
    out: dict[str, list[str]] = {}
    records = df.to_dict(orient="records")
    for header, spec in columns:
        out[header] = [spec(r) if callable(spec) else fmt(r.get(spec)) for r in records]
    return pd.DataFrame(out)


LEADERBOARD_COLUMNS: tuple[tuple[str, Any], ...] = (
    ("model", "model"),
    ("cond.", "condition"),
    ("Spearman [95% block CI]", interval_cell),
    (
        "field-clustered CI",
        lambda r: fmt_bounds(r.get("spearman_field_lo"), r.get("spearman_field_hi")),
    ),
    ("cent. cosine", "centred_cosine"),
    ("TV", "tv"),
    ("JSD", "jsd"),
    ("Pred-Recent", "pred_recent"),
    ("residual vs EWMA", "residual_spearman"),
    ("change-rich", "spearman_change_rich"),
    ("fields", "n_fields"),
    ("episodes", "n_episodes"),
    ("invalid", "n_invalid"),
)
"""The scorer's leaderboard for people: (header, column or function of a row)."""

STATE_COLUMNS: tuple[tuple[str, Any], ...] = (
    ("model", "model"),
    ("cond.", "condition"),
    ("scored as", "target"),
    ("Spearman [95% block CI]", interval_cell),
    ("fields", "n_fields"),
)


CONTRAST_HEADERS = {"spearman": "Δ Spearman", "tv_improvement": "TV impr.", "jsd_improvement": "JSD impr."}


def _contrasts_wide(contrasts: pd.DataFrame) -> pd.DataFrame:
    """One row per contrast: Spearman difference and TV/JSD improvements side by side."""
    if contrasts.empty:
        return pd.DataFrame(columns=["model", "contrast"])
    rows = []
    for (model, contrast), g in contrasts.groupby(["model", "contrast"], sort=False):
        by = g.set_index("metric")
        row = {"model": model, "contrast": contrast}
        for metric, header in CONTRAST_HEADERS.items():
            if metric in by.index:
                r = by.loc[metric]
                mark = " *" if bool(r["excludes_zero"]) else ""
                row[f"{header} [95% block CI]"] = fmt_interval(r["estimate"], r["lo"], r["hi"], signed=True) + mark
                if metric == "spearman":
                    row["Δ Spearman field-clustered CI"] = fmt_bounds(r["field_lo"], r["field_hi"], signed=True)
        row.update(cells=fmt(g["n_cells"].iloc[0]), fields=fmt(g["n_fields"].iloc[0]))
        rows.append(row)
    return pd.DataFrame(rows)


def _wide(table: pd.DataFrame, column: str, order: Sequence[str] | None = None) -> pd.DataFrame:
    """One row per (model, condition), one Spearman-interval column per value of ``column``."""
    if table.empty:
        return pd.DataFrame(columns=["model", "cond."])
    cells = table.assign(
        cell=[
            fmt_interval(e, lo, hi)
            for e, lo, hi in table[["spearman", "spearman_lo", "spearman_hi"]].itertuples(index=False)
        ]
    )
    wide = cells.pivot(index=["model", "condition"], columns=column, values="cell").fillna("")
    if order is not None:
        wide = wide[[v for v in order if v in set(cells[column])]]
    wide = wide.reset_index().rename(columns={"condition": "cond."})
    wide.columns.name = None
    return wide


def display_tables(tables: ReportTables) -> dict[str, pd.DataFrame]:
    """Every table as strings with human headers (intervals folded into one cell)."""
    return {
        "leaderboard": display(tables.leaderboard, LEADERBOARD_COLUMNS),
        "paired_contrasts": _contrasts_wide(tables.contrasts),
        "per_origin": _wide(tables.per_origin, "origin"),
        "strict_vs_exposed": display(
            tables.exposure,
            [
                ("model", "model"),
                ("cond.", "condition"),
                ("stratum", "stratum"),
                ("Spearman [95% block CI]", interval_cell),
                ("cells", "n_cells"),
                ("fields", "n_fields"),
            ],
        ),
        "policy": _wide(tables.policy, "policy", [p.value for p in Policy]),
        "state": display(tables.state, STATE_COLUMNS),
        "revision_alignment": display(
            tables.revision,
            [
                ("model", "model"),
                ("cond.", "condition"),
                ("h (months)", "horizon_months"),
                ("revision alignment [95% block CI]", lambda r: interval_cell(r, "revision_alignment", signed=True)),
                ("cent. cosine", "revision_alignment_cc"),
                ("pred. stability", "prediction_stability"),
                ("truth stability", "truth_stability"),
                ("pairs", "n_pairs"),
            ],
        ),
        "instrument_audit": display(
            tables.instrument,
            [
                ("measure", "measure"),
                ("estimate [95% field-resampled CI]", lambda r: fmt_interval(r["estimate"], r["lo"], r["hi"])),
                ("fields", "n_fields"),
            ],
        ),
        "validation": display(
            tables.validation,
            [
                ("file", "file"),
                ("models", "models"),
                ("rows read", "n_rows_read"),
                ("usable", "n_usable"),
                ("invalid units", "n_invalid_units"),
                ("problems", "problems"),
            ],
        ),
    }


def to_markdown(df: pd.DataFrame) -> str:
    """A GitHub-flavoured markdown table of a display frame (pipes escaped)."""
    if df.empty:
        return "_(no rows)_\n"

    def cell(v: Any) -> str:
        return str(v).replace("|", "\\|").replace("\n", " ")

    header = "| " + " | ".join(cell(c) for c in df.columns) + " |"
    rule = "| " + " | ".join("---" for _ in df.columns) + " |"
    body = ["| " + " | ".join(cell(v) for v in row) + " |" for row in df.itertuples(index=False)]
    return "\n".join([header, rule, *body]) + "\n"


# -- the closing note ------------------------------------------------------------------------


@dataclass(frozen=True)
class ModelHeadline:
    """An evaluated (non-baseline) model on the leaderboard: its best Forecast condition, that
    condition's Spearman and its contrast against EWMA on the same cells (the report's headline)."""

    model: str
    condition: str  # the best Forecast condition
    score: str  # "0.078 [-0.055, 0.242]"
    vs_ewma: str  # "-0.673 [-0.805, -0.492] *" ("" without an EWMA contrast)
    conditions: tuple[str, ...]  # its Forecast conditions on the leaderboard, in order
    cells: tuple[str, ...]  # "A0 -0.001 [-0.125, 0.156]" for each of them


def _finite(value: Any) -> float:
    return -math.inf if unknown(value) or math.isnan(float(value)) else float(value)


def model_headlines(tables: ReportTables) -> list[ModelHeadline]:
    """Every evaluated model of the leaderboard (any model that is not a statistical baseline),
    best first by its best Forecast condition's Spearman, then by name."""
    board, contrasts = tables.leaderboard, tables.contrasts
    if board.empty:
        return []
    vs_ewma = {  # (model, condition) -> "+0.012 [-0.004, +0.030] *"
        (r["model"], r["contrast"].split(" vs ")[0]): fmt_interval(r["estimate"], r["lo"], r["hi"], signed=True)
        + (" *" if r["excludes_zero"] else "")
        for r in contrasts.to_dict("records")
        if r["metric"] == "spearman" and r["contrast"].endswith(f" vs {EWMA_MODEL}")
    }
    ranked: list[tuple[float, ModelHeadline]] = []
    for model, rows in board[~board["model"].astype(str).str.startswith(BASELINE_PREFIX)].groupby("model"):
        records = rows.sort_values("condition", kind="stable").to_dict("records")
        best = max(records, key=lambda r: _finite(r["spearman"]))  # the first of equals: the earlier condition
        headline = ModelHeadline(
            model=str(model),
            condition=str(best["condition"]),
            score=interval_cell(best),
            vs_ewma=vs_ewma.get((model, best["condition"]), ""),
            conditions=tuple(str(r["condition"]) for r in records),
            cells=tuple(f"{r['condition']} {interval_cell(r)}" for r in records),
        )
        ranked.append((_finite(best["spearman"]), headline))
    return [h for _, h in sorted(ranked, key=lambda x: (-x[0], x[1].model))]


def closing_note(tables: ReportTables, *, multiplicity: bool = True) -> str:
    """Plain-text summary: the evaluated models first (every Forecast condition, the best one
    against EWMA), then this instance's baselines and ceiling beside the paper's anchors."""
    meta, board = tables.meta, tables.leaderboard
    a0 = board[board["condition"] == "A0"].set_index("model") if len(board) else board
    parts = [  # "EWMA 0.754 [0.689, 0.802]" for each statistical baseline on the leaderboard
        f"{label} {interval_cell(a0.loc[BASELINE_PREFIX + name])}"
        for name, label in BASELINE_LABELS.items()
        if BASELINE_PREFIX + name in a0.index
    ]
    models = [  # "my-org/my-model A0 0.012 [...], A1 0.093 [...] (A1 minus EWMA -0.66 [...] *)"
        f"{h.model} {', '.join(h.cells)}" + (f" ({h.condition} minus EWMA {h.vs_ewma})" if h.vs_ewma else "")
        for h in model_headlines(tables)
    ]
    split = meta.get("split", "test")
    text = f"On {meta.get('instance', 'this instance')} ({split} split, field-macro Forecast Spearman, 95% block-bootstrap intervals): "
    if models:
        text += "; ".join(models) + ". Statistical baselines: "
    text += "; ".join(parts) if parts else "no baseline predictions were scored"
    rel = tables.reliability or {}
    ceiling = rel.get("ceiling")
    if ceiling is not None and not math.isnan(float(ceiling)):
        text += (
            f". Split-half reliability {fmt(rel.get('repeatability'))} gives an observable-score ceiling of "
            f"{fmt(ceiling)} (sqrt of repeatability, {rel.get('n_episodes')} episodes)"
        )
    text += (
        f". The paper's Test figures on the full instance, for reference: EWMA {PAPER_TEST_EWMA:.3f}, "
        f"reliability ceiling {PAPER_TEST_CEILING:.3f}."
    )
    return f"{text} {NO_MULTIPLICITY}" if multiplicity else text


def write_tables(tables: ReportTables, out_dir: str | Path) -> list[Path]:
    """Write each table as ``<name>.csv`` (raw numbers) and ``<name>.md``, plus ``tables.md``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    shown = display_tables(tables)
    sections = [f"# RAP report: {tables.meta.get('instance', '')}\n", closing_note(tables) + "\n"]
    for name, frame in tables.named().items():
        csv = out / f"{name}.csv"
        with atomic_path(csv) as tmp:
            frame.to_csv(tmp, index=False, float_format="%.10g", lineterminator="\n")
        md = atomic_write_text(out / f"{name}.md", to_markdown(shown[name]))
        written += [csv, md]
        sections.append(f"\n## {name.replace('_', ' ')}\n\n" + to_markdown(shown[name]))
    combined = atomic_write_text(out / "tables.md", "\n".join(sections))
    written.append(combined)
    return written


def leaderboard_markdown(
    board: pd.DataFrame,
    columns: Sequence[tuple[str, Any]] = LEADERBOARD_COLUMNS,
    *,
    note: str = "",
    empty: str | None = None,
) -> str:
    """A leaderboard as a markdown table, then ``note``: the package's one leaderboard renderer.

    By default the scorer's rows (what ``rap score`` prints); a board of submissions passes its
    columns (``board.display.board_columns``). ``empty`` replaces the table when there are no rows.
    """
    if board.empty and empty is not None:
        return empty
    return to_markdown(display(board, columns)) + (f"\n{note}\n" if note else "")


def state_markdown(state: pd.DataFrame) -> str:
    """The State table (A2, A4 scored against x and, as a forecast, against y) as markdown."""
    return to_markdown(display(state, STATE_COLUMNS))
