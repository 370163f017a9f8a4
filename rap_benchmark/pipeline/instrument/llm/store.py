"""The keyed request store: every answered request of an LLM build, appended once, never re-sent.

Layout of a store folder::

    requests.jsonl   one line per answered request: {"key", "stage", "model", "content",
                     "prompt_tokens", "completion_tokens", "response_model", "finish_reason",
                     "reasoning"}; content is the answer with any <think> block cut out,
                     reasoning the model's reasoning (vLLM's reasoning_content or the cut
                     block): kept here for review, never written into an artifact
    .lock            held by the one process using the store (core.fsio.FolderLock)
    review.md        the maintainers' review of the codebook construction (written by the build)
    summary.json     requests, tokens and cost per stage (written by the build)

The key is the sha256 of the canonical request body, whatever the endpoint, order or process.
Guarantees, as ``rap run``'s run store: SIGKILL-safe group commits (one ``write`` and ``fsync``;
a torn last line is cut on open); an answer that reached the file is never asked again; invalid
outputs are answers too (the retry quotes them, so it is another request), so a unit's history
replays exactly on resume.

One reader, :func:`read_requests`, serves the build (which then cuts the torn tail) and the dry
run (which only reads): both count the same answers and refuse the same damage.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import orjson

from rap_benchmark.core.errors import FileFormatError
from rap_benchmark.core.fsio import FolderLock

REQUESTS_FILE = "requests.jsonl"
_FIELDS: dict[str, type | tuple[type, ...]] = {
    "key": str,
    "stage": str,
    "model": str,
    "content": (str, type(None)),
    "prompt_tokens": int,
    "completion_tokens": int,
}  # what every stored answer holds (response_model, finish_reason and reasoning may be absent)

_FIX = "; fix or delete that line, or move the store aside (its answers would be asked again)"


def read_requests(path: Path) -> tuple[dict[str, dict[str, Any]], int]:
    """Every answer in a ``requests.jsonl`` by key (the first line of a key wins) and how many
    bytes at its end are a torn last line; a missing file holds nothing.

    A writer appends whole lines with one ``write``, so only the last line can be torn by a kill:
    one without its newline, or one that is not JSON, is not an answer (the build cuts it and asks
    again). Any other line that is not JSON, or is JSON but not an answer (not an object, a key
    missing or misspelt, a token count that is not a count), means the file was changed or damaged
    after it was written: :class:`FileFormatError` naming the line, before anything is sent or
    counted, rather than asking (and paying for) a request whose answer is there but unreadable.
    """
    if not path.is_file():
        return {}, 0
    return parse_requests(path.read_bytes(), path)


def parse_requests(data: bytes, path: Path) -> tuple[dict[str, dict[str, Any]], int]:
    """:func:`read_requests` of ``data`` (the bytes of ``path``, which errors name)."""
    records: dict[str, dict[str, Any]] = {}
    pos, line = 0, 0
    while pos < len(data):
        end = data.find(b"\n", pos)
        if end < 0:
            break  # a kill during the append: the line never got its newline
        line += 1
        try:
            rec = orjson.loads(data[pos:end])
        except orjson.JSONDecodeError:
            if end + 1 == len(data):
                break
            raise FileFormatError(
                path, f"not JSON, and not the last line (which alone a kill can tear){_FIX}", line=line
            ) from None
        problem = _not_an_answer(rec)
        if problem:
            raise FileFormatError(path, f"not a stored answer: {problem}{_FIX}", line=line)
        records.setdefault(rec["key"], rec)
        pos = end + 1
    return records, len(data) - pos


def _not_an_answer(rec: Any) -> str | None:
    """Why a JSON value is not a stored answer, or None."""
    if not isinstance(rec, dict):
        return f"a JSON {type(rec).__name__}, not an object"
    for name, kind in _FIELDS.items():
        if name not in rec:
            return f"no {name!r}"
        value = rec[name]
        if not isinstance(value, kind) or isinstance(value, bool) or (isinstance(value, int) and value < 0):
            return f"{name!r} is {value!r}"
    return None


def read_recorded(path: Path) -> dict[str, dict[str, Any]]:
    """The answers of a recorded store shipped as ``<name>.jsonl.xz`` (xz-compressed
    ``requests.jsonl``, no torn line allowed): the replies an instance is rebuilt from offline."""
    import lzma

    try:
        data = lzma.decompress(path.read_bytes())
    except lzma.LZMAError as exc:
        raise FileFormatError(path, f"not an xz-compressed store of replies ({exc})") from None
    records, torn = parse_requests(data, path)
    if torn:
        raise FileFormatError(path, "the last line is cut short: the recorded replies are damaged")
    return records


def write_recorded(records: list[dict[str, Any]], path: Path) -> None:
    """Write ``records`` (sorted by key) as a recorded store :func:`read_recorded` reads;
    deterministic bytes (xz preset 9, no timestamps)."""
    import lzma

    from rap_benchmark.core.fsio import atomic_write_bytes

    data = b"".join(
        orjson.dumps(r, option=orjson.OPT_SORT_KEYS) + b"\n" for r in sorted(records, key=lambda r: r["key"])
    )
    atomic_write_bytes(path, lzma.compress(data, preset=9 | lzma.PRESET_EXTREME))


class RequestStore:
    """An append-only, keyed log of answered requests (see the module docstring)."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self._lock = FolderLock(self.root).acquire()
        self.path = self.root / REQUESTS_FILE
        try:
            self.records, self.repaired_bytes = self._load()
        except BaseException:
            self._lock.release()
            raise
        self.loaded = len(self.records)
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self._pending: list[bytes] = []

    def _load(self) -> tuple[dict[str, dict[str, Any]], int]:
        """Read every answer (:func:`read_requests`) and cut a torn last line; (answers, bytes cut)."""
        records, torn = read_requests(self.path)
        if torn:
            with self.path.open("rb+") as fh:
                fh.truncate(self.path.stat().st_size - torn)
                fh.flush()
                os.fsync(fh.fileno())
        return records, torn

    def put(self, record: dict[str, Any]) -> None:
        """Remember an answer now; it reaches the disk at the next :meth:`flush`."""
        if record["key"] in self.records:
            return
        self.records[record["key"]] = record
        self._pending.append(orjson.dumps(record) + b"\n")

    def flush(self) -> None:
        """Append every pending answer with one write and fsync it (group commit)."""
        if not self._pending:
            return
        data = b"".join(self._pending)
        self._pending.clear()
        view = memoryview(data)
        while view:
            n = os.write(self._fd, view)
            view = view[n:]
        os.fsync(self._fd)

    def close(self) -> None:
        if self._fd < 0:
            return
        try:
            self.flush()
        finally:
            os.close(self._fd)
            self._fd = -1
            self._lock.release()

    def __enter__(self) -> RequestStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
