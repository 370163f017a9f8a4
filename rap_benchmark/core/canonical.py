"""Canonical row serialisation, content hashes of tables, and salted target commitments.

A table's *content hash* does not depend on the file format it travels in: every row becomes a
canonical JSON line (keys sorted, floats written exactly by ``repr``, numpy scalars and arrays
turned into Python numbers and lists, NaN and missing values written as ``null``), and the hash
is the SHA256 of those lines in row order. So a table written to parquet by ``rap hub export`` and
read back by ``datasets.load_dataset`` hashes the same as the artifact it came from.

A *commitment* binds a withheld target to its row without revealing it:
``sha256(salt || canonical_json({"key": row_key, "target": target}))``. The salt is 32 secret
random bytes kept outside the public repos (stored as hex; :func:`read_salt` refuses one shorter
than 16 bytes); the row key inside the hashed payload stops equal
targets (say, two papers both labelled ``D3``) from sharing a hash, so nothing about a
withheld target can be learnt from the public hashes before the salt is revealed.
"""

from __future__ import annotations

import hashlib
import json
import math
import secrets
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from rap_benchmark.core.errors import FileFormatError
from rap_benchmark.core.fsio import atomic_write_text

SALT_BYTES = 32
MIN_SALT_BYTES = 16
"""A salt file holding fewer bytes is refused: a short salt could be found by trying them all."""


def to_plain(value: Any, *, finite: bool = False) -> Any:
    """Turn numpy/pandas values into plain JSON-able Python values (NaN and NA become None).

    An infinity stays, so that canonical JSON refuses it rather than hash a null in its place;
    ``finite=True`` turns it into None too (a summary printed as strict JSON, ``rap ... --json``)."""
    if value is None:
        return None
    if isinstance(value, Mapping):
        return {str(k): to_plain(v, finite=finite) for k, v in value.items()}
    if isinstance(value, np.ndarray | list | tuple):
        return [to_plain(v, finite=finite) for v in value]
    if isinstance(value, bool | np.bool_):
        return bool(value)
    if isinstance(value, int | np.integer):
        return int(value)
    if isinstance(value, float | np.floating):
        f = float(value)
        return None if math.isnan(f) or (finite and math.isinf(f)) else f
    if value is pd.NA or value is pd.NaT:
        return None
    if hasattr(value, "isoformat"):
        return value.isoformat()[:10]
    return value


def canonical_json(value: Any) -> str:
    """Deterministic JSON: sorted keys, no spaces, exact floats, UTF-8 kept as is."""
    return json.dumps(to_plain(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def row_lines(frame: pd.DataFrame, columns: Iterable[str] | None = None) -> list[str]:
    """One canonical JSON line per row, over ``columns`` (default: all, sorted by name)."""
    cols = sorted(frame.columns) if columns is None else list(columns)
    records = frame[cols].to_dict(orient="records") if cols else [{} for _ in range(len(frame))]
    return [canonical_json(r) for r in records]


def content_hash(frame: pd.DataFrame, columns: Iterable[str] | None = None) -> str:
    """SHA256 of the table's canonical JSON lines, in row order."""
    h = hashlib.sha256()
    for line in row_lines(frame, columns):
        h.update(line.encode("utf-8"))
        h.update(b"\n")
    return h.hexdigest()


def new_salt() -> bytes:
    """A fresh secret salt (cryptographic randomness on purpose: a seeded salt could be guessed)."""
    return secrets.token_bytes(SALT_BYTES)


def read_salt(path: str | Path) -> bytes:
    """The salt stored as hex in ``path`` (a hub export's ``salt.hex``, a sealed forecast's
    ``FILE.salt.hex``); a file that is not hex, or holds fewer than 16 bytes, is refused naming it."""
    path = Path(path)
    try:
        salt = bytes.fromhex(path.read_text(encoding="ascii").strip())
    except (UnicodeDecodeError, ValueError) as exc:
        raise FileFormatError(path, f"not a hex salt ({exc})") from None
    if len(salt) < MIN_SALT_BYTES:
        raise FileFormatError(path, f"a salt needs at least {MIN_SALT_BYTES} bytes")
    return salt


def write_salt(path: str | Path, salt: bytes) -> None:
    """Store ``salt`` as hex in ``path`` (atomically), as :func:`read_salt` reads it."""
    atomic_write_text(Path(path), salt.hex() + "\n")


def commitment(salt: bytes, key: str, target: Any) -> str:
    """The public hash that commits to ``target`` for the row ``key``."""
    payload = canonical_json({"key": key, "target": target}).encode("utf-8")
    return hashlib.sha256(salt + payload).hexdigest()


def commitments(salt: bytes, keys: Iterable[str], targets: Iterable[Any]) -> list[str]:
    return [commitment(salt, k, t) for k, t in zip(keys, targets, strict=True)]


def target_values(frame: pd.DataFrame, target_columns: tuple[str, ...] | list[str]) -> list[Any]:
    """The committed value of each row: the single target column's value, or a dict of them."""
    cols = list(target_columns)
    if len(cols) == 1:
        return [to_plain(v) for v in frame[cols[0]]]
    return [to_plain(r) for r in frame[cols].to_dict(orient="records")]
