"""The workers' HTTP/1.1 transport: an asyncio protocol on the ``httptools`` parser (the one uvicorn
uses) that hands each complete request to :meth:`CiteCastApp.respond` and writes the answer.

Not uvicorn's ASGI cycle: a handler is synchronous and short, and the per-request ASGI machinery
cost about as much CPU as the work itself; here a request is parsed, answered and written within
the ``data_received`` call that completed it. Keep-alive, pipelining, chunked bodies and
``Expect: 100-continue`` work; a body above the limit is never kept (413 and a close), a malformed
request gets 400 and a close.

A close on an error lingers (as in Apache and nginx): the write side is shut and what the client
still sends is dropped until it closes or ``LINGER_S`` passes, because closing with unread bytes
makes the kernel send a reset that can overtake the 413.
"""

from __future__ import annotations

import asyncio
import signal
import socket
from http import HTTPStatus

import httptools

from rap_benchmark.citecast.server import CiteCastApp, HttpError, error_response

_REASONS = {s.value: s.phrase.encode() for s in HTTPStatus}
LINGER_S = 5.0  # the longest a refused connection is drained before it is closed outright


class HttpProtocol(asyncio.Protocol):
    __slots__ = (
        "app",
        "parser",
        "transport",
        "_url",
        "_auth",
        "_chunks",
        "_size",
        "_too_large",
        "_announced",
        "_continue",
    )

    def __init__(self, app: CiteCastApp) -> None:
        self.app = app
        self.parser = httptools.HttpRequestParser(self)
        self.transport: asyncio.Transport | None = None
        self._reset()

    def _reset(self) -> None:
        self._url = b""
        self._auth: bytes | None = None
        self._chunks: list[bytes] = []
        self._size = 0
        self._too_large = False
        self._announced: int | None = None
        self._continue = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        if self.transport is None:  # the answer is written and closing: what the client still sends is dropped
            return
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._write(*error_response(HttpError(400, "protocol upgrades are not supported")), close=True)
        except httptools.HttpParserError as exc:
            self._write(*error_response(HttpError(400, f"malformed HTTP request: {exc}")), close=True)

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None

    def on_message_begin(self) -> None:
        self._reset()

    def on_url(self, url: bytes) -> None:
        self._url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        name = name.lower()
        if name == b"authorization":
            self._auth = value
        elif name == b"content-length" and value.strip().isdigit():
            self._announced = int(value)
            self._too_large = self._announced > self.app.max_body_bytes
        elif name == b"expect" and value.strip().lower() == b"100-continue":
            self._continue = True  # answered in on_headers_complete, once the length is known

    def on_headers_complete(self) -> None:
        if self._too_large:  # answer now: the client need not send the body at all
            self._write(*self.app.too_large(self._announced), close=True)
        elif self._continue and self.transport is not None:
            self.transport.write(b"HTTP/1.1 100 Continue\r\n\r\n")

    def on_body(self, chunk: bytes) -> None:
        if self._too_large:
            return
        self._size += len(chunk)
        if self._size > self.app.max_body_bytes:
            self._too_large = True
            self._chunks = []
            self._write(*self.app.too_large(None), close=True)
            return
        self._chunks.append(chunk)

    def on_message_complete(self) -> None:
        if self._too_large or self.transport is None:
            return
        parsed = httptools.parse_url(self._url)
        method = self.parser.get_method().decode("ascii", "replace")
        path = parsed.path.decode("utf-8", "replace")
        status, body = self.app.respond(method, path, parsed.query or b"", self._auth, b"".join(self._chunks))
        self._write(status, body, close=not self.parser.should_keep_alive())

    def _write(self, status: int, body: bytes, *, close: bool = False) -> None:
        if self.transport is None:
            return
        head = b"HTTP/1.1 %d %s\r\ncontent-type: application/json\r\ncontent-length: %d\r\n%s\r\n" % (
            status,
            _REASONS.get(status, b"Unknown"),
            len(body),
            b"connection: close\r\n" if close else b"",
        )
        self.transport.write(head + body)
        if close:
            self._close(linger=status >= 400)

    def _close(self, *, linger: bool) -> None:
        """Close the connection; with ``linger`` (a refusal, maybe mid-request), shut the write side
        and drain what the client still sends first."""
        transport, self.transport = self.transport, None
        if transport is None:
            return
        if not linger or not transport.can_write_eof():
            transport.close()
            return
        transport.write_eof()  # the client's EOF then closes the transport (asyncio's default), ending the linger
        asyncio.get_running_loop().call_later(LINGER_S, transport.close)


def run(app: CiteCastApp, sock: socket.socket) -> None:
    """Serve ``app`` on the listening ``sock`` until SIGTERM or SIGINT (blocking)."""
    try:
        import uvloop

        loop = uvloop.new_event_loop()
    except ImportError:  # pragma: no cover - uvloop is a dependency except on Windows
        loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    server = loop.run_until_complete(loop.create_server(lambda: HttpProtocol(app), sock=sock, backlog=4096))
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, loop.stop)
    try:
        loop.run_forever()
    finally:
        server.close()
        loop.run_until_complete(server.wait_closed())
        loop.close()
