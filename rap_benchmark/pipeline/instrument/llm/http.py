"""A lean HTTP/1.1 keep-alive client for one OpenAI-compatible endpoint (asyncio streams).

Why not httpx: measured side by side against the same loopback server, ``httpx.AsyncClient``
sustained about 130 requests/s on the shared 2-core machine where a plain asyncio stream client
sustained about 2,000; the instrument sends hundreds of thousands of small JSON requests, so the
client must cost well under a millisecond each. This module does only what those requests need:
``POST <base>/chat/completions`` with a JSON body, keep-alive connection reuse, TLS for https,
``Content-Length`` or chunked responses, a per-request timeout.
"""

from __future__ import annotations

import asyncio
import ssl
from urllib.parse import urlsplit

from rap_benchmark.core.errors import InputError


class TransportError(Exception):
    """The request got no complete HTTP response (refused, reset, timed out, torn)."""


class Endpoint:
    """One base URL (``http[s]://host[:port]/v1``) and its idle keep-alive connections."""

    def __init__(self, base_url: str, *, timeout_s: float, api_key: str | None = None) -> None:
        parts = urlsplit(base_url.strip())
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise InputError(f"--base-url: not an http(s) URL: {base_url!r}")
        self.base_url = base_url.strip().rstrip("/")
        self.host = parts.hostname
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        self.ssl = ssl.create_default_context() if parts.scheme == "https" else None
        self.path = (parts.path.rstrip("/") or "") + "/chat/completions"
        self.timeout_s = timeout_s
        host_header = parts.netloc.rsplit("@", 1)[-1]
        auth = f"Authorization: Bearer {api_key}\r\n" if api_key else ""
        self._head = (
            f"POST {self.path} HTTP/1.1\r\nHost: {host_header}\r\nContent-Type: application/json\r\n"
            f"Accept: application/json\r\n{auth}Content-Length: "
        ).encode("latin-1")
        self._idle: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []

    async def post(self, body: bytes) -> tuple[int, bytes]:
        """(status, response body); TransportError when no complete response came back.

        A kept-alive connection that the server closed while idle (EOF or reset before any byte
        of a response) is replaced by a fresh one once, without counting as a failure.
        """
        while self._idle:
            reader, writer = self._idle.pop()
            try:
                return await self._exchange(reader, writer, body)
            except _StaleConnection:
                continue
        reader, writer = await self._connect()
        try:
            return await self._exchange(reader, writer, body)
        except _StaleConnection as exc:
            raise TransportError(f"{self.base_url}: connection closed before a response") from exc

    async def _connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        try:
            async with asyncio.timeout(self.timeout_s):
                return await asyncio.open_connection(self.host, self.port, ssl=self.ssl, limit=1 << 20)
        except (OSError, TimeoutError) as exc:
            raise TransportError(f"cannot connect to {self.base_url}: {type(exc).__name__}: {exc}") from None

    async def _exchange(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, body: bytes
    ) -> tuple[int, bytes]:
        try:
            async with asyncio.timeout(self.timeout_s):
                writer.write(b"%s%d\r\n\r\n%s" % (self._head, len(body), body))
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except asyncio.IncompleteReadError as exc:
                    if not exc.partial:
                        raise _StaleConnection from None
                    raise
                except (ConnectionResetError, BrokenPipeError):
                    raise _StaleConnection from None
                status, keep_alive, data = await _read_response(head, reader)
        except _StaleConnection:
            writer.close()
            raise
        except (OSError, TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError) as exc:
            writer.close()
            raise TransportError(f"{self.base_url}: {type(exc).__name__}: {exc}") from None
        except BaseException:
            writer.close()
            raise
        if keep_alive:
            self._idle.append((reader, writer))
        else:
            writer.close()
        return status, data

    def close(self) -> None:
        while self._idle:
            _, writer = self._idle.pop()
            writer.close()


class _StaleConnection(Exception):
    """A kept-alive connection the server had closed: nothing was answered on it."""


async def _read_response(head: bytes, reader: asyncio.StreamReader) -> tuple[int, bool, bytes]:
    lines = head.split(b"\r\n")
    status_line = lines[0].split(b" ", 2)
    if len(status_line) < 2 or not status_line[0].startswith(b"HTTP/1."):
        raise ValueError(f"not an HTTP/1.x response: {lines[0][:80]!r}")
    status = int(status_line[1])
    length = None
    chunked = False
    keep_alive = status_line[0] == b"HTTP/1.1"
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        name = name.strip().lower()
        if name == b"content-length":
            length = int(value)
        elif name == b"transfer-encoding":
            chunked = b"chunked" in value.lower()
        elif name == b"connection":
            v = value.strip().lower()
            keep_alive = v == b"keep-alive" if not keep_alive else v != b"close"
    if chunked:
        parts = []
        while True:
            size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
            if size == 0:
                await reader.readuntil(b"\r\n")  # no trailers expected
                break
            parts.append(await reader.readexactly(size))
            await reader.readexactly(2)
        return status, keep_alive, b"".join(parts)
    if length is not None:
        return status, keep_alive, await reader.readexactly(length)
    return status, False, await reader.read()
