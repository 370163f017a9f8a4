"""The frozen offline instrument as an artifact: label a new paper exactly as the build did.

A :class:`FrozenInstrument` holds everything the offline instrument fitted, never refitted: the
field-membership rule (:class:`~rap_benchmark.pipeline.fields.FieldModel`), the direction
prototypes, the margin rules and their calibration, and the codebooks. :meth:`FrozenInstrument.label`
turns papers (id, date, title, abstract) into assignment rows with no other input.

On disk (``<instance>/instrument/``, written by ``rap build --freeze-instrument``):

* ``instrument.json``: the object tree (frozen dataclasses by their class name, tuples, dicts,
  numbers, strings), each array replaced by ``{"__array__": i}``, plus ``arrays``: the dtype,
  shape and byte offset of array i in ``arrays.bin``;
* ``arrays.bin``: the arrays' raw little-endian bytes, back to back.

Both files are deterministic, so :func:`instrument_hash` (sha256 over the two) identifies the
instrument. Only classes of ``rap_benchmark`` modules are reconstructed; nothing is unpickled.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from rap_benchmark.core.errors import ArtifactError
from rap_benchmark.core.fsio import atomic_write_bytes, atomic_write_text

FORMAT_VERSION = 1
FOLDER = "instrument"
TREE_FILE = "instrument.json"
ARRAYS_FILE = "arrays.bin"
_ALLOWED_PREFIX = "rap_benchmark."


@dataclass(frozen=True)
class FrozenInstrument:
    """The offline instrument of one build, frozen (see the module docstring)."""

    fields: Any  # FieldModel
    prototypes: Any  # Prototypes | LocalPrototypes
    rules: Any  # AssignRules
    calibration: Any  # Calibration
    codebooks: tuple[dict[str, Any], ...]
    codebook_cutoff: str
    summary: dict[str, Any] = dataclasses.field(default_factory=dict)  # the build's fields summary, for cache hits

    def label(self, papers: pd.DataFrame) -> pd.DataFrame:
        """Assignment rows (``assignments.parquet`` columns) of ``papers``, as the build labelled them."""
        from rap_benchmark.pipeline.instrument.offline import direction_similarities, label_memberships

        papers = papers.reset_index(drop=True)
        m, sims, known = direction_similarities(papers, self.fields.memberships(papers), self.prototypes)
        return label_memberships(m, sims, known, self.calibration, self.rules)


# ------------------------------------------------------------------------------------------------
# encoding: a tree of plain values with arrays set aside
# ------------------------------------------------------------------------------------------------


def _encode(value: Any, arrays: list[np.ndarray]) -> Any:
    if type(value) is str:  # the most common leaf (vocabularies, feature names), and it is itself
        return value
    if type(value) is tuple and all(type(v) is str for v in value):  # a vocabulary: its strings as they are
        return {"__tuple__": list(value)}
    if isinstance(value, np.ndarray):
        arrays.append(np.ascontiguousarray(value))
        return {"__array__": len(arrays) - 1}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        cls = type(value)
        return {
            "__class__": f"{cls.__module__}:{cls.__qualname__}",
            "fields": {f.name: _encode(getattr(value, f.name), arrays) for f in dataclasses.fields(value)},
        }
    if isinstance(value, tuple):
        return {"__tuple__": [_encode(v, arrays) for v in value]}
    if isinstance(value, list):
        return [_encode(v, arrays) for v in value]
    if isinstance(value, dict):
        if not all(isinstance(k, str) for k in value):
            raise TypeError("only str-keyed dicts can be frozen")
        return {"__dict__": {k: _encode(v, arrays) for k, v in sorted(value.items())}}
    if isinstance(value, np.generic):
        return value.item()
    if value is None or isinstance(value, bool | int | float | str):
        return value
    raise TypeError(f"cannot freeze a {type(value).__name__}")


def _decode(node: Any, arrays: list[np.ndarray]) -> Any:
    if isinstance(node, list):
        return [_decode(v, arrays) for v in node]
    if not isinstance(node, dict):
        return node
    if "__array__" in node:
        return arrays[int(node["__array__"])]
    if "__tuple__" in node:
        return tuple(_decode(v, arrays) for v in node["__tuple__"])
    if "__dict__" in node:
        return {k: _decode(v, arrays) for k, v in node["__dict__"].items()}
    if "__class__" in node:
        module, _, name = str(node["__class__"]).partition(":")
        if not module.startswith(_ALLOWED_PREFIX):
            raise ArtifactError(f"frozen instrument names a class outside the package: {node['__class__']}")
        cls = getattr(importlib.import_module(module), name)
        if not dataclasses.is_dataclass(cls):
            raise ArtifactError(f"frozen instrument names a class that is not a record: {node['__class__']}")
        return cls(**{k: _decode(v, arrays) for k, v in node["fields"].items()})
    raise ArtifactError(f"frozen instrument: unknown node {sorted(node)[:3]}")


def save(instrument: FrozenInstrument, root: str | Path) -> Path:
    """Write ``root/instrument/`` (two deterministic files); return the folder."""
    folder = Path(root) / FOLDER
    folder.mkdir(parents=True, exist_ok=True)
    arrays: list[np.ndarray] = []
    tree = _encode(instrument, arrays)
    index, blobs, offset = [], [], 0
    for a in arrays:
        if a.dtype.kind not in "biuf":
            raise TypeError(f"cannot freeze an array of dtype {a.dtype}")
        raw = a.astype(a.dtype.newbyteorder("<"), copy=False).tobytes(order="C")
        index.append({"dtype": a.dtype.newbyteorder("<").str, "shape": list(a.shape), "offset": offset})
        blobs.append(raw)
        offset += len(raw)
    payload = {"format_version": FORMAT_VERSION, "tree": tree, "arrays": index}
    atomic_write_bytes(folder / ARRAYS_FILE, b"".join(blobs))
    atomic_write_text(folder / TREE_FILE, json.dumps(payload, sort_keys=True, separators=(",", ":")) + "\n")
    return folder


def load(root: str | Path) -> FrozenInstrument:
    """Read ``root/instrument/`` back (an :class:`ArtifactError` when absent or damaged)."""
    folder = Path(root) / FOLDER
    if not (folder / TREE_FILE).is_file():
        raise ArtifactError(
            f"{root} holds no frozen instrument ({FOLDER}/{TREE_FILE}); build it with rap build --freeze-instrument"
        )
    payload = json.loads((folder / TREE_FILE).read_text(encoding="utf-8"))
    if payload.get("format_version") != FORMAT_VERSION:
        raise ArtifactError(f"{folder}: frozen instrument format {payload.get('format_version')} is not supported")
    blob = (folder / ARRAYS_FILE).read_bytes()
    arrays = []
    for entry in payload["arrays"]:
        dtype = np.dtype(entry["dtype"])
        count = int(np.prod(entry["shape"], dtype=np.int64))
        arr = np.frombuffer(blob, dtype=dtype, count=count, offset=int(entry["offset"]))
        arrays.append(arr.reshape(entry["shape"]).astype(dtype.newbyteorder("="), copy=True))
    inst = _decode(payload["tree"], arrays)
    if not isinstance(inst, FrozenInstrument):
        raise ArtifactError(f"{folder}: not a frozen instrument")
    return inst


def instrument_hash(root: str | Path) -> str:
    """sha256 over ``instrument.json`` and ``arrays.bin`` (in that order): the instrument's identity."""
    folder = Path(root) / FOLDER
    h = hashlib.sha256()
    for name in (TREE_FILE, ARRAYS_FILE):
        h.update((folder / name).read_bytes())
    return h.hexdigest()
