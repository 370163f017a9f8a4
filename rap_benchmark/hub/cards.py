"""Dataset cards: README.md with YAML front matter, rendered from the Jinja templates in ``cards/``.

What a card states is computed here; the templates only lay it out (``CHANGELOG.md`` is included
verbatim). The front matter's ``configs:`` block declares every data file, so the Hub and
``datasets.load_dataset`` need no loading script.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from rap_benchmark.core import resources
from rap_benchmark.core.dates import add_months, parse_date
from rap_benchmark.hub.layout import RepoTables

CARD_TEMPLATE = "dataset_card.md.j2"
CHANGELOG = "CHANGELOG.md"


def cards_dir() -> Path:
    """The folder holding the card templates: ``$RAP_CARDS_DIR``, else ``cards/`` next to the
    package (a checkout), else ``<prefix>/share/rap_benchmark/cards`` (a wheel's data files)."""
    candidates = []
    if os.environ.get("RAP_CARDS_DIR"):
        candidates.append(Path(os.environ["RAP_CARDS_DIR"]))
    candidates.append(resources.REPO_DIR / "cards")
    candidates.append(Path(sys.prefix) / "share" / "rap_benchmark" / "cards")
    for c in candidates:
        if (c / CARD_TEMPLATE).is_file():
            return c
    raise FileNotFoundError(
        f"card templates ({CARD_TEMPLATE}) not found in: {', '.join(map(str, candidates))}; set RAP_CARDS_DIR"
    )


TASK_CATEGORIES: dict[str, list[str]] = {
    "papers": ["text-retrieval"],
    "assignments": ["text-classification"],
    "fields": ["text-classification"],
    "splits": ["time-series-forecasting"],
    "episodes": ["time-series-forecasting"],
    "search_manifests": ["text-retrieval"],
    "citecast_tasks": ["tabular-regression"],
}
"""Hugging Face ``task_categories`` per repo."""

SIZE_BUCKETS: tuple[tuple[int, str], ...] = (
    (1_000, "n<1K"),
    (10_000, "1K<n<10K"),
    (100_000, "10K<n<100K"),
    (1_000_000, "100K<n<1M"),
    (10_000_000, "1M<n<10M"),
    (100_000_000, "10M<n<100M"),
)


def size_category(n_rows: int) -> str:
    """The Hugging Face ``size_categories`` bucket of a repo's total row count."""
    for limit, name in SIZE_BUCKETS:
        if n_rows < limit:
            return name
    return "n>100M"


def repo_rows(manifest: dict[str, Any]) -> int:
    return sum(info["rows"] for splits in manifest["configs"].values() for info in splits.values())


def is_citecast(tables: RepoTables) -> bool:
    return tables.name == "citecast_tasks"


def front_matter(tables: RepoTables, manifest: dict[str, Any], context: dict[str, Any] | None = None) -> dict[str, Any]:
    """The card's YAML metadata, with one ``configs`` entry per config."""
    context = context or {}
    synthetic = context.get("citecast_synthetic" if is_citecast(tables) else "synthetic", False)
    tags = ["rap-benchmark", "forecasting", "science-of-science"]
    tags.append("synthetic" if synthetic else "arxiv")
    if is_citecast(tables):
        tags.append("citation-forecasting")
    return {
        "pretty_name": tables.title,
        "license": tables.licence,
        "language": ["en"],
        "task_categories": TASK_CATEGORIES.get(tables.name, ["other"]),
        "size_categories": [size_category(repo_rows(manifest))],
        "tags": tags,
        "configs": config_entries(manifest["configs"], {c.name for c in tables.configs if c.default}),
    }


def config_entries(configs: dict[str, dict[str, Any]], defaults: set[str]) -> list[dict[str, Any]]:
    """The front matter's ``configs:`` block: every data file of a manifest's configs, by split."""
    return [
        {
            "config_name": name,
            **({"default": True} if name in defaults else {}),
            "data_files": [{"split": s, "path": info["path"]} for s, info in splits.items()],
        }
        for name, splits in configs.items()
    ]


def source_text(tables: RepoTables, context: dict[str, Any]) -> str:
    """Where the rows come from, in words that are true of this instance."""
    if is_citecast(tables):
        if context.get("citecast_synthetic"):
            return (
                "The tasks are the embedded CiteCast instance: papers, their metadata and their citation counts are "
                "generated from a seed by `rap_benchmark.citecast.embedded` (a synthetic stand-in for testing, not "
                "real arXiv papers or Semantic Scholar counts)."
            )
        return (
            "The tasks are arXiv papers first submitted in January 2026 (version 1 metadata); the target is the "
            "citation count Semantic Scholar recorded on the snapshot date, harvested by `rap citecast build`."
        )
    if context.get("synthetic"):
        return (
            f"The `{context['instance']}` instance is synthetic: its {context['n_papers']:,} papers (ids, dates, "
            "titles, abstracts, authors) are generated from a seed by `rap_benchmark.pipeline.synth`; they are "
            "not arXiv records. It exists to test the pipeline and the harnesses on a CPU."
        )
    return (
        f"The `{context['instance']}` instance is built from {context['n_papers']:,} arXiv papers (version 1 "
        "metadata: ids, dates, titles, abstracts, categories, authors)."
    )


def recompute_text(tables: RepoTables, context: dict[str, Any]) -> list[str]:
    """What a reader can and cannot recompute from the published repos (one bullet each)."""
    w = context.get("withhold_from")
    if is_citecast(tables):
        return [
            "Can: every train task's target and band are in the `default` config.",
            "Cannot from this repo: the Test targets, their bands and their Semantic Scholar ids (withheld; "
            "committed per row in `default_heldout`).",
            "But: anyone can read a paper's citation count on Semantic Scholar by its arXiv id. The Test targets "
            "are hidden from an agent only while it sees nothing newer than the frozen corpus (the environment "
            "enforces the cutoff), not from a person with web access after the snapshot date.",
        ]
    out = [
        "Can: every published target. Each composition in `episodes` is counted from the `assignments` rows of "
        "its field and window under its counting policy (`rap_benchmark.pipeline.policies`); every search "
        "universe in `search_manifests` is rebuilt from `papers` and `assignments` (paper count and shard hash).",
    ]
    if w:
        out.append(
            f"Cannot from these repos: the Test targets whose window reaches {w} (`episodes/*_heldout`). The "
            f"assignments of Test fields dated on or after {w} (labels and membership) and every paper dated on "
            "or after it are not published; each withheld row is committed by a salted hash and revealed later."
        )
    elif context.get("pending_origins"):
        out.append("Nothing is withheld in this export: every target that exists is public.")
    else:
        out.append("Nothing is withheld in this export: every target is public.")
    for origin in context.get("pending_origins") or ():
        end = add_months(parse_date(origin), int(context["spec"]["window_months"])).isoformat()
        out.append(
            f"Not yet, by anyone: the targets of origin {origin} (window [{origin}, {end})), which the data do not "
            "cover yet. Those episodes are published without y (`episodes/*_pending`); forecasts for them are "
            "sealed before the origin and scored on the Forecast-Live track once a later version resolves them."
        )
    if context.get("synthetic"):
        out.append(
            f"But: the `{context['instance']}` instance is generated from a seed that ships with the package, so "
            f"`rap build --instance {context['instance']}` regenerates every target: withholding here only "
            "exercises the mechanism."
        )
        return out
    out.append(
        "But: every retrospective target is recomputable from public arXiv data with the published instrument "
        "once its window has passed (the papers are on arXiv, and the instrument and codebooks are published). "
        "Withholding keeps targets out of this data, not out of the world; only the living track (forecasts "
        "sealed before their window opens) is leak-free by construction. Models trained after a window may have "
        "seen it: see the exposure masks."
    )
    return out


def licence_text(tables: RepoTables, context: dict[str, Any]) -> str:
    synthetic = context.get("citecast_synthetic" if is_citecast(tables) else "synthetic", False)
    if synthetic:
        return "The generated data here is released under CC0 1.0. The code (`rap_benchmark`) is MIT."
    if is_citecast(tables):
        return (
            "arXiv metadata (titles, abstracts, ids, dates) is CC0 1.0; citation counts come from Semantic Scholar "
            "(see its terms); the task table is released under CC0 1.0. The code (`rap_benchmark`) is MIT."
        )
    return (
        "arXiv metadata (titles, abstracts, ids, dates) is CC0 1.0; the labels, codebooks and derived tables "
        "here are released under CC0 1.0 as well. The code (`rap_benchmark`) is MIT."
    )


def render_card_template(name: str, **values: Any) -> str:
    """Render the Jinja template ``name`` of :func:`cards_dir` (undefined names are errors)."""
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(cards_dir())),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        autoescape=False,
    )
    return env.get_template(name).render(**values)


def render_card(tables: RepoTables, manifest: dict[str, Any], context: dict[str, Any]) -> str:
    import yaml

    def entries(section: str, *keys: str) -> list[dict[str, Any]]:
        """One row per (config, split) of a manifest section, with the given keys of its entry."""
        return [
            {"config": cfg, "split": split, **{k: info[k] for k in keys}}
            for cfg, splits in manifest.get(section, {}).items()
            for split, info in splits.items()
        ]

    default = next((c.name for c in tables.configs if c.default), tables.configs[0].name)
    return render_card_template(
        CARD_TEMPLATE,
        front_matter=yaml.safe_dump(front_matter(tables, manifest, context), sort_keys=False, allow_unicode=True),
        citecast=is_citecast(tables),
        source=source_text(tables, context),
        recompute=recompute_text(tables, context),
        licence=licence_text(tables, context),
        title=tables.title,
        summary=tables.summary,
        repo_id=manifest["repo"],
        default_config=default,
        table_rows=entries("configs", "rows", "content_hash"),
        configs=tables.configs,
        withheld=entries("withheld", "rows", "target_columns"),
        pending=entries("pending", "rows", "origins"),
        changelog=(cards_dir() / CHANGELOG).read_text(encoding="utf-8").strip(),
        **context,
    )
