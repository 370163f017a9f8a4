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
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import orjson

from rap_benchmark.core.fsio import FolderLock

REQUESTS_FILE = "requests.jsonl"


class RequestStore:
    """An append-only, keyed log of answered requests (see the module docstring)."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self._lock = FolderLock(self.root).acquire()
        self.path = self.root / REQUESTS_FILE
        self.records: dict[str, dict[str, Any]] = {}
        self.repaired_bytes = self._load()
        self.loaded = len(self.records)
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self._pending: list[bytes] = []

    def _load(self) -> int:
        """Read every record; cut a torn last line (no newline, or not JSON); return bytes cut."""
        if not self.path.is_file():
            return 0
        data = self.path.read_bytes()
        pos = 0
        keep = len(data)
        while pos < len(data):
            end = data.find(b"\n", pos)
            if end < 0:
                keep = pos  # a kill during the append: the line never got its newline
                break
            try:
                rec = orjson.loads(data[pos:end])
            except orjson.JSONDecodeError:
                if data.find(b"\n", end + 1) >= 0:
                    raise ValueError(f"{self.path}: line at byte {pos} is not JSON (not a torn tail)") from None
                keep = pos
                break
            self.records.setdefault(rec["key"], rec)
            pos = end + 1
        if keep != len(data):
            with self.path.open("rb+") as fh:
                fh.truncate(keep)
                fh.flush()
                os.fsync(fh.fileno())
        return len(data) - keep

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
