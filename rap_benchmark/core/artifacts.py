"""Artifact folders: named files plus a SHA256 manifest, verified on load.

A built instance is a folder (see docs/ARCHITECTURE.md for every file's columns)::

    FINAL_PARAMETER_LEDGER_V1.json  spec + every derived/tuned constant
    papers.parquet                  arxiv_id, date, title, abstract, categories, authors
    codebooks.json                  one Codebook per field, eight directions each
    assignments.parquet             arxiv_id, field_id, primary, secondary, type
    blocks.parquet                  field_id, block_id, split
    episodes.parquet                field_id, origin, policy, x/history/y compositions and counts
    search_manifest.parquet         every episode universe's temporal bounds and shard hash
    SHA256SUMS                      sha256 of every file above (and any other, except .cache/)

Every parquet table has one Arrow schema (:mod:`rap_benchmark.core.schemas`), checked when it
is written and when it is loaded.

``.cache/`` holds derived, rebuildable data (e.g. tokenised text) and is never hashed.
"""

from __future__ import annotations

import json
import shlex
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa

from rap_benchmark.core.errors import ArtifactError
from rap_benchmark.core.expect import compare, resolve_expected
from rap_benchmark.core.fsio import atomic_path, atomic_write_text, check_replaceable, replacing
from rap_benchmark.core.records import Codebook
from rap_benchmark.core.schemas import (
    ARTIFACT_TABLES,
    EPISODE_TARGET_FLAGS,
    MEMBERSHIPS,
    PUBLIC_EPISODES,
    SchemaError,
    check_table,
    conform,
)
from rap_benchmark.core.serial import from_dict, to_dict
from rap_benchmark.core.spec import INSTANCE_NAMES, BenchmarkSpec
from rap_benchmark.core.suggest import nearby
from rap_benchmark.core.sums import CACHE_DIR, SUMS_FILE, listed_sha256, manifest_hash, verify

LEDGER_FILE = "FINAL_PARAMETER_LEDGER_V1.json"
INSTANCE_MARKERS = (SUMS_FILE, LEDGER_FILE)
"""The files that mark a folder as a RAP instance, which a new build or version may replace."""
OPTIONAL_TABLES: tuple[str, ...] = ("truth", "parallel", "model_labels")
"""Artifact tables only some instances hold (loaded into ``Instance.extras``)."""
INSTANCE_TABLES = (
    "codebooks.json",
    "papers.parquet",
    "assignments.parquet",
    "blocks.parquet",
    "episodes.parquet",
    "search_manifest.parquet",
)


def check_instance_out(out: str | Path) -> None:
    """Refuse (``FileExistsError``) an ``out`` a RAP instance may not be written to: a file, or a
    non-empty folder that is not an instance (:func:`rap_benchmark.core.fsio.check_replaceable`)."""
    check_replaceable(out, INSTANCE_MARKERS, kind="RAP instance")


def missing_instance(root: str | Path) -> ArtifactError:
    """The error for an instance folder that is not there (or is empty): it names the built
    instance beside it whose name is closest (a typo), and the command that builds one there."""
    root = Path(root)
    if root.is_dir():
        return ArtifactError(f"{root} is an empty folder, not a built instance; build it with: {build_command(root)}")
    near = nearby(root, lambda p: (p / SUMS_FILE).is_file() and (p / LEDGER_FILE).is_file())
    if near is not None:
        return ArtifactError(
            f"no instance folder at {root}; did you mean {near}? (to build one there: {build_command(root)})"
        )
    return ArtifactError(f"no instance folder at {root}; build it with: {build_command(root)}")


def build_command(root: str | Path) -> str:
    """``rap build`` into ``root``: the named instance its folder is called after, else mini (the
    one built from nothing); full needs its corpus."""
    name = Path(root).name if Path(root).name in INSTANCE_NAMES else "mini"
    source = " --source CORPUS" if name == "full" else ""
    return f"rap build --instance {name}{source} --out {shlex.quote(str(root))}"


def replacing_instance(out: str | Path) -> AbstractContextManager[Path]:
    """:func:`rap_benchmark.core.fsio.replacing` for a RAP instance folder ``out``."""
    return replacing(out, INSTANCE_MARKERS, kind="RAP instance")


def write_json(path: Path, payload: Any) -> None:
    """Deterministic JSON: sorted keys, fixed separators, trailing newline."""
    atomic_write_text(path, json.dumps(payload, sort_keys=True, indent=1, ensure_ascii=False) + "\n")


def write_parquet(path: Path, frame: pd.DataFrame, schema: pa.Schema | None) -> None:
    """Deterministic parquet (no pandas index, fixed compression, no metadata) of ``frame``
    checked against ``schema`` (:func:`rap_benchmark.core.schemas.conform`, which raises
    :class:`~rap_benchmark.core.schemas.SchemaError` naming the column).

    ``schema=None`` takes the frame's own types: only for derived tables outside an instance
    folder (the Hub export's views), never for an artifact table.
    """
    import pyarrow.parquet as pq

    if schema is None:
        table = pa.Table.from_pandas(frame, preserve_index=False).replace_schema_metadata(None)
    else:
        table = conform(frame, schema, where=path.name)
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp, compression="zstd", write_statistics=False, store_schema=False)


def write_table(root: Path, name: str, frame: pd.DataFrame) -> Path:
    """Write the artifact table ``name`` (a key of ``ARTIFACT_TABLES``) as ``root/<name>.parquet``."""
    path = root / f"{name}.parquet"
    write_parquet(path, frame, ARTIFACT_TABLES[name])
    return path


def read_table(root: Path, name: str) -> pd.DataFrame:
    """Read the artifact table ``name`` and check it against its schema (a :class:`SchemaError`
    names the file and the column)."""
    import pyarrow.parquet as pq

    path = root / f"{name}.parquet"
    table = pq.read_table(path)
    check_table(table, ARTIFACT_TABLES[name], where=str(path))
    return table.to_pandas()


def codebook_to_dict(cb: Codebook) -> dict[str, Any]:
    """A codebook as written in codebooks.json (``exemplar_titles`` only when recorded)."""
    return to_dict(cb)


def codebook_from_dict(data: dict[str, Any]) -> Codebook:
    return from_dict(Codebook, data)


@dataclass
class Instance:
    """A loaded, verified instance. Tables are pandas DataFrames with the documented columns."""

    root: Path
    spec: BenchmarkSpec
    ledger: dict[str, Any]
    papers: pd.DataFrame
    codebooks: dict[str, Codebook]
    assignments: pd.DataFrame
    blocks: pd.DataFrame
    episodes: pd.DataFrame
    search_manifest: pd.DataFrame
    manifest_hash: str
    extras: dict[str, pd.DataFrame] = field(default_factory=dict)

    @property
    def field_ids(self) -> list[str]:
        return sorted(self.codebooks)

    @property
    def memberships(self) -> pd.DataFrame:
        """Which paper belongs to which field, and its date: the assignments without their labels."""
        return self.assignments[list(MEMBERSHIPS.names)]

    @property
    def search_cache(self) -> SearchCache:
        """Where search may keep its token cache for this instance (``.cache/``, never hashed)."""
        return SearchCache(self.root / CACHE_DIR, listed_sha256(self.root, "papers.parquet"))

    def public_view(self) -> PublicInstance:
        """What an agent may see: this instance without any target (see :class:`PublicInstance`)."""
        flags = self.episodes["flags"].map(lambda fl: [f for f in fl if f not in EPISODE_TARGET_FLAGS])
        episodes = self.episodes[list(PUBLIC_EPISODES.names)].assign(flags=flags)
        return PublicInstance(
            spec=self.spec,
            manifest_hash=self.manifest_hash,
            codebooks=dict(self.codebooks),
            papers=self.papers,
            memberships=self.memberships,
            blocks=self.blocks,
            episodes=episodes,
            search_manifest=self.search_manifest,
            search_cache=self.search_cache,
        )


@dataclass(frozen=True, slots=True)
class SearchCache:
    """The folder search may cache tokens in, and the sha256 of the papers table they key on."""

    folder: Path
    papers_sha256: str


@dataclass(frozen=True, slots=True)
class PublicInstance:
    """An instance as agents see it: target-blind by construction.

    Agent runners, reference agents and harness tasks receive this view, never an
    :class:`Instance`. It has no target columns (``y``, ``y_counts``, ``n_y``), no target flag
    (``y_empty``), no direction labels (``primary``/``secondary``/``type``, from which every
    target is counted: ``memberships`` keeps only paper, field and date) and no ledger. The only
    path it carries is the search token cache (``search_cache``, inside ``.cache/``); code that
    opens files on its own is beyond what a type can stop, so ``tests/test_target_blind.py``
    also destroys the targets on disk and checks that a run over the view is unchanged.

    It still holds every paper's metadata, later ones included (later origins' universes need
    them); what Search lets an agent see of them is bounded by the episode's universe.

    ``rap_benchmark.load(path).public_view()`` gives one; the test checks that nothing reachable
    from it holds a target or a label.
    """

    spec: BenchmarkSpec
    manifest_hash: str
    codebooks: dict[str, Codebook]
    papers: pd.DataFrame
    memberships: pd.DataFrame  # MEMBERSHIPS: arxiv_id, field_id, date
    blocks: pd.DataFrame
    episodes: pd.DataFrame  # PUBLIC_EPISODES
    search_manifest: pd.DataFrame
    search_cache: SearchCache | None = None

    @property
    def field_ids(self) -> list[str]:
        return sorted(self.codebooks)


def load_instance(root: str | Path, *, verify_hashes: bool = True, expect: str | Path | None = None) -> Instance:
    """Load a built instance; by default every file is checked against SHA256SUMS first.

    ``expect`` (a manifest hash, a SHA256SUMS file or folder, a golden manifest name; see
    :mod:`rap_benchmark.core.expect`) refuses an instance that is not that one, which catches an
    edit made consistently to a file and its SHA256SUMS line.
    """
    root = Path(root)
    if not root.is_dir() or not any(root.iterdir()):
        raise missing_instance(root)
    absent = [name for name in (SUMS_FILE, LEDGER_FILE, *INSTANCE_TABLES) if not (root / name).is_file()]
    if absent:
        raise ArtifactError(f"{root} is not a built instance: {', '.join(absent)} missing")
    if verify_hashes:
        problems = verify(root)
        if problems:
            raise ArtifactError(f"{root} failed verification:\n  " + "\n  ".join(problems))
    if expect is not None:
        problems = compare(root, resolve_expected(expect))
        if problems:
            raise ArtifactError(f"{root} is not the expected instance:\n  " + "\n  ".join(problems))
    ledger = json.loads((root / LEDGER_FILE).read_text(encoding="utf-8"))
    spec = BenchmarkSpec.from_dict(ledger["spec"])
    codebooks = {
        d["field_id"]: codebook_from_dict(d) for d in json.loads((root / "codebooks.json").read_text(encoding="utf-8"))
    }
    unknown = sorted(p.name for p in root.glob("*.parquet") if p.stem not in ARTIFACT_TABLES)
    if unknown:
        raise SchemaError(f"{root}: unknown artifact table(s) {', '.join(unknown)}")
    extras = {name: read_table(root, name) for name in OPTIONAL_TABLES if (root / f"{name}.parquet").is_file()}
    return Instance(
        root=root,
        spec=spec,
        ledger=ledger,
        papers=read_table(root, "papers"),
        codebooks=codebooks,
        assignments=read_table(root, "assignments"),
        blocks=read_table(root, "blocks"),
        episodes=read_table(root, "episodes"),
        search_manifest=read_table(root, "search_manifest"),
        manifest_hash=manifest_hash(root),
        extras=extras,
    )
