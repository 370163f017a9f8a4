"""Names and shapes shared by the hub's modules (file names, the private folder, the commitment
column, :class:`RepoTables` of :class:`ConfigTable` s): a leaf, so they never import in a circle."""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

PRIVATE_DIR = "_private"
"""Sibling of the exported repos; holds the salt and the withheld targets. Never published."""

MANIFEST_FILE = "rap_manifest.json"
"""Per repo: rows, columns, content hash and sha256 of every data file, and what is withheld."""

REPO_NAMES: tuple[str, ...] = ("papers", "assignments", "fields", "splits", "episodes", "search_manifests")
"""The repos of an instance (``citecast_tasks`` is exported apart: CiteCast runs its own environment)."""

SALT_FILE = "salt.hex"
COMMITMENT_COLUMN = "target_sha256"
HELDOUT_SUFFIX = "_heldout"
PENDING_SUFFIX = "_pending"
"""``<policy>_pending``: episodes of a living instance whose target window is not covered yet (no y)."""


@dataclass(frozen=True)
class Withheld:
    """Rows of one (config, split) whose targets were withheld: ``public`` (keys and
    ``target_sha256``) and the private ``targets`` (keys and target columns, to score and reveal)."""

    target_columns: tuple[str, ...]
    key_column: str
    public: pd.DataFrame
    targets: pd.DataFrame


@dataclass(frozen=True)
class ConfigTable:
    """One config of a repo: split name -> table, plus withheld rows per split."""

    name: str
    splits: dict[str, pd.DataFrame]
    description: str
    default: bool = False
    withheld: dict[str, Withheld] = field(default_factory=dict)
    pending_origins: tuple[str, ...] = ()
    """Origins whose targets do not exist yet: set on a ``<policy>_pending`` config, whose rows have no target."""


@dataclass(frozen=True)
class RepoTables:
    name: str
    title: str
    summary: str
    configs: tuple[ConfigTable, ...]
    licence: str = "cc0-1.0"
