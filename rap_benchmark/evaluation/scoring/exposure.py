"""The paper's temporal exposure masks, from a model registry.

A registry lists models with the provider-reported knowledge cutoff or, failing that, the
documented release date of the frozen checkpoint (a conservative upper bound on parametric
exposure), and the public source of that date. For origin T and window length w:

- Forecast-Strict: T >= exposure date (the whole future window [T, T+w) follows it);
- Joint-Strict: T - w >= exposure date (the State window [T-w, T) follows it as well).

``basis`` says which date was used (``knowledge_cutoff`` or ``release_date``). Dates are
``YYYY-MM-DD`` or month precision ``YYYY-MM``; a month-precision date means "data through that
month", so its exposure date is the first day of the *next* month (e.g. a December 2023 cutoff
makes 2024-01-01 the earliest strict origin).

Registry file (JSON, or YAML when PyYAML is installed): a list of entries, or ``{"models": [...]}``
with optional ``_comment``. Entry keys: ``model`` (required), ``aliases`` (list), at least one of
``knowledge_cutoff`` / ``release_date``, ``source`` (required, where the date is documented) and
optional ``note``. Unknown keys are rejected.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from rap_benchmark.core import resources
from rap_benchmark.core.dates import add_months, parse_date
from rap_benchmark.core.errors import FileFormatError

DEFAULT_REGISTRY = resources.DATA_DIR / "models.json"
"""The example registry shipped with the package (package data ``data/*``)."""

_ENTRY_KEYS = {"model", "aliases", "knowledge_cutoff", "release_date", "source", "note"}


class UnknownModelError(KeyError):
    """A model asked for is not in the registry."""

    def __str__(self) -> str:  # KeyError quotes its argument; keep the message readable
        return str(self.args[0]) if self.args else ""


@dataclass(frozen=True, slots=True)
class ModelExposure:
    """One registry entry. ``exposure_date`` is the effective date the masks compare against."""

    model: str
    aliases: tuple[str, ...]
    knowledge_cutoff: str | None
    release_date: str | None
    source: str
    note: str | None = None

    @property
    def basis(self) -> str:
        return "knowledge_cutoff" if self.knowledge_cutoff else "release_date"

    @property
    def exposure_date(self) -> dt.date:
        value = self.knowledge_cutoff or self.release_date
        assert value is not None
        return effective_date(value)


def effective_date(value: str) -> dt.date:
    """``YYYY-MM-DD`` -> that day; ``YYYY-MM`` -> the first day of the following month."""
    text = str(value).strip()
    if len(text) == 7 and text[4] == "-":
        try:
            month_start = dt.date(int(text[:4]), int(text[5:7]), 1)
        except ValueError as exc:
            raise ValueError(f"not a YYYY-MM month: {value!r}") from exc
        return add_months(month_start, 1)
    if len(text) != 10:
        raise ValueError(f"expected YYYY-MM-DD or YYYY-MM, got {value!r}")
    return parse_date(text)


def _entry(raw: Mapping[str, Any], where: str) -> ModelExposure:
    unknown = sorted(set(raw) - _ENTRY_KEYS)
    if unknown:
        raise ValueError(f"{where}: unknown keys {', '.join(unknown)}")
    model = raw.get("model")
    if not model or not isinstance(model, str):
        raise ValueError(f"{where}: 'model' is required")
    cutoff, release = raw.get("knowledge_cutoff"), raw.get("release_date")
    if not cutoff and not release:
        raise ValueError(f"{where} ({model}): needs knowledge_cutoff or release_date")
    for value in (cutoff, release):
        if value:
            effective_date(str(value))
    source = raw.get("source")
    if not source:
        raise ValueError(f"{where} ({model}): 'source' is required (where the date is documented)")
    aliases = raw.get("aliases") or ()
    if isinstance(aliases, str):
        raise ValueError(f"{where} ({model}): 'aliases' must be a list")
    return ModelExposure(
        model=model,
        aliases=tuple(str(a) for a in aliases),
        knowledge_cutoff=str(cutoff) if cutoff else None,
        release_date=str(release) if release else None,
        source=str(source),
        note=raw.get("note"),
    )


@dataclass(frozen=True)
class ModelRegistry:
    """Registry entries looked up by model name or alias (exact match)."""

    entries: tuple[ModelExposure, ...]

    def __post_init__(self) -> None:
        seen: dict[str, str] = {}
        for entry in self.entries:
            for name in (entry.model, *entry.aliases):
                if name in seen:
                    raise ValueError(f"registry name {name!r} is used by {seen[name]} and {entry.model}")
                seen[name] = entry.model

    def get(self, model: str) -> ModelExposure:
        for entry in self.entries:
            if model == entry.model or model in entry.aliases:
                return entry
        known = ", ".join(sorted(e.model for e in self.entries))
        raise UnknownModelError(
            f"model {model!r} is not in the exposure registry; add an entry with its knowledge_cutoff "
            f"or release_date and a source (known: {known})"
        )

    def __contains__(self, model: object) -> bool:
        return any(model == e.model or model in e.aliases for e in self.entries)

    @classmethod
    def from_records(cls, records: Iterable[Mapping[str, Any]]) -> ModelRegistry:
        return cls(tuple(_entry(r, f"registry entry {i}") for i, r in enumerate(records)))


def load_registry(path: str | Path | None = None) -> ModelRegistry:
    """Load a registry file; ``None`` loads the example shipped as ``rap_benchmark/data/models.json``.

    A file that cannot be parsed, or whose entries are malformed, raises FileFormatError naming it."""
    source = DEFAULT_REGISTRY if path is None else Path(path)
    try:
        return _parse_registry(source.read_text(encoding="utf-8"), source.suffix.lower())
    except (ValueError, TypeError, KeyError) as exc:  # JSON/YAML syntax (both ValueErrors) and content
        raise FileFormatError(source, f"not a valid model registry ({exc})") from exc


def _parse_registry(text: str, suffix: str) -> ModelRegistry:
    if suffix in {".yaml", ".yml"}:
        import yaml

        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise ValueError(str(exc)) from exc
    else:
        data = json.loads(text)
    if isinstance(data, Mapping):
        extra = sorted(set(data) - {"models", "_comment"})
        if extra:
            raise ValueError(f"registry: unknown top-level keys {', '.join(extra)}")
        data = data.get("models", [])
    if not isinstance(data, list):
        raise ValueError("registry: expected a list of model entries")
    return ModelRegistry.from_records(data)


def exposure_masks(
    registry: ModelRegistry | str | Path | Sequence[Mapping[str, Any]] | None,
    models: Iterable[str],
    origins: Iterable[str | dt.date],
    window_months: int = 6,
) -> pd.DataFrame:
    """One row per (model, origin): ``forecast_strict``, ``joint_strict``, ``exposure_date``, ``basis``.

    ``registry`` is a ``ModelRegistry``, a registry file path, a list of entry mappings, or None
    for the shipped example. An unknown model raises ``UnknownModelError`` (never guessed).
    """
    if isinstance(registry, ModelRegistry):
        reg = registry
    elif registry is None or isinstance(registry, str | Path):
        reg = load_registry(registry)
    else:
        reg = ModelRegistry.from_records(registry)
    origin_dates = [parse_date(o) for o in origins]
    rows = []
    for model in models:
        entry = reg.get(model)
        cutoff = entry.exposure_date
        for origin in origin_dates:
            rows.append(
                {
                    "model": model,
                    "origin": origin.isoformat(),
                    "forecast_strict": origin >= cutoff,
                    "joint_strict": add_months(origin, -window_months) >= cutoff,
                    "exposure_date": cutoff.isoformat(),
                    "basis": entry.basis,
                }
            )
    columns = ["model", "origin", "forecast_strict", "joint_strict", "exposure_date", "basis"]
    return pd.DataFrame(rows, columns=columns)


def strict_masks(
    registry: ModelRegistry, models: Iterable[str], origins: Iterable[str | dt.date], window_months: int
) -> tuple[dict[tuple[str, str], bool], dict[tuple[str, str], bool]]:
    """The (Forecast-Strict, Joint-Strict) lookups of ``models``, the masks the exposure table takes."""
    masks = exposure_masks(registry, models, origins, window_months)
    return strict_lookup(masks, "forecast_strict"), strict_lookup(masks, "joint_strict")


def strict_lookup(masks: pd.DataFrame, column: str = "forecast_strict") -> dict[tuple[str, str], bool]:
    """``{(model, origin): flag}`` from an ``exposure_masks`` table (``forecast_strict`` or ``joint_strict``)."""
    if column not in ("forecast_strict", "joint_strict"):
        raise ValueError(f"column must be forecast_strict or joint_strict, got {column!r}")
    return {(str(m), str(o)): bool(v) for m, o, v in zip(masks["model"], masks["origin"], masks[column], strict=True)}
