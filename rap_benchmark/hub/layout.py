"""Names and shapes shared by every module of an exported repo (the writer, the card, the reader,
the reveal check and the publisher): file names, the private folder, the commitment column, and
the records a repo is built from (:class:`RepoTables` of :class:`ConfigTable` s). A leaf module,
so the hub's modules import it and never each other in a circle."""

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
    """Rows of one (config, split) whose targets were withheld.

    ``public`` is what the heldout config publishes (keys + ``target_sha256``); ``targets`` is
    the private table (keys + the target columns) needed to score and, later, to reveal.
    """

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
