"""Errors a user can fix, as opposed to bugs.

The ``rap`` command line is the one error boundary: it prints any :class:`UserError` as a single
line, ``rap <cmd>: <message>``, and exits 2 (``rap --debug <cmd>`` shows the traceback instead).
Library code raises the most specific subclass and writes a message that names the input and the
problem, e.g. ``InputError("--shard must be i/n with 0 <= i < n, got '3'")``. Anything else that
escapes is a bug and keeps its traceback.

    UserError
    ├── InputError       a bad value: an unknown condition, a malformed shard, an unknown spec key
    ├── FileFormatError  a file the user gave cannot be read or parsed (names the file, and the line)
    ├── ArtifactError    an instance or run folder is missing, incomplete or fails its SHA256SUMS
    ├── ServiceError     a network service cannot be reached or refused the request
    └── StoppedEarly     the work stopped part-way (an endpoint stopped answering); what was
                         finished is kept and the same command resumes (exit 75)

:class:`Interrupted` is Ctrl-C (a ``KeyboardInterrupt``) after the command kept what it had finished.

``InputError`` and ``FileFormatError`` are also ``ValueError`` s, so callers that catch
``ValueError`` keep working.
"""

from __future__ import annotations

from pathlib import Path

MAX_MESSAGE_CHARS = 500
"""The CLI cuts a message to this many characters: an echoed 200 MB model name stays one short line."""


class UserError(Exception):
    """A mistake the user can fix; the CLI prints ``rap <cmd>: <message>`` and exits 2."""


class InputError(UserError, ValueError):
    """A bad argument or value (unknown condition, malformed shard, unknown spec key, inverted dates)."""


class FileFormatError(UserError, ValueError):
    """A file given by the user is unreadable or malformed; the message names the file (and line)."""

    def __init__(self, path: str | Path, problem: str, *, line: int | None = None) -> None:
        where = f"{path}:{line}" if line is not None else str(path)
        super().__init__(f"{where}: {problem}")
        self.path = Path(path)
        self.line = line
        self.problem = problem


class ArtifactError(UserError, RuntimeError):
    """An artifact folder is missing, is missing a file, or a file does not match its recorded hash."""


class ServiceError(UserError, RuntimeError):
    """A network service the command needs cannot be reached or refused the request (no network,
    wrong host, an HTTP error status); nothing was written."""


class StoppedEarly(UserError, RuntimeError):
    """The command stopped before its work was done and kept what it had finished; the same
    command resumes. The CLI prints the message and that command in one line and exits
    :attr:`exit_status`, 75 (``EX_TEMPFAIL`` of sysexits.h: a temporary failure, try again)."""

    exit_status = 75


class Interrupted(KeyboardInterrupt):
    """Ctrl-C, after the command kept what it had finished; the message says what was kept (the
    CLI adds the command that resumes and exits 130)."""


def json_reason(exc: ValueError) -> str:
    """A JSON decoding error's reason, ready for " at <position>": Python's own message for some
    errors already ends in "at" ("Unterminated string starting at"), which gave "at at column"."""
    msg = getattr(exc, "msg", None) or str(exc)
    return msg.removesuffix(" at").removesuffix(":")


def one_line(message: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    """``message`` on one line (line breaks become ``"; "``), cut to ``limit`` characters."""
    parts = [part.strip() for part in str(message).splitlines()]
    text = "; ".join(p for p in parts if p).replace(":;", ":")
    if len(text) > limit:
        text = text[: limit - 20].rstrip() + f" ... ({len(text):,} chars)"
    return text
