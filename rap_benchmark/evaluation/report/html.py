"""A self-contained HTML page: inline CSS, figures as base64 data URIs, no network references.

All decisions (which sections, which cells are numeric, the wording) are made here; the jinja2
template in ``rap_benchmark/templates/report.html.j2`` only lays them out.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rap_benchmark.core import resources
from rap_benchmark.core.spec import package_version
from rap_benchmark.evaluation.report.tables import (
    NO_MULTIPLICITY,
    PAPER_TEST_CEILING,
    PAPER_TEST_EWMA,
    ReportTables,
    closing_note,
    display_tables,
    fmt,
    model_headlines,
)

TEMPLATE = "report.html.j2"

SECTIONS: tuple[tuple[str, str, str, str], ...] = (
    # (table name, title, intro, text when empty)
    (
        "leaderboard",
        "Leaderboard",
        "Field-macro Forecast Spearman (episodes averaged within field, then fields averaged); 95% percentile "
        "intervals resample frozen dependency blocks, field-clustered intervals as a sensitivity. Invalid units "
        "are excluded and counted. Residual vs EWMA is rho(p - e, y - e); change-rich episodes are those with "
        "rho(EWMA, y) in the lowest quartile (chosen without model outputs).",
        "No predictions were scored.",
    ),
    (
        "paired_contrasts",
        "Paired contrasts",
        "Candidate minus reference on the same field-origin cells, differenced before aggregation. For TV and JSD "
        "the value is the improvement (reference distance minus candidate distance; positive favours the candidate).",
        "No pair of conditions (or EWMA reference) to contrast.",
    ),
    ("per_origin", "Per origin", "Mean Spearman over fields at each forecast origin.", "No rows."),
    (
        "strict_vs_exposed",
        "Strict vs potentially exposed",
        "Forecast-Strict cells: the origin is on or after the model's knowledge cutoff (or release date); State "
        "conditions use Joint-Strict (T - 6 months on or after the cutoff). Exposed is the complement.",
        "No model registry was given (--registry FILE), so no exposure strata are reported.",
    ),
    (
        "policy",
        "Assignment-policy rescoring",
        "The same predictions scored against the targets of each counting policy (Spearman with 95% block CI).",
        "No rows.",
    ),
    (
        "state",
        "State outputs",
        "State conditions (A2, A4) scored against the recent window x (State fidelity) and against y "
        "(State-as-Forecast).",
        "No State-condition predictions.",
    ),
    (
        "revision_alignment",
        "Rolling revision alignment",
        "rho(p[T+h] - p[T], y[T+h] - y[T]) over origin pairs h months apart; prediction and truth stability beside it.",
        "Fewer than two origins h months apart.",
    ),
    (
        "instrument_audit",
        "Instrument audit",
        "A second, independently built offline instrument aligned to the frozen directions per field with the "
        "Hungarian algorithm, cross-fit on half of the pre-cutoff papers and scored out of sample (and, on the "
        "generated mini instance, agreement with the latent directions).",
        "Not computed (rap report --audit).",
    ),
    ("validation", "Prediction files", "What the validator read from each file.", "No files."),
)

_NUMERIC = re.compile(r"^[+-]?\d+(\.\d+)?( \[[^\]]*\])?$|^\[[^\]]*\]$")


@dataclass(frozen=True)
class Figure:
    """An image to embed, with its alt text and caption."""

    path: Path
    alt: str
    caption: str


def data_uri(path: str | Path) -> str:
    """A PNG file as a ``data:image/png;base64,...`` URI."""
    return "data:image/png;base64," + base64.b64encode(Path(path).read_bytes()).decode("ascii")


def _figure(fig: Figure) -> dict[str, str]:
    return {"src": data_uri(fig.path), "alt": fig.alt, "caption": fig.caption}


MODEL_CARDS = 4
"""At most this many evaluated models get a headline card (the best first); the rest are named."""


def _cards(tables: ReportTables) -> list[dict[str, str]]:
    """The headline cards: the evaluated models first (each one's best Forecast condition, its
    interval and its contrast with EWMA), then this instance's EWMA and ceiling and the paper's."""
    cards = []
    heads = model_headlines(tables)
    for h in heads[:MODEL_CARDS]:
        value, _, bounds = h.score.partition(" ")
        where = f"{h.condition}, best of {', '.join(h.conditions)}" if len(h.conditions) > 1 else h.condition
        detail = " · ".join(x for x in (f"{where} {bounds}".strip(), f"vs EWMA {h.vs_ewma}" if h.vs_ewma else "") if x)
        cards.append({"kind": "model", "value": value or "no score", "detail": detail, "label": h.model})
    if len(heads) > MODEL_CARDS:
        rest = [h.model for h in heads[MODEL_CARDS:]]
        cards.append(
            {"kind": "model", "value": f"+{len(rest)}", "detail": "", "label": ", ".join(rest) + " (leaderboard below)"}
        )
    board = tables.leaderboard
    split = tables.meta.get("split")
    if not board.empty:
        ewma = board[(board["model"] == "baseline/ewma") & (board["condition"] == "A0")]
        if len(ewma):
            cards.append(_anchor(fmt(ewma["spearman"].iloc[0]), f"EWMA, this instance ({split})"))
    rel = tables.reliability or {}
    if rel.get("ceiling") is not None:
        cards.append(_anchor(fmt(rel["ceiling"]), "reliability ceiling, this instance"))
    cards.append(_anchor(f"{PAPER_TEST_EWMA:.3f}", "EWMA, paper (Test, full instance)"))
    cards.append(_anchor(f"{PAPER_TEST_CEILING:.3f}", "ceiling, paper (Test, full instance)"))
    return cards


def _anchor(value: str, label: str) -> dict[str, str]:
    return {"kind": "anchor", "value": value, "detail": "", "label": label}


def render_html(
    tables: ReportTables,
    *,
    leaderboard_figure: Figure | None = None,
    field_figures: Sequence[Figure] = (),
    problems: Sequence[str] = (),
    notes: Sequence[str] = (),
    title: str = "RAP benchmark report",
) -> str:
    """The report page as one HTML string (UTF-8, no external references). ``problems`` are what
    the validator found in the files; ``notes`` say how the report was made (no baseline file)."""
    shown = display_tables(tables)
    sections: list[dict[str, Any]] = []
    for name, heading, intro, empty in SECTIONS:
        frame = shown[name]
        rows = [
            [{"text": str(v), "num": bool(_NUMERIC.match(str(v)))} for v in row]
            for row in frame.itertuples(index=False)
        ]
        sections.append(
            {"id": name, "title": heading, "intro": intro, "headers": list(frame.columns), "rows": rows, "empty": empty}
        )
    rel = tables.reliability or {}
    if rel:
        changes = ", ".join(
            f"{h} months {fmt(v)}" for h, v in sorted(rel.get("changes", {}).items(), key=lambda kv: int(kv[0]))
        )
        sections.insert(
            1,
            {
                "id": "reliability",
                "title": "Reliability ceiling",
                "intro": (
                    f"Split-half reliability of the target windows ({rel.get('n_splits')} random splits, seed "
                    f"{rel.get('seed')}, Spearman-Brown corrected): repeatability {fmt(rel.get('repeatability'))} over "
                    f"{rel.get('n_episodes')} episodes, ceiling sqrt(repeatability) = {fmt(rel.get('ceiling'))}. "
                    f"Realised changes: {changes or 'no origin pairs'}."
                ),
                "headers": [],
                "rows": [],
                "empty": "",
            },
        )
    context = {
        "title": title,
        "meta": {"package_version": package_version(), **tables.meta},
        "cards": _cards(tables),
        "closing_note": closing_note(tables, multiplicity=False),
        "multiplicity": NO_MULTIPLICITY,
        "problems": list(problems),
        "notes": list(notes),
        "sections": sections,
        "figures_top": [_figure(leaderboard_figure)] if leaderboard_figure is not None else [],
        "figures_fields": [_figure(f) for f in field_figures],
    }
    return render_template(TEMPLATE, **context)


def render_template(name: str, **context: Any) -> str:
    """A page from the package's jinja2 templates: autoescaped, and any undefined name an error."""
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(resources.TEMPLATES_DIR, encoding="utf-8"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
    )
    return env.get_template(name).render(**context)
