"""The leaderboard as a Hugging Face dataset repo: ``rap hub export-board``.

Laid out like the instance repos, so ``rap hub publish`` verifies and uploads it the same way::

    <HUB_DIR>/<org>/<name>/README.md                       card; YAML ``configs:`` per track and table
    <HUB_DIR>/<org>/<name>/data/<config>/<split>.parquet   retrospective, forecast_live, contrasts,
                                                           submissions (one row per submission and condition)
    <HUB_DIR>/<org>/<name>/rap_manifest.json               rows, content hash and sha256 per file; the board's meta

The card (``cards/leaderboard_card.md.j2``) states what every number was computed against.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pandas as pd

from rap_benchmark.core.errors import InputError
from rap_benchmark.core.fsio import atomic_write_text
from rap_benchmark.hub.cards import config_entries, render_card_template
from rap_benchmark.hub.layout import MANIFEST_FILE

BOARD_REPO = "leaderboard"
BOARD_TEMPLATE = "leaderboard_card.md.j2"
TRACK_CONFIGS = {
    "leaderboard.csv": "retrospective",
    "leaderboard_live.csv": "forecast_live",
    "leaderboard_citecast.csv": "citecast",
}
CITECAST = "citecast"
"""The CiteCast track's config; its board was scored against a CiteCast instance, stated apart in the card."""
USAGE_FIELDS = ("episodes", "input_tokens", "output_tokens", "search_calls", "cost_usd")


def split_name(split: str) -> str:
    """A Hugging Face split name for a board's split (``all`` is reserved by ``datasets``)."""
    return "all_splits" if split == "all" else split


def _read_csv(path: Path) -> pd.DataFrame:
    try:
        return pd.read_csv(path)
    except (FileNotFoundError, IsADirectoryError, pd.errors.EmptyDataError):  # absent or empty: no rows
        return pd.DataFrame()


def submission_rows(verdicts: list[dict[str, Any]], track: str) -> pd.DataFrame:
    """One row per (submission, declared condition): verdict, metadata and stated usage (null: unknown)."""
    rows = []
    for v in verdicts:
        meta = v.get("meta") or {}
        usage = meta.get("usage") or {}
        by = usage.get("by_condition") or {}
        if track == CITECAST:  # one usage block for the whole file, per task
            by = {None: {"episodes": usage.get("tasks"), **{k: usage.get(k) for k in USAGE_FIELDS[1:]}}}
        for cond in meta.get("conditions") or [None]:
            entry = by.get(cond) or {}
            rows.append(
                {
                    "track": track,
                    "submission": Path(str(v.get("submission") or v.get("reveal") or "")).name,
                    "accepted": bool(v.get("accepted")),
                    "model": meta.get("model"),
                    "condition": cond,
                    "knowledge_cutoff": meta.get("knowledge_cutoff"),
                    "tools": ",".join(meta.get("tools") or []),
                    "submitter": meta.get("submitter"),
                    "benchmark_version": meta.get("benchmark_version") or meta.get("citecast_version"),
                    "usage_source": usage.get("source"),
                    "prices_as_of": usage.get("prices_as_of"),
                    **{f"usage_{k}": entry.get(k) for k in USAGE_FIELDS},
                    "problems": len(v.get("problems") or []),
                }
            )
    frame = pd.DataFrame(rows)
    for k in USAGE_FIELDS:
        column = f"usage_{k}"
        if column in frame:
            frame[column] = frame[column].astype("float64")
    return frame


def board_tables(board_dirs: list[Path]) -> tuple[dict[str, dict[str, pd.DataFrame]], dict[str, Any]]:
    """config -> split -> table from one or more board folders (``rap leaderboard score --out``,
    with or without ``--live``, or on a CiteCast instance), and the board's meta (from
    ``board.json``; a CiteCast board's under the key ``citecast``: another instance)."""
    configs: dict[str, dict[str, pd.DataFrame]] = {}
    meta: dict[str, Any] = {}
    citecast: dict[str, Any] = {}
    subs: list[pd.DataFrame] = []
    for folder in board_dirs:
        if not folder.is_dir():
            raise InputError(f"no board folder at {folder}")
        found = [n for n in TRACK_CONFIGS if (folder / n).is_file()]
        if not found:
            raise InputError(f"{folder} holds no leaderboard.csv or leaderboard_live.csv (run rap leaderboard score)")
        if found == ["leaderboard_citecast.csv"]:
            if CITECAST in configs:
                raise InputError(f"two boards of track {CITECAST}")
            this = json.loads((folder / "board.json").read_text(encoding="utf-8"))
            configs[CITECAST] = {split_name(str(this.get("split", "test"))): _read_csv(folder / found[0])}
            subs.append(
                submission_rows(json.loads((folder / "submissions.json").read_text(encoding="utf-8")), CITECAST)
            )
            citecast = this
            continue
        if (folder / "board.json").is_file():
            this = json.loads((folder / "board.json").read_text(encoding="utf-8"))
            if meta and this.get("manifest_hash") != meta.get("manifest_hash"):
                raise InputError(f"{folder} was scored against another instance than {board_dirs[0]}")
            meta = meta or this
        for name in found:
            config = TRACK_CONFIGS[name]
            board = _read_csv(folder / name)
            split = split_name(
                str(board["split"].iloc[0]) if "split" in board and len(board) else str(meta.get("split", "test"))
            )
            if config in configs and split in configs[config]:
                raise InputError(f"two boards of track {config}, split {split}")
            configs.setdefault(config, {})[split] = board
            verdict_file = folder / ("submissions.json" if config == "retrospective" else "reveals.json")
            if verdict_file.is_file():
                subs.append(submission_rows(json.loads(verdict_file.read_text(encoding="utf-8")), config))
        contrasts = _read_csv(folder / "contrasts.csv")
        if len(contrasts):
            configs.setdefault("contrasts", {})[split_name(str(meta.get("split", "test")))] = contrasts
    if subs:
        configs["submissions"] = {"submissions": pd.concat(subs, ignore_index=True)}
    return configs, {**meta, CITECAST: citecast} if citecast else meta


def board_title(configs: dict[str, Any]) -> str:
    """``RAP leaderboard``, ``CiteCast leaderboard`` or ``RAP and CiteCast leaderboard``: the
    benchmarks whose tracks the board holds."""
    rap = any(c in configs for c in ("retrospective", "forecast_live"))
    named = [name for name, held in (("RAP", rap), ("CiteCast", CITECAST in configs)) if held]
    return f"{' and '.join(named or ['RAP'])} leaderboard"


def _card(repo: str, configs: dict[str, dict[str, Any]], meta: dict[str, Any], subs: pd.DataFrame) -> str:
    import yaml

    default = next((c for c in ("retrospective", "forecast_live", CITECAST) if c in configs), "retrospective")
    title = board_title(configs)
    front = {
        "pretty_name": title,
        "license": "cc-by-4.0",
        "language": ["en"],
        "tags": ["rap-benchmark", "leaderboard", "forecasting"],
        "configs": config_entries(configs, {default}),
    }
    return render_card_template(
        BOARD_TEMPLATE,
        front_matter=yaml.safe_dump(front, sort_keys=False),
        meta=meta,
        repo=repo,
        title=title,
        default_config=default,
        submissions=subs.astype(object).where(subs.notna(), None).to_dict(orient="records") if len(subs) else [],
    )


def export_board(
    board_dirs: list[str | Path], hub_dir: str | Path, *, org: str = "rap", name: str = BOARD_REPO
) -> Path:
    """Write the board folders as one dataset repo ``<hub_dir>/<org>/<name>``; return its folder."""
    from rap_benchmark.hub.export import _write_table

    configs, meta = board_tables([Path(d) for d in board_dirs])
    repo_dir = Path(hub_dir) / org / name
    staging = repo_dir.with_name(f".{name}.building")
    if staging.exists():
        shutil.rmtree(staging)
    staging.mkdir(parents=True)
    manifest: dict[str, Any] = {
        "repo": f"{org}/{name}",
        "benchmark_version": meta.get("benchmark_version"),
        "manifest_hash": meta.get("manifest_hash"),
        "instance": meta.get("instance"),
        "board": meta,
        "configs": {c: {s: _write_table(staging, c, s, f) for s, f in splits.items()} for c, splits in configs.items()},
        "withheld": {},
    }
    atomic_write_text(staging / MANIFEST_FILE, json.dumps(manifest, sort_keys=True, indent=1) + "\n")
    subs = configs.get("submissions", {}).get("submissions", pd.DataFrame())
    atomic_write_text(staging / "README.md", _card(f"{org}/{name}", manifest["configs"], meta, subs))
    if repo_dir.exists():
        shutil.rmtree(repo_dir)
    staging.rename(repo_dir)
    return repo_dir
