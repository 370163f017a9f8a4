"""BenchmarkSpec: one typed, versioned object that fixes every constant of an instance.

The defaults are the paper's values. A spec serialises to the parameter ledger
(``FINAL_PARAMETER_LEDGER_V1.json``) and loads back from JSON; unknown keys are rejected so a
typo never silently falls back to a default.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rap_benchmark.core import resources, serial
from rap_benchmark.core.dates import parse_date
from rap_benchmark.core.errors import FileFormatError, InputError

BENCHMARK_VERSION = "1.1.0"
"""Changes whenever what a score means changes (see cards/CHANGELOG.md). An instance whose
contents did not change keeps the version it was built under (its spec pins ``version``)."""

CITECAST_VERSION = "1.0.0"
"""CiteCast's own version (its instance manifest and ``rap --version``): here, beside the RAP
version, so that printing it loads nothing of the CiteCast package."""

MINI_VERSION = "1.0.0"
"""mini's contents are unchanged since 1.0.0 (its codebooks come from the generator)."""


def package_version() -> str:
    """The installed package's version (its metadata, from pyproject.toml): the one version
    string ``rap --version``, ``rap_benchmark.__version__`` and reports show. A source tree
    that is not installed falls back to :data:`BENCHMARK_VERSION`, which the release matches."""
    from importlib import metadata

    try:
        return metadata.version("rap_benchmark")
    except metadata.PackageNotFoundError:
        return BENCHMARK_VERSION


UNSET = "unset"
"""Ledger marker for parameters deliberately not set (e.g. top_p of a hosted API)."""

PAPER_ORIGINS: tuple[str, ...] = ("2024-01-01", "2024-07-01", "2025-01-01", "2025-07-01", "2026-01-01")


@dataclass(frozen=True)
class BenchmarkSpec:
    """Every constant of a RAP instance. Dates are ISO strings so the spec is plain JSON."""

    name: str = "full"
    version: str = BENCHMARK_VERSION
    description: str = "The paper's instance (356,357 arXiv papers, 278 fields)."
    # corpus (the paper's corpus snapshot)
    categories: tuple[str, ...] = ("cs.CL", "cs.LG", "cs.AI", "cs.CV")
    date_start: str = "2022-06-01"
    date_end: str = "2026-07-01"  # exclusive
    # fields and codebooks (the paper's codebook construction)
    n_directions: int = 8
    codebook_cutoff: str = "2024-01-01"  # codebooks use only papers dated before this
    eligibility_end: str = "2026-01-01"  # field eligibility counts memberships before this
    min_field_papers: int = 200  # memberships through eligibility_end for a field to be kept
    n_fields: int = 278
    # the paper's episodes
    origins: tuple[str, ...] = PAPER_ORIGINS
    window_months: int = 6
    history_windows: int = 3
    # dependency blocks and split (the paper's Dev/Test split)
    block_min_shared: int = 10
    block_min_overlap: float = 0.60
    dev_seed_fields: tuple[str, ...] = ()
    n_dev_seed_fields: int = 38  # used when dev_seed_fields is empty: drawn with split_seed
    split_seed: int = 20240101
    # search (the paper's Search environment)
    bm25_k1: float = 1.5
    bm25_b: float = 0.75
    top_k: int = 8
    abstract_chars: int = 600  # abstracts in observations are cut to this many characters
    # agent protocol (the paper's conditions)
    temperature: float = 0.0
    max_search_calls: int = 20
    max_tokens_closed: int = 1600
    max_tokens_search: int = 1800
    max_tokens_open_model: int = 16384
    top_p: str = UNSET
    sampling_seed: str = UNSET
    # the paper's statistical baselines
    ewma_weights: tuple[float, float, float] = (0.50, 0.25, 0.25)  # newest to oldest
    arima_phi: float = -0.400
    holt_alpha: float = 0.850
    holt_beta: float = 0.600
    var_lambda: float = 133.352
    arima_phi_grid: tuple[float, ...] = tuple(round(-0.9 + 0.1 * i, 3) for i in range(19))
    holt_alpha_grid: tuple[float, ...] = tuple(round(0.05 * i, 3) for i in range(1, 21))
    holt_beta_grid: tuple[float, ...] = tuple(round(0.05 * i, 3) for i in range(0, 21))
    var_lambda_grid: tuple[float, ...] = tuple(round(10 ** (-2 + 0.25 * i), 3) for i in range(21))
    # statistics (the paper's bootstrap intervals and reliability ceiling)
    bootstrap_resamples: int = 10_000
    bootstrap_seed: int = 20260101
    reliability_splits: int = 200
    reliability_seed: int = 7
    revision_horizons: tuple[int, ...] = (6, 12, 18)
    # generation and instruments
    seed: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in ("date_start", "date_end", "codebook_cutoff", "eligibility_end"):
            parse_date(getattr(self, name))
        for origin in self.origins:
            parse_date(origin)
        if list(self.origins) != sorted(self.origins):
            raise InputError("origins must be in increasing order")
        if self.n_directions != 8:
            raise InputError("RAP codebooks have exactly eight directions")
        if not 0 < self.block_min_overlap <= 1:
            raise InputError("block_min_overlap must be in (0, 1]")
        if abs(sum(self.ewma_weights) - 1.0) > 1e-12:
            raise InputError("ewma_weights must sum to 1")

    # -- dates -------------------------------------------------------------------------------
    @property
    def origin_dates(self) -> tuple[dt.date, ...]:
        return tuple(parse_date(o) for o in self.origins)

    # -- serialisation (core.serial: tuples as lists; unknown keys rejected) -------------------
    def to_dict(self) -> dict[str, Any]:
        return serial.to_dict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> BenchmarkSpec:
        return serial.from_dict(cls, data, strict=True, what="spec")

    @classmethod
    def from_json(cls, path: str | Path) -> BenchmarkSpec:
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except OSError as exc:
            raise FileFormatError(path, f"cannot read the spec file ({exc.strerror or exc})") from exc
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise FileFormatError(path, f"not a JSON spec file ({exc})") from exc
        if not isinstance(data, dict):
            raise FileFormatError(path, "a spec file holds one JSON object")
        data.pop("_comment", None)
        data.pop("_why", None)
        return cls.from_dict(data)

    def replace(self, **changes: Any) -> BenchmarkSpec:
        return dataclasses.replace(self, **changes)

    def ledger(self) -> dict[str, Any]:
        """The FINAL_PARAMETER_LEDGER_V1 payload: every constant, unset ones marked."""
        return {"ledger_version": 1, "benchmark_version": self.version, "spec": self.to_dict()}


def mini_spec() -> BenchmarkSpec:
    """The embedded default: generated in seconds from a seed, no network (README: Instances)."""
    return BenchmarkSpec(
        name="mini",
        version=MINI_VERSION,
        description="Embedded synthetic instance: 12 fields x 8 directions generated from a seed.",
        min_field_papers=0,
        n_fields=12,
        n_dev_seed_fields=3,
        bootstrap_resamples=2000,
        reliability_splits=50,
        seed=20240607,
    )


def arxiv_sample_spec() -> BenchmarkSpec:
    """The real instance built from the shared arXiv sample; see specs/arxiv-sample.json."""
    return BenchmarkSpec.from_json(resources.SPECS_DIR / "arxiv-sample.json")


INSTANCE_NAMES = ("mini", "arxiv-sample", "full")
"""The named instances ``rap build --instance`` builds (full and any other corpus need ``--source``)."""


def spec_for(instance: str) -> BenchmarkSpec:
    """Look up a named instance's spec."""
    if instance == "mini":
        return mini_spec()
    if instance == "arxiv-sample":
        return arxiv_sample_spec()
    if instance == "full":
        return BenchmarkSpec()
    raise InputError(f"unknown instance {instance!r} (expected {', '.join(INSTANCE_NAMES)})")
