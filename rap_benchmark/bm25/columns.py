"""Arrow column helpers and the display-text cache of a search engine.

The engine keeps the text it shows agents (titles, abstracts cut to ``spec.abstract_chars``,
dates) as compact Arrow arrays. ``.cache/search_display_v1.arrow`` stores exactly those columns
(Arrow IPC, uncompressed, keyed by the corpus digest and the cut length), so rebuilding a
served instance never decompresses the full-text parquet again.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rap_benchmark.core.fsio import atomic_path


def strings(column: Any) -> Any:
    """An Arrow string column as one contiguous array (``large_string`` past 2 GiB of text)."""
    import pyarrow as pa

    if not (pa.types.is_string(column.type) or pa.types.is_large_string(column.type)):
        column = column.cast(pa.string())
    if column.nbytes >= 2**31 - 1 and pa.types.is_string(column.type):
        column = column.cast(pa.large_string())
    return column.combine_chunks() if hasattr(column, "combine_chunks") else column


def date_strings(column: Any) -> Any:
    """``YYYY-MM-DD`` strings from a string (possibly longer ISO), date or timestamp column."""
    import pyarrow as pa
    import pyarrow.compute as pc

    array = column.combine_chunks() if hasattr(column, "combine_chunks") else column
    if pa.types.is_string(array.type) or pa.types.is_large_string(array.type):
        return pc.utf8_slice_codeunits(array.cast(pa.string()), 0, 10)
    return array.cast(pa.date32()).cast(pa.string())


DISPLAY_CACHE = "search_display_v1.arrow"


def display_key(corpus_digest: str, abstract_chars: int) -> str:
    return json.dumps({"corpus": corpus_digest, "abstract_chars": abstract_chars, "format": 1}, sort_keys=True)


def read_display(path: Path, key: str) -> Any:
    """The cached display table (arxiv_id, date, title, cut abstract), or None if absent/stale."""
    import pyarrow as pa

    try:
        with pa.OSFile(str(path), "rb") as fh:
            reader = pa.ipc.open_file(fh)
            if (reader.schema.metadata or {}).get(b"key") != key.encode("utf-8"):
                return None
            return reader.read_all()
    except (OSError, pa.ArrowInvalid):
        return None


def write_display(path: Path, key: str, table: Any) -> None:
    import pyarrow as pa

    table = table.replace_schema_metadata({"key": key})
    try:
        with atomic_path(path) as tmp, pa.OSFile(str(tmp), "wb") as fh, pa.ipc.new_file(fh, table.schema) as writer:
            writer.write_table(table)
    except OSError:
        pass  # a read-only folder still serves; it just reads the parquet next time


def release_free_heap() -> None:
    """Hand freed memory back to the OS after a build (Arrow's pool and glibc keep it otherwise, which
    inflates a serving process's RSS by the build's transient peak). No-op elsewhere."""
    import ctypes
    import ctypes.util

    import pyarrow as pa

    pa.default_memory_pool().release_unused()
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.malloc_trim(0)
    except (OSError, AttributeError):
        pass
