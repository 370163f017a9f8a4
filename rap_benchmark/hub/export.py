"""Export a built instance as Hugging Face dataset repos: parquet files plus a dataset card.

Layout (``<HUB_DIR>/<org>/<name>/``, so that ``load_dataset("rap/assignments")`` run from
``<HUB_DIR>`` resolves the local folder offline, and the same call reaches the Hub after
``rap hub publish``)::

    <HUB_DIR>/<org>/<repo>/README.md                      card; YAML ``configs:`` declares every file
    <HUB_DIR>/<org>/<repo>/data/<config>/<split>.parquet  one file per (config, split)
    <HUB_DIR>/<org>/<repo>/rap_manifest.json              rows, content hash and sha256 per file
    <HUB_DIR>/_private/                                   salt and withheld targets: NEVER published

Repos: ``papers`` (arXiv metadata), ``assignments`` (the paper-field membership ledger),
``fields`` (codebooks), ``splits`` (dependency blocks, Dev/Test), ``episodes`` (one config per
counting policy), ``search_manifests`` and, given a CiteCast task folder, ``citecast_tasks``.

Withholding (``withhold_from=W``): for Test fields, everything computed from direction labels of
papers dated on or after W leaves the public repos: the episodes' targets (``y``, ``y_counts``,
``n_y``, the ``y_empty`` flag) when the target window reaches W, and the assignments dated on or
after W, labels and membership alike (membership alone gives ``n_y``). Those rows move to a
``<config>_heldout`` config without target columns (assignments keep only an opaque salted key,
episodes their public inputs), each row with a ``target_sha256`` commitment
(:mod:`rap_benchmark.core.canonical`); targets and salt go to ``_private/``. The ``papers`` repo
ends before W (no episode searches a paper dated on or after its origin, and the last origin is on
or before W), so the target-window papers are not in the published data either. W may not precede
the last origin: one origin's realised window is the next one's
recent window, so the withheld targets would be readable from public inputs.

Pending targets (a living instance, ``rap extend``): episodes flagged ``y_pending`` have no target
yet and are published in a ``<policy>_pending`` config with their inputs and no target columns
(never in ``<policy>`` with a null ``y`` that reads as a target); the manifest (``pending``) and
the card name the waiting origins. Once ``rap resolve`` fills ``y``, the next export publishes
them in ``<policy>``.

Every retrospective target stays recomputable from public arXiv data with the published
instrument once its window has passed; only the living track is leak-free by construction.
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from rap_benchmark.core.artifacts import Instance, codebook_to_dict, write_parquet
from rap_benchmark.core.canonical import commitments, content_hash, new_salt, read_salt, target_values, write_salt
from rap_benchmark.core.dates import add_months, parse_date
from rap_benchmark.core.errors import InputError
from rap_benchmark.core.fsio import atomic_write_text
from rap_benchmark.core.records import Policy, Split, episode_id
from rap_benchmark.core.schemas import (
    ASSIGNMENT_LABELS,
    EPISODE_PENDING_FLAG,
    EPISODE_TARGET_FLAGS,
    EPISODE_TARGETS,
    pending_mask,
)
from rap_benchmark.core.sums import sha256_file
from rap_benchmark.hub.cards import render_card
from rap_benchmark.hub.layout import (
    COMMITMENT_COLUMN,
    HELDOUT_SUFFIX,
    MANIFEST_FILE,
    PENDING_SUFFIX,
    PRIVATE_DIR,
    SALT_FILE,
    ConfigTable,
    RepoTables,
    Withheld,
)
from rap_benchmark.pipeline.build import instrument_provenance

DEFAULT_ORG = "rap"
(_Y_EMPTY,) = EPISODE_TARGET_FLAGS  # withheld with the target columns
ASSIGNMENT_HELD_COLUMNS: tuple[str, ...] = ("arxiv_id", "field_id", "date", *ASSIGNMENT_LABELS)
"""A withheld assignment row is withheld whole: membership (which paper, which field, when) and labels."""
CITECAST_REPO = "citecast_tasks"


@dataclass(frozen=True)
class ExportResult:
    hub_dir: Path
    org: str
    repos: dict[str, Path]
    private_dir: Path | None
    manifest_hash: str
    pending_origins: tuple[str, ...] = ()


# -- tables ----------------------------------------------------------------------------------


def _as_date_strings(values: pd.Series) -> pd.Series:
    return values.map(lambda v: v if isinstance(v, str) else pd.Timestamp(v).date().isoformat())


def _withhold(
    salt: bytes | None, keys: list[str], private: pd.DataFrame, public: pd.DataFrame, target_columns: tuple[str, ...]
) -> Withheld:
    """Withheld rows under ``keys``: the private table (key first) and the public one, with each
    row's commitment to its target as :func:`verify_reveal` recomputes it."""
    if salt is None:
        raise ValueError("withholding needs a salt")
    private.insert(0, "key", keys)
    if "key" not in public:
        public.insert(0, "key", keys)
    public[COMMITMENT_COLUMN] = commitments(salt, keys, target_values(private, target_columns))
    return Withheld(target_columns, "key", public, private)


def _by_split(frame: pd.DataFrame, split_of_row: np.ndarray) -> dict[str, pd.DataFrame]:
    return {
        s.value: frame.loc[split_of_row == s.value].reset_index(drop=True)
        for s in Split
        if (split_of_row == s.value).any()
    }


def instance_is_synthetic(inst: Instance) -> bool:
    """Whether the instance's papers are generated (``mini``) rather than real arXiv records."""
    return (inst.ledger.get("derived") or {}).get("corpus", {}).get("route") == "synthetic"


def pending_origins(inst: Instance) -> tuple[str, ...]:
    """The origins of ``inst`` whose episodes wait for their target window (flag ``y_pending``)."""
    eps = inst.episodes
    return tuple(sorted(set(_as_date_strings(eps.loc[pending_mask(eps), "origin"]))))


def check_withhold_from(inst: Instance, withhold_from: dt.date | str | None) -> dt.date | None:
    """Validate W (see the module docstring); None means nothing is withheld."""
    if withhold_from is None:
        return None
    w = parse_date(withhold_from)
    last = max(inst.spec.origin_dates)
    if w < last:
        raise ValueError(
            f"withhold_from {w} precedes the last origin {last}: the targets of the earlier origins would still be "
            "readable from the next origins' recent windows; use a date on or after the last origin"
        )
    return w


def papers_table(inst: Instance, withhold_from: dt.date | None = None) -> RepoTables:
    frame = inst.papers.copy()
    frame["date"] = _as_date_strings(frame["date"])
    note = ""
    if withhold_from is not None:
        frame = frame.loc[frame["date"] < withhold_from.isoformat()]
        note = f" Papers dated on or after {withhold_from.isoformat()} (the held-out target windows) are not included."
    cfg = ConfigTable(
        "default",
        {"corpus": frame.reset_index(drop=True)},
        "One row per paper: id (no version), v1 date, title, abstract, categories, authors." + note,
        default=True,
    )
    return RepoTables("papers", "RAP papers", "The papers of the instance: the search corpus.", (cfg,))


def opaque_keys(salt: bytes, natural: list[str]) -> list[str]:
    """Keys that name a withheld row without saying which paper or field it is (a salted hash of
    the natural key)."""
    import hashlib

    return [hashlib.sha256(salt + b"\x00row\x00" + k.encode("utf-8")).hexdigest()[:32] for k in natural]


def assignments_table(inst: Instance, salt: bytes | None, withhold_from: dt.date | None) -> RepoTables:
    frame = inst.assignments.copy()
    frame["date"] = _as_date_strings(frame["date"])
    split_of = dict(zip(inst.blocks["field_id"], inst.blocks["split"], strict=True))
    splits = _by_split(frame, frame["field_id"].map(split_of).to_numpy(object))
    withheld: dict[str, Withheld] = {}
    if withhold_from is not None and Split.TEST.value in splits:
        test = splits[Split.TEST.value]
        hide = (test["date"] >= withhold_from.isoformat()).to_numpy(bool)
        if hide.any():
            if salt is None:
                raise ValueError("withholding needs a salt")
            hidden = test.loc[hide, list(ASSIGNMENT_HELD_COLUMNS)]
            keys = opaque_keys(salt, (hidden["arxiv_id"] + "/" + hidden["field_id"]).tolist())
            order = np.argsort(np.asarray(keys, dtype=object), kind="stable")  # row order says nothing
            keys = [keys[i] for i in order]
            private = hidden.iloc[order].reset_index(drop=True)
            public = pd.DataFrame({"key": keys})
            withheld[Split.TEST.value] = _withhold(salt, keys, private, public, ASSIGNMENT_HELD_COLUMNS)
            splits[Split.TEST.value] = test.loc[~hide].reset_index(drop=True)
    cfg = ConfigTable(
        "default",
        splits,
        "One row per paper-field membership: primary direction (D0..D7 or other), optional secondary, "
        "type (single, boundary, bridge, other, low_evidence). Split = the field's Dev/Test split.",
        default=True,
        withheld=withheld,
    )
    return RepoTables(
        "assignments",
        "RAP assignments",
        "The frozen paper-field membership ledger produced by the assignment instrument.",
        (cfg,),
    )


def fields_table(inst: Instance) -> RepoTables:
    blocks = inst.blocks.set_index("field_id")
    rows = []
    for fid in inst.field_ids:
        d = codebook_to_dict(inst.codebooks[fid])
        d["block_id"] = str(blocks.loc[fid, "block_id"])
        d["split"] = str(blocks.loc[fid, "split"])
        rows.append(d)
    frame = pd.DataFrame(rows, columns=["field_id", "name", "definition", "block_id", "split", "directions"])
    cfg = ConfigTable(
        "default",
        _by_split(frame, frame["split"].to_numpy(object)),
        "One row per field: name, definition, dependency block, split and its eight written directions "
        "D0..D7 (name, definition, inclusion, exclusion, pre-cutoff exemplar ids).",
        default=True,
    )
    return RepoTables("fields", "RAP fields", "The frozen codebooks: eight written directions per field.", (cfg,))


def splits_table(inst: Instance) -> RepoTables:
    fields = inst.blocks[["field_id", "block_id", "split"]].sort_values("field_id", kind="stable")
    fields = fields.reset_index(drop=True)
    grouped = fields.groupby("block_id", sort=True)
    blocks = pd.DataFrame(
        {
            "block_id": list(grouped.groups),
            "split": [g["split"].iloc[0] for _, g in grouped],
            "field_ids": [sorted(g["field_id"]) for _, g in grouped],
        }
    )
    blocks["n_fields"] = blocks["field_ids"].map(len).astype(np.int64)
    return RepoTables(
        "splits",
        "RAP splits",
        "Frozen dependency blocks (connected components of strongly overlapping fields) and the Dev/Test split.",
        (
            ConfigTable(
                "fields",
                _by_split(fields, fields["split"].to_numpy(object)),
                "One row per field: its block and split.",
                default=True,
            ),
            ConfigTable(
                "blocks",
                _by_split(blocks, blocks["split"].to_numpy(object)),
                "One row per block: its split and fields (the bootstrap unit).",
            ),
        ),
    )


def episodes_table(inst: Instance, salt: bytes | None, withhold_from: dt.date | None) -> RepoTables:
    frame = inst.episodes.copy()
    frame["origin"] = _as_date_strings(frame["origin"])
    frame.insert(0, "episode_id", [episode_id(f, o) for f, o in zip(frame["field_id"], frame["origin"], strict=True)])
    months = inst.spec.window_months
    configs = []
    present = [p for p in Policy if (frame["policy"] == p.value).any()]
    waiting = pending_mask(frame).to_numpy(bool)
    for policy in present:
        of_policy = (frame["policy"] == policy.value).to_numpy(bool)
        sub = frame.loc[of_policy & ~waiting].reset_index(drop=True)
        splits = _by_split(sub, sub["split"].to_numpy(object))
        withheld: dict[str, Withheld] = {}
        if withhold_from is not None and Split.TEST.value in splits:
            test = splits[Split.TEST.value]
            ends = test["origin"].map(lambda o: add_months(parse_date(o), months))
            hide = (ends > withhold_from).to_numpy(bool)
            if hide.any():
                hidden = test.loc[hide].reset_index(drop=True)
                keys = (hidden["episode_id"] + "/" + policy.value).tolist()
                private = hidden[["episode_id", *EPISODE_TARGETS]].copy()
                private[_Y_EMPTY] = hidden["flags"].map(lambda fl: _Y_EMPTY in list(fl if fl is not None else []))
                public = hidden.drop(columns=list(EPISODE_TARGETS))
                public["flags"] = public["flags"].map(lambda fl: [f for f in list(fl) if f != _Y_EMPTY])
                public.insert(1, "key", keys)
                withheld[Split.TEST.value] = _withhold(salt, keys, private, public, (*EPISODE_TARGETS, _Y_EMPTY))
                splits[Split.TEST.value] = test.loc[~hide].reset_index(drop=True)
        configs.append(
            ConfigTable(
                policy.value,
                splits,
                f"Episodes under the `{policy.value}` counting policy: x (the recent window [T-6mo, T)), "
                "history (three windows before T, oldest first, history[-1] == x), y (the target window "
                "[T, T+6mo)), raw counts, counted mass and flags.",
                default=policy is Policy.CANONICAL,
                withheld=withheld,
            )
        )
        if (of_policy & waiting).any():
            configs.append(_pending_config(frame.loc[of_policy & waiting], policy))
    return RepoTables(
        "episodes",
        "RAP episodes",
        "One (field, origin) forecasting episode per row, one config per counting policy.",
        tuple(configs),
    )


def _pending_config(rows: pd.DataFrame, policy: Policy) -> ConfigTable:
    """Episodes whose target window is not covered yet: their inputs, no target column."""
    rows = rows.drop(columns=list(EPISODE_TARGETS)).reset_index(drop=True)
    origins = tuple(sorted(set(rows["origin"])))
    return ConfigTable(
        policy.value + PENDING_SUFFIX,
        _by_split(rows, rows["split"].to_numpy(object)),
        f"Episodes under `{policy.value}` whose target window is not covered by the data yet (origin "
        f"{', '.join(origins)}, flag `{EPISODE_PENDING_FLAG}`): x and history only; y does not exist yet. "
        "Forecasts for them are sealed before the origin (`rap submit seal`) and scored on the Forecast-Live "
        f"track once `rap resolve` fills y; the next version publishes them in `{policy.value}`.",
        pending_origins=origins,
    )


def search_manifests_table(inst: Instance) -> RepoTables:
    frame = inst.search_manifest.copy()
    for col in ("origin", "start", "end"):
        frame[col] = _as_date_strings(frame[col])
    cfg = ConfigTable(
        "default",
        {r: frame.loc[frame["regime"] == r].reset_index(drop=True) for r in ("fixed", "expanding")},
        "One row per search universe (field, origin, regime): temporal bounds [start, end), the number "
        "of papers and the sha256 of its sorted arXiv ids (the derived-shard hash).",
        default=True,
    )
    return RepoTables(
        "search_manifests",
        "RAP search manifests",
        "The temporal bounds and shard hashes of every episode's search universe.",
        (cfg,),
    )


CITECAST_TARGET_COLUMNS: tuple[str, ...] = ("target", "band")
"""A CiteCast task's target (the citation count) and its band (a function of the target)."""
CITECAST_LOOKUP_COLUMNS: tuple[str, ...] = ("s2_paper_id",)
"""Identifiers that lead straight to a target (the Semantic Scholar record holds the count):
withheld with the target on Test rows."""


def citecast_frame(task_dir: str | Path) -> pd.DataFrame:
    """The server-side CiteCast tasks of a built task folder (``server/tasks.jsonl``) as a table."""
    from rap_benchmark.citecast.tasks import load_tasks

    tasks = load_tasks(task_dir)
    return pd.DataFrame([tasks[k].to_dict() for k in sorted(tasks)])


def citecast_is_synthetic(task_dir: str | Path) -> bool:
    """Whether a CiteCast task folder is the embedded (generated) instance (``citecast.json``)."""
    info = json.loads((Path(task_dir) / "citecast.json").read_text(encoding="utf-8"))
    return (info.get("provenance") or {}).get("instance") == "embedded"


def citecast_table(tasks: pd.DataFrame, salt: bytes | None, *, synthetic: bool = False) -> RepoTables:
    """The CiteCast task table: train rows keep their target; test targets, bands and Semantic
    Scholar ids are withheld. ``tasks`` needs ``task_id``, ``split``, ``target`` and ``band``; any
    other column is published as is."""
    missing = [c for c in ("task_id", "split", *CITECAST_TARGET_COLUMNS) if c not in tasks]
    if missing:
        raise ValueError(f"CiteCast tasks table lacks columns: {', '.join(missing)}")
    frame = tasks.sort_values("task_id", kind="stable").reset_index(drop=True)
    frame["target"] = frame["target"].astype(np.int64)
    train = frame.loc[frame["split"] == "train"].reset_index(drop=True)
    test = frame.loc[frame["split"] == "test"].reset_index(drop=True)
    withheld: dict[str, Withheld] = {}
    if len(test):
        keys = test["task_id"].astype(str).tolist()
        held_cols = tuple(c for c in (*CITECAST_TARGET_COLUMNS, *CITECAST_LOOKUP_COLUMNS) if c in test)
        public = test.drop(columns=list(held_cols))
        withheld["test"] = _withhold(salt, keys, test[["task_id", *held_cols]].copy(), public, held_cols)
    cfg = ConfigTable(
        "default",
        {"train": train},
        (
            "CiteCast tasks: one per generated paper (v1-style metadata); the target is its generated citation "
            "count and band its citation band."
            if synthetic
            else "CiteCast tasks: one per January 2026 arXiv paper (v1 metadata); the target is the Semantic "
            "Scholar citation count snapshotted on 2026-08-23 and band its citation band."
        )
        + " Test targets, bands and Semantic Scholar ids are withheld (config `default_heldout`).",
        default=True,
        withheld=withheld,
    )
    return RepoTables(CITECAST_REPO, "CiteCast tasks", "Citation-forecasting tasks (CiteCast).", (cfg,))


def instance_repos(
    inst: Instance, *, salt: bytes | None = None, withhold_from: dt.date | str | None = None
) -> list[RepoTables]:
    """Every repo's tables for an instance (pure: nothing is written)."""
    w = check_withhold_from(inst, withhold_from)
    if w is not None and salt is None:
        raise ValueError("withholding needs a salt")
    return [
        papers_table(inst, w),
        assignments_table(inst, salt, w),
        fields_table(inst),
        splits_table(inst),
        episodes_table(inst, salt, w),
        search_manifests_table(inst),
    ]


# -- writing ---------------------------------------------------------------------------------


def _write_table(repo_dir: Path, config: str, split: str, frame: pd.DataFrame) -> dict[str, Any]:
    rel = f"data/{config}/{split}.parquet"
    path = repo_dir / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    write_parquet(path, frame, None)  # a derived view: its columns are listed in rap_manifest.json
    return {
        "path": rel,
        "rows": len(frame),
        "columns": list(frame.columns),
        "content_hash": content_hash(frame),
        "sha256": sha256_file(path),
    }


def write_repo(
    tables: RepoTables,
    repo_dir: Path,
    *,
    org: str,
    context: dict[str, Any],
    private_dir: Path | None,
) -> Path:
    """Write one repo folder (data files, manifest, card); withheld targets go to ``private_dir``."""
    if repo_dir.exists():
        shutil.rmtree(repo_dir)
    repo_dir.mkdir(parents=True)
    manifest: dict[str, Any] = {
        "repo": f"{org}/{tables.name}",
        "benchmark_version": context["benchmark_version"],
        "manifest_hash": context["manifest_hash"],
        "instance": context["instance"],
        "spec": context["spec"],
        "configs": {},
        "withheld": {},
    }
    for cfg in tables.configs:
        manifest["configs"][cfg.name] = {s: _write_table(repo_dir, cfg.name, s, f) for s, f in cfg.splits.items()}
        if cfg.pending_origins:  # the key exists only then: exports without pending episodes are as before
            manifest.setdefault("pending", {})[cfg.name] = {
                s: {"rows": len(f), "origins": list(cfg.pending_origins), "absent_columns": list(EPISODE_TARGETS)}
                for s, f in cfg.splits.items()
            }
        if cfg.withheld:
            held_name = cfg.name + HELDOUT_SUFFIX
            manifest["configs"][held_name] = {}
            for split, wh in cfg.withheld.items():
                manifest["configs"][held_name][split] = _write_table(repo_dir, held_name, split, wh.public)
                manifest["withheld"].setdefault(held_name, {})[split] = {
                    "key_column": wh.key_column,
                    "target_columns": list(wh.target_columns),
                    "commitment_column": COMMITMENT_COLUMN,
                    "rows": len(wh.public),
                }
                if private_dir is not None:
                    priv = private_dir / tables.name / held_name / f"{split}.parquet"
                    priv.parent.mkdir(parents=True, exist_ok=True)
                    write_parquet(priv, wh.targets, None)
    atomic_write_text(repo_dir / MANIFEST_FILE, json.dumps(manifest, sort_keys=True, indent=1) + "\n")
    atomic_write_text(repo_dir / "README.md", render_card(tables, manifest, context))
    return repo_dir


def _load_salt(salt_file: Path | None, private_dir: Path) -> bytes:
    """The salt in ``salt_file``, else the one kept in ``private_dir`` (re-exports reuse their
    commitments), else a fresh one (stored by :func:`_keep_salt` once every check has passed)."""
    path = salt_file or (private_dir / SALT_FILE)
    if path.is_file():
        return read_salt(path)
    if salt_file is not None:
        raise FileNotFoundError(f"no salt file at {salt_file}")
    return new_salt()


def _keep_salt(salt: bytes, private_dir: Path) -> None:
    """Store the salt with the private targets (the reveal publishes both together)."""
    path = private_dir / SALT_FILE
    if path.is_file():
        if read_salt(path) != salt:
            raise InputError(f"{path} holds another salt; export to a fresh folder or pass that salt")
        return
    write_salt(path, salt)


def _foreign_entry(hub_dir: Path) -> Path | None:
    """The first entry of ``hub_dir`` that an export did not write (None when there is none)."""
    for entry in sorted(hub_dir.iterdir()):
        if entry.name == PRIVATE_DIR and entry.is_dir():
            continue
        if not entry.is_dir():
            return entry
        for repo in sorted(entry.iterdir()):
            if not (repo.is_dir() and (repo / MANIFEST_FILE).is_file()):
                return repo
    return None


def check_destination(hub_dir: Path) -> None:
    """Refuse, before anything is written, a file or a non-empty folder an export did not write."""
    if hub_dir.exists() and not hub_dir.is_dir():
        raise InputError(f"{hub_dir} is a file, not a folder")
    foreign = _foreign_entry(hub_dir) if hub_dir.is_dir() else None
    if foreign is not None:
        raise InputError(
            f"{hub_dir} is not empty and was not written by an export ({foreign} is not an exported repo): "
            "export into a new or empty folder"
        )


def check_withheld_kept(hub_dir: Path, org: str, withholds: dict[str, bool]) -> None:
    """Refuse to replace a repo that withholds targets with one that would publish them."""
    for name, withholding in sorted(withholds.items()):
        manifest = hub_dir / org / name / MANIFEST_FILE
        if withholding or not manifest.is_file():
            continue
        if json.loads(manifest.read_text(encoding="utf-8")).get("withheld"):
            raise InputError(
                f"{manifest.parent} withholds Test targets; exporting over it without withholding would publish "
                "them (withhold them again, or export into another folder)"
            )


def export_instance(
    inst: Instance,
    hub_dir: str | Path,
    *,
    org: str = DEFAULT_ORG,
    withhold_from: dt.date | str | None = None,
    salt: bytes | None = None,
    salt_file: str | Path | None = None,
    citecast_tasks: pd.DataFrame | None = None,
    citecast_synthetic: bool = False,
    repos: Sequence[str] | None = None,
    progress: Callable[[str], None] | None = None,
) -> ExportResult:
    """Write every repo of ``inst`` under ``<hub_dir>/<org>/``; return where they are.

    A salt, needed only when something is withheld, comes from ``salt``, else ``salt_file``, else
    ``<hub_dir>/_private/salt.hex`` (created fresh when absent).
    """
    hub_dir = Path(hub_dir)
    private_dir = hub_dir / PRIVATE_DIR
    w = check_withhold_from(inst, withhold_from)
    check_destination(hub_dir)
    needs_salt = w is not None or (citecast_tasks is not None and (citecast_tasks["split"] == "test").any())
    if needs_salt and salt is None:
        salt = _load_salt(Path(salt_file) if salt_file else None, private_dir)
    tables = instance_repos(inst, salt=salt, withhold_from=w)
    if citecast_tasks is not None:
        tables.append(citecast_table(citecast_tasks, salt, synthetic=citecast_synthetic))
    if repos is not None:
        unknown = sorted(set(repos) - {t.name for t in tables})
        if unknown:
            raise ValueError(f"unknown repos: {', '.join(unknown)}")
        tables = [t for t in tables if t.name in set(repos)]
    check_withheld_kept(hub_dir, org, {t.name: any(c.withheld for c in t.configs) for t in tables})
    if needs_salt and salt is not None:
        _keep_salt(salt, private_dir)
    context = {
        "benchmark_version": inst.spec.version,
        "manifest_hash": inst.manifest_hash,
        "instance": inst.spec.name,
        "instance_description": inst.spec.description,
        "spec": inst.spec.to_dict(),  # every constant a harness needs to run the episodes (prompts, search)
        "org": org,
        "withhold_from": w.isoformat() if w else None,
        "origins": list(inst.spec.origins),
        "pending_origins": list(pending_origins(inst)),
        "n_fields": len(inst.field_ids),
        "n_papers": len(inst.papers),
        "instrument": instrument_provenance(inst.ledger)["line"],
        "synthetic": instance_is_synthetic(inst),
        "citecast_synthetic": bool(citecast_synthetic),
    }
    written: dict[str, Path] = {}
    any_withheld = False
    for t in tables:
        if progress:
            progress(t.name)
        any_withheld |= any(c.withheld for c in t.configs)
        written[t.name] = write_repo(
            t, hub_dir / org / t.name, org=org, context=context, private_dir=private_dir if needs_salt else None
        )
    if any_withheld:
        atomic_write_text(
            private_dir / "README.md",
            "PRIVATE: the salt and the withheld targets of the public repos next to this folder.\n"
            "Never publish this folder before the reveal; `rap hub publish` never uploads it.\n"
            "To reveal, publish it as is; anyone can then run `rap leaderboard verify-reveal`.\n",
            encoding="utf-8",
        )
    return ExportResult(
        hub_dir, org, written, private_dir if any_withheld else None, inst.manifest_hash, pending_origins(inst)
    )
