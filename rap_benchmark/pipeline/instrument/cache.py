"""A disk cache of the fitted offline instrument, keyed by everything it was fitted from.

Fitting fields and codebooks is the heavy part of a real build, and it reads only the papers
dated before ``spec.eligibility_end``. Two builds whose inputs agree there fit the same
instrument (a rebuild with a new ``--out``, or a living-RAP parent cut at ``eligibility_end``).

Entries are :class:`~.frozen.FrozenInstrument` folders named by :func:`instrument_key`: sha256
over this cache's format, the source of every module under ``rap_benchmark/pipeline`` and
``rap_benchmark/core`` (a code change is a new key), the spec less the fields that cannot change
the fit, and the eligible papers. A hit only labels the papers; the build's artifacts are
byte-identical either way.

Where: ``$RAP_CACHE_DIR/instrument/`` if set, else ``$XDG_CACHE_HOME/rap_benchmark/instrument/``
(``~/.cache`` when unset). ``RAP_CACHE_DIR=off`` (or ``rap build --no-cache``) turns it off.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path

import numpy as np
import pandas as pd

from rap_benchmark.core.errors import ArtifactError
from rap_benchmark.core.fsio import temp_name
from rap_benchmark.core.resources import PACKAGE_DIR
from rap_benchmark.core.spec import BenchmarkSpec

__all__ = ["CACHE_ENV", "cache_dir", "fitting", "instrument_key", "lookup", "store"]

CACHE_ENV = "RAP_CACHE_DIR"
FORMAT = "rap-instrument-cache-1"
_SPEC_FIELDS_IGNORED = ("name", "description", "origins", "date_end")
_PAPER_COLUMNS = ("arxiv_id", "date", "title", "abstract", "categories")


def cache_dir() -> Path | None:
    """The instrument cache folder, or None when caching is off."""
    root = os.environ.get(CACHE_ENV)
    if root is not None:
        return None if root.strip().lower() in ("", "off", "0", "none") else Path(root) / "instrument"
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "rap_benchmark" / "instrument"


@lru_cache(maxsize=1)
def _code_digest() -> str:
    h = hashlib.sha256()
    for sub in ("pipeline", "core"):
        for path in sorted((PACKAGE_DIR / sub).rglob("*.py")):
            h.update(path.relative_to(PACKAGE_DIR).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def _papers_digest(papers: pd.DataFrame, spec: BenchmarkSpec) -> str:
    dates = papers["date"].astype(str)
    eligible = papers.loc[dates < spec.eligibility_end]
    h = hashlib.sha256(str(len(eligible)).encode())
    for col in _PAPER_COLUMNS:
        values = eligible[col] if col in eligible else pd.Series([""] * len(eligible))
        text = "\x1e".join(
            " ".join(map(str, v)) if isinstance(v, list | tuple | np.ndarray) else str(v) for v in values.tolist()
        )
        h.update(col.encode() + b"\0" + text.encode("utf-8", "surrogatepass") + b"\0")
    return h.hexdigest()


def instrument_key(papers: pd.DataFrame, spec: BenchmarkSpec) -> str:
    """The cache key of the instrument a build of ``papers`` under ``spec`` fits (module docstring)."""
    fitted_spec = {k: v for k, v in spec.to_dict().items() if k not in _SPEC_FIELDS_IGNORED}
    head = json.dumps({"format": FORMAT, "code": _code_digest(), "spec": fitted_spec}, sort_keys=True, default=str)
    return hashlib.sha256(head.encode() + b"\0" + _papers_digest(papers, spec).encode()).hexdigest()


@contextlib.contextmanager
def fitting(key: str | None) -> Iterator[None]:
    """Hold the key's lock while looking up, fitting and storing: a second build of the same
    inputs (another process, e.g. another test worker) waits, then finds the stored instrument
    instead of fitting it again. A no-op when the cache is off or its folder is unwritable."""
    root = cache_dir()
    if key is None or root is None:
        yield
        return
    try:
        root.mkdir(parents=True, exist_ok=True)
        fd = os.open(root / f".{key}.lock", os.O_RDWR | os.O_CREAT, 0o644)
    except OSError:
        yield
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def lookup(key: str):
    """The cached :class:`~.frozen.FrozenInstrument` for ``key``, or None (absent, off, or damaged)."""
    from rap_benchmark.pipeline.instrument.frozen import load

    root = cache_dir()
    if root is None or not (root / key).is_dir():
        return None
    try:
        return load(root / key)
    except (ArtifactError, OSError, ValueError, TypeError, KeyError):
        shutil.rmtree(root / key, ignore_errors=True)  # a damaged entry is refitted and rewritten
        return None


def store(key: str, instrument) -> Path | None:
    """Write ``instrument`` under ``key`` (atomically: a half-written entry is never visible)."""
    from rap_benchmark.pipeline.instrument.frozen import save

    root = cache_dir()
    if root is None:
        return None
    final = root / key
    if final.is_dir():
        return final
    tmp = temp_name(final, "building")
    try:
        root.mkdir(parents=True, exist_ok=True)
        save(instrument, tmp)
        os.replace(tmp, final)
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)
        if final.is_dir():
            return final  # another process stored the same key first
        return None  # an unwritable cache only costs the next build its time
    return final
