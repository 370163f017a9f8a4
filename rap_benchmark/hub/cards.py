"""Dataset cards: README.md with YAML front matter, rendered from the templates in ``cards/``.

Everything the card states is computed here (configs, splits, rows, hashes, withheld rows); the
Jinja template in ``cards/dataset_card.md.j2`` only lays it out, and ``cards/CHANGELOG.md`` is
included verbatim. The front matter's ``configs:`` block declares every data file, so the Hub and
``datasets.load_dataset`` need no loading script.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rap_benchmark.core import resources

if TYPE_CHECKING:
    from rap_benchmark.hub.export import RepoTables

CARD_TEMPLATE = "dataset_card.md.j2"
CHANGELOG = "CHANGELOG.md"


def cards_dir() -> Path:
    """The folder holding the card templates.

    Looked up in order: ``$RAP_CARDS_DIR``; ``cards/`` next to the package (a source checkout or
    an editable install); ``<prefix>/share/rap_benchmark/cards`` (a wheel that ships them as data
    files).
    """
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


def front_matter(tables: RepoTables, manifest: dict[str, Any]) -> dict[str, Any]:
    """The card's YAML metadata: licence, name, tags and one ``configs`` entry per config."""
    configs = []
    for name, splits in manifest["configs"].items():
        entry: dict[str, Any] = {"config_name": name}
        if any(c.name == name and c.default for c in tables.configs):
            entry["default"] = True
        entry["data_files"] = [{"split": s, "path": info["path"]} for s, info in splits.items()]
        configs.append(entry)
    return {
        "pretty_name": tables.title,
        "license": tables.licence,
        "language": ["en"],
        "tags": ["rap-benchmark", "forecasting", "arxiv", "science-of-science"],
        "configs": configs,
    }


def render_card(tables: RepoTables, manifest: dict[str, Any], context: dict[str, Any]) -> str:
    import jinja2
    import yaml

    root = cards_dir()
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(root)),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        autoescape=False,
    )
    rows = [
        {"config": cfg, "split": split, "rows": info["rows"], "content_hash": info["content_hash"]}
        for cfg, splits in manifest["configs"].items()
        for split, info in splits.items()
    ]
    withheld = [
        {"config": cfg, "split": split, "rows": info["rows"], "target_columns": info["target_columns"]}
        for cfg, splits in manifest["withheld"].items()
        for split, info in splits.items()
    ]
    default = next((c.name for c in tables.configs if c.default), tables.configs[0].name)
    text = env.get_template(CARD_TEMPLATE).render(
        front_matter=yaml.safe_dump(front_matter(tables, manifest), sort_keys=False, allow_unicode=True),
        title=tables.title,
        summary=tables.summary,
        repo_id=manifest["repo"],
        default_config=default,
        table_rows=rows,
        configs=tables.configs,
        withheld=withheld,
        changelog=(root / CHANGELOG).read_text(encoding="utf-8").strip(),
        **context,
    )
    return text


def read_front_matter(readme: str | Path) -> dict[str, Any]:
    """Parse the YAML front matter of a card (the block between the first two ``---`` lines)."""
    import yaml

    text = Path(readme).read_text(encoding="utf-8")
    if not text.startswith("---\n"):
        raise ValueError(f"{readme}: no YAML front matter")
    end = text.index("\n---", 4)
    return yaml.safe_load(text[4:end]) or {}
