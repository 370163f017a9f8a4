"""Building the report: ``build_report(inst, prediction_files, out_dir)`` validates every file on
its own (a bad file never changes another file's rows), scores the usable rows, and writes::

    REPORT/
      report.html            self-contained (figures as data URIs, inline CSS)
      tables.md              every table in one markdown file, closing note first
      <table>.csv / .md      leaderboard, paired_contrasts, per_origin, strict_vs_exposed,
                             policy, state, revision_alignment, validation
      leaderboard.png        interval plot
      field_<id>.png         a few fields' realised compositions with predictions overlaid
      report.json            meta, reliability, closing note and every validation problem
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from rap_benchmark.core.fsio import atomic_write_text
from rap_benchmark.core.records import Split
from rap_benchmark.evaluation.predictions import combine_validated, validate_predictions
from rap_benchmark.evaluation.report.html import Figure, render_html
from rap_benchmark.evaluation.report.plots import choose_fields, overlay_units, plot_field, plot_leaderboard
from rap_benchmark.evaluation.report.tables import ReportTables, closing_note, compute_tables, write_tables
from rap_benchmark.evaluation.scoring import baseline_predictions, load_registry, strict_masks

if TYPE_CHECKING:
    from rap_benchmark.core.artifacts import Instance
    from rap_benchmark.evaluation.predictions import ValidationReport


@dataclass(frozen=True)
class ReportResult:
    out_dir: Path
    html: Path
    tables: ReportTables
    files: tuple[Path, ...]
    problems: tuple[str, ...]


def validation_table(reports: Sequence[ValidationReport]) -> pd.DataFrame:
    rows = []
    for rep in reports:
        models = sorted(set(rep.frame["model"])) if len(rep.frame) else []
        rows.append(
            {
                "file": Path(rep.source).name,
                "models": ", ".join(models),
                "n_rows_read": rep.n_rows_read,
                "n_usable": len(rep.frame),
                "n_invalid_units": rep.n_invalid_units,
                "problems": len(rep.problems),
            }
        )
    return pd.DataFrame(rows)


def build_report(
    inst: Instance,
    prediction_files: Sequence[str | Path],
    out_dir: str | Path,
    *,
    registry: str | Path | None = None,
    split: Split | None = Split.TEST,
    n_resamples: int | None = None,
    seed: int | None = None,
    reliability_splits: int | None = None,
    n_fields_plotted: int = 3,
    add_baselines: bool = True,
    audit: bool = False,
    progress: bool = False,
) -> ReportResult:
    """Validate, score and write the full report for ``prediction_files`` into ``out_dir``.

    With ``add_baselines`` (default) the statistical baselines are computed in memory at the
    spec's parameters when no file provides ``baseline/ewma``, so every model is contrasted with
    EWMA. ``registry`` is a model registry file (the paper's temporal exposure masks) for the strict-vs-exposed table.
    ``audit`` adds the instrument-audit table (parallel instrument; latent truth on mini).
    """
    from rap_benchmark.core.artifacts import write_json

    reg = load_registry(registry) if registry is not None else None  # a bad registry is refused before any write
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    reports = [validate_predictions(p, inst) for p in prediction_files]
    preds, problems = combine_validated(reports)
    notes: list[str] = []
    if add_baselines and not (preds["model"] == "baseline/ewma").any():
        base, _ = baseline_predictions(inst)
        preds = pd.concat([preds, base], ignore_index=True) if len(preds) else base
        notes.append(
            "No baseline file was given, so the statistical baselines (Recent, EWMA, ARIMA, Holt, ridge VAR, "
            "uniform random) were computed here at the spec's parameters, for every model to be contrasted with "
            "EWMA. To give them as a file (tuned on Dev): rap baselines DIR --tune-dev --out FILE; to leave "
            "them out: --no-baselines."
        )

    masks = None
    if reg is not None:
        models = sorted(m for m in set(preds["model"]) if m in reg)
        unknown = sorted(m for m in set(preds["model"]) if m not in reg and not m.startswith("baseline/"))
        if unknown:
            problems.append(f"registry {registry}: no entry for {', '.join(unknown)} (left out of the exposure table)")
        masks = strict_masks(reg, models, inst.spec.origins, inst.spec.window_months)

    tables = compute_tables(
        inst,
        preds,
        validation=validation_table(reports),
        exposure_masks=masks,
        split=split,
        n_resamples=n_resamples,
        seed=seed,
        reliability_splits=reliability_splits,
        progress=progress,
    )
    if audit:
        from rap_benchmark.audit.parallel import instrument_audit_table

        tables = replace(tables, instrument=instrument_audit_table(inst, seed=inst.spec.seed))
    written = write_tables(tables, out)
    ceiling = (tables.reliability or {}).get("ceiling")
    board_png = plot_leaderboard(
        tables.leaderboard,
        out / "leaderboard.png",
        ceiling=ceiling,
        title=f"{inst.spec.name}: {tables.meta['split']} leaderboard",
    )
    units = overlay_units(tables.leaderboard)
    field_figs = []
    for field_id in choose_fields(inst, n_fields_plotted, split=split):
        png = plot_field(inst, preds, field_id, out / f"field_{field_id}.png", units=units)
        field_figs.append(
            Figure(
                png,
                alt=f"realised composition of {field_id} over origins",
                caption=(
                    f"{field_id}: realised target-window composition y (black) per origin, one panel per direction, "
                    f"with {', '.join(f'{m} {c}' for m, c in units) or 'no'} predictions overlaid."
                ),
            )
        )
    html = render_html(
        tables,
        leaderboard_figure=Figure(
            board_png,
            alt="leaderboard with interval bars",
            caption="Field-macro Forecast Spearman with 95% block-bootstrap intervals; dashed: this instance's "
            "split-half reliability ceiling.",
        ),
        field_figures=field_figs,
        problems=problems,
        notes=notes,
        title=f"RAP benchmark report: {inst.spec.name}",
    )
    html_path = atomic_write_text(out / "report.html", html)
    summary: dict[str, Any] = {
        "meta": tables.meta,
        "reliability": tables.reliability,
        "closing_note": closing_note(tables),
        "problems": problems,
        "notes": notes,
        "files": [str(p) for p in prediction_files],
    }
    write_json(out / "report.json", summary)
    files = (*written, board_png, *(f.path for f in field_figs), html_path, out / "report.json")
    return ReportResult(out, html_path, tables, files, tuple(problems))
