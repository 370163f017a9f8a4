"""Crash-safe file writing and the folder lock: the one place the package touches the disk to write.

Every file the package writes goes through :func:`atomic_path` (or its shorthands
:func:`atomic_write_bytes`, :func:`atomic_write_text`, :func:`atomic_open`): the content goes to a
temporary file in the destination's folder (``.NAME.tmp-PID``), is flushed and fsync'd, then
renamed over ``NAME``, and the folder is fsync'd. A kill at any point leaves the old file or the
new one, never a torn or empty one. Temporary names carry the writer's PID so that
:func:`remove_stale` can clear what a dead writer left without touching a live writer's files.

:class:`FolderLock` gives one writer at a time a folder (a run store, say). It holds an OS lock
(``flock``) on ``FOLDER/.lock``, whose content names the holder's PID; the kernel drops the lock
when its holder dies, so a lock left by a killed process is simply taken over.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

from rap_benchmark.core.errors import UserError

LOCK_FILE = ".lock"
_STALE = re.compile(r"^\.(?P<name>.+)\.(?P<kind>tmp|building|old)-(?P<pid>\d+)$")


def _fsync(path: str | Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_dir(path: str | Path) -> None:
    """fsync a folder so that a rename inside it survives a power cut (no-op where unsupported)."""
    with contextlib.suppress(OSError):
        _fsync(path)


def temp_name(path: Path, kind: str = "tmp") -> Path:
    """``FOLDER/.NAME.KIND-PID``: a sibling that :func:`remove_stale` recognises."""
    return path.parent / f".{path.name}.{kind}-{os.getpid()}"


@contextlib.contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path to write ``path``'s new content to; on success it replaces ``path``.

    For writers that want a path (pyarrow, pandas ``to_csv``, matplotlib, numpy). The temporary
    file is fsync'd, renamed over ``path`` and the folder fsync'd; on an exception it is removed
    and ``path`` is left as it was.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_name(path)
    try:
        yield tmp
        _fsync(tmp)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


@contextlib.contextmanager
def atomic_open(path: str | Path, mode: str = "w", *, encoding: str | None = "utf-8", newline: str | None = "\n"):
    """``open()`` for writing, atomically: the file appears complete at ``path`` when the block ends."""
    if "b" in mode:
        encoding = newline = None
    with atomic_path(path) as tmp, open(tmp, mode, encoding=encoding, newline=newline) as fh:  # noqa: PTH123
        yield fh


def atomic_write_bytes(path: str | Path, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically; return ``path``."""
    with atomic_open(path, "wb") as fh:
        fh.write(data)
    return Path(path)


def atomic_write_text(path: str | Path, text: str, *, encoding: str = "utf-8") -> Path:
    """Write ``text`` to ``path`` atomically (no newline translation); return ``path``."""
    return atomic_write_bytes(path, text.encode(encoding))


def pid_alive(pid: int) -> bool:
    """True when a process with this PID exists (on this machine)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, under another user
        return True
    return True


def check_replaceable(out: str | Path, markers: tuple[str, ...], *, kind: str) -> None:
    """Refuse (FileExistsError) an ``out`` that is a file, or a non-empty folder holding none of
    ``markers``; ``kind`` names what the markers mark (``"RAP instance"``, ``"CiteCast instance"``)
    so that the refusal says what the folder is not."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise FileExistsError(f"{out} is a file, not a {kind} folder; choose another output folder")
    if out.is_dir() and any(out.iterdir()) and not any((out / m).is_file() for m in markers):
        raise FileExistsError(
            f"{out} is a non-empty folder that is not a {kind} (it holds none of {', '.join(markers)}); "
            "refusing to replace it: choose another output folder"
        )


def building_folder(out: str | Path, markers: tuple[str, ...], *, kind: str) -> Path:
    """A fresh ``.OUT.building-PID`` folder beside ``out`` to build a replacement of ``out`` in.

    ``out`` may be absent, empty, or a folder holding one of ``markers`` (files that mark a build
    of this ``kind``); anything else is refused rather than replaced. What killed builds of ``out``
    left behind is removed first. Finish with :func:`swap_into_place`."""
    out = Path(out)
    check_replaceable(out, markers, kind=kind)
    return _fresh_building(out)


def _fresh_building(out: Path) -> Path:
    """An empty ``.OUT.building-PID`` beside ``out``, after removing what killed builds left."""
    out.parent.mkdir(parents=True, exist_ok=True)
    remove_stale(out.parent, name=out.name)
    tmp = temp_name(out, "building")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    return tmp


def swap_into_place(tmp: Path, out: Path) -> None:
    """Replace ``out`` by the finished build ``tmp`` with two renames (the previous ``out`` stays
    whole until the new one is complete), then drop the previous one."""
    old = temp_name(out, "old")
    if out.exists():
        os.rename(out, old)
    os.rename(tmp, out)
    fsync_dir(out.parent)
    if old.exists():
        shutil.rmtree(old)


@contextlib.contextmanager
def replacing(out: str | Path, markers: tuple[str, ...], *, kind: str) -> Iterator[Path]:
    """Build a replacement of ``out``: yield a fresh :func:`building_folder` to write into; when
    the block ends normally it replaces ``out`` (:func:`swap_into_place`), and on any exception it
    is removed and ``out`` is left as it was."""
    out = Path(out)
    tmp = building_folder(out, markers, kind=kind)
    try:
        yield tmp
        swap_into_place(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def build_once(out: str | Path, marker: str, build: Callable[[Path], object]) -> Path:
    """``out`` once it holds ``marker`` (a finished build); on first use ``build(folder)`` fills a
    new folder inside a temporary sibling, which then takes the place of ``out``. When another
    process puts its build into place first, that one is kept and this one is discarded."""
    out = Path(out)
    if (out / marker).is_file():
        return out
    tmp = _fresh_building(out)
    try:
        build(tmp / "build")
        if not (out / marker).is_file():
            shutil.rmtree(out, ignore_errors=True)  # an unfinished folder, without its marker
            try:
                os.replace(tmp / "build", out)
            except OSError:  # another process renamed its build into place first: keep that one
                if not (out / marker).is_file():
                    raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def remove_stale(folder: str | Path, *, name: str | None = None, recursive: bool = False) -> list[Path]:
    """Remove ``.NAME.{tmp,building,old}-PID`` files and folders whose PID is dead; return them.

    Those are what a killed writer of this module (or a killed build) left behind; a live
    process's temporaries are left alone. ``name`` limits the sweep to the temporaries of one
    destination ``NAME``. A ``.NAME.old-PID`` whose ``NAME`` is missing is the previous build of a
    writer killed between :func:`swap_into_place`'s two renames: it is put back as ``NAME``, not removed.
    """
    folder = Path(folder)
    if not folder.is_dir():
        return []
    candidates = folder.rglob(".*") if recursive else folder.glob(".*")
    removed = []
    for entry in sorted(candidates):
        m = _STALE.match(entry.name)
        if not m or (name is not None and m.group("name") != name) or pid_alive(int(m.group("pid"))):
            continue
        if m.group("kind") == "old" and not (entry.parent / m.group("name")).exists():
            os.rename(entry, entry.parent / m.group("name"))
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)
        removed.append(entry)
    return removed


class FolderBusy(UserError, RuntimeError):
    """Another live process holds the folder's lock."""

    def __init__(self, folder: Path, holder: str) -> None:
        self.folder = folder
        self.holder = holder
        super().__init__(
            f"{folder} is in use by {holder} (lock {folder / LOCK_FILE}); "
            "wait for it to finish or choose another folder"
        )


class FolderLock:
    """An exclusive, crash-released lock on a folder; ``FOLDER/.lock`` names the holder's PID.

    Use as a context manager. A second process on the same folder gets :class:`FolderBusy` at
    once; a lock whose holder died is taken over. Within one process the lock is re-entrant
    (nested holders share it; the last release frees it).
    """

    _held: dict[str, list[int]] = {}  # real folder path -> [fd, depth], this process's locks

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)
        self.path = self.folder / LOCK_FILE
        self._key: str | None = None

    def acquire(self) -> FolderLock:
        self.folder.mkdir(parents=True, exist_ok=True)
        key = os.path.realpath(self.folder)
        if key in FolderLock._held:
            FolderLock._held[key][1] += 1
        else:
            FolderLock._held[key] = [self._lock_fd(), 1]
        self._key = key
        return self

    def _lock_fd(self) -> int:
        import fcntl

        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = self._holder(fd)
                os.close(fd)
                raise FolderBusy(self.folder, holder) from None
            try:
                same = os.path.samestat(os.fstat(fd), os.stat(self.path))
            except FileNotFoundError:
                same = False
            if same:
                break
            os.close(fd)  # the previous holder removed the file between our open and our lock: retry
        os.ftruncate(fd, 0)
        os.write(fd, f"pid {os.getpid()}\n".encode())
        os.fsync(fd)
        return fd

    @staticmethod
    def _holder(fd: int) -> str:
        try:
            text = os.pread(fd, 200, 0).decode("utf-8", "replace").strip()
        except OSError:
            text = ""
        m = re.fullmatch(r"pid (\d+)", text)
        return f"process {m.group(1)}" if m else "another process"

    def release(self) -> None:
        if self._key is None:
            return
        entry = FolderLock._held[self._key]
        entry[1] -= 1
        if entry[1] == 0:
            del FolderLock._held[self._key]
            self.path.unlink(missing_ok=True)  # unlink first, while holding it: see the inode check above
            os.close(entry[0])
        self._key = None

    def __enter__(self) -> FolderLock:
        return self.acquire()

    def __exit__(self, *exc: Any) -> None:
        self.release()


def open_append_repaired(path: str | Path) -> IO[str]:
    """Open a JSON-lines log for appending after cutting a torn last line (a crash mid-append).

    Everything after the last ``\\n`` is an incomplete line: it is truncated away so that the next
    line starts on a line of its own.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fh = open(path, "a+b")  # noqa: SIM115, PTH123 - returned to the caller, text-wrapped below
    size = fh.seek(0, os.SEEK_END)
    if size:
        keep = _end_of_last_line(fh, size)
        if keep != size:
            fh.truncate(keep)
            fh.flush()
            os.fsync(fh.fileno())
    import io

    return io.TextIOWrapper(fh, encoding="utf-8", newline="\n", write_through=True)


def _end_of_last_line(fh: IO[bytes], size: int) -> int:
    """The offset just after the last ``\\n`` of the file (0 when there is none)."""
    pos = size
    block = 1 << 16
    while pos > 0:
        start = max(0, pos - block)
        fh.seek(start)
        chunk = fh.read(pos - start)
        i = chunk.rfind(b"\n")
        if i >= 0:
            return start + i + 1
        pos = start
    return 0


_SAFE = re.compile(r"[^A-Za-z0-9._-]+")


def slug(value: str) -> str:
    """A filesystem-safe, collision-free name: readable part plus a short hash when changed."""
    safe = _SAFE.sub("_", value).strip("._") or "_"
    if safe == value:
        return safe
    return f"{safe}-{hashlib.sha256(value.encode()).hexdigest()[:8]}"
