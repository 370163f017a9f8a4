"""A small WARC/1.0 (ISO 28500) reader, plain or record-gzipped, for what a crawl-dated corpus
needs: 2xx ``response`` records (chunked and gzip/deflate bodies decoded), ``resource`` and
``conversion`` records; other records are skipped. HTML is reduced to text (title kept, scripts
and styles dropped) by the standard library's parser.
"""

from __future__ import annotations

import datetime as dt
import gzip
import io
import re
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path


class WarcError(ValueError):
    """A WARC file is malformed."""


@dataclass(frozen=True)
class WarcRecord:
    headers: dict[str, str]  # header names lower-cased
    block: bytes

    @property
    def type(self) -> str:
        return self.headers.get("warc-type", "")


@dataclass(frozen=True)
class WarcPage:
    """A record reduced to what the corpus keeps."""

    url: str
    date: dt.date
    title: str
    text: str


def _open(path: Path) -> io.BufferedIOBase:
    raw = path.open("rb")
    magic = raw.peek(2)[:2] if hasattr(raw, "peek") else b""
    if magic == b"\x1f\x8b":
        return gzip.GzipFile(fileobj=raw)  # concatenated per-record members are read through
    return raw


def _read_headers(fh: io.BufferedIOBase) -> dict[str, str]:
    headers: dict[str, str] = {}
    last = None
    while True:
        line = fh.readline()
        if not line:
            raise WarcError("truncated record header")
        line = line.rstrip(b"\r\n")
        if not line:
            return headers
        if line[:1] in (b" ", b"\t") and last:  # folded continuation line
            headers[last] += " " + line.strip().decode("utf-8", "replace")
            continue
        name, sep, value = line.decode("utf-8", "replace").partition(":")
        if not sep:
            raise WarcError(f"malformed header line {line!r}")
        last = name.strip().lower()
        headers[last] = value.strip()


def iter_records(path: str | Path) -> Iterator[WarcRecord]:
    """Every record of a WARC file, in file order."""
    with _open(Path(path)) as fh:
        while True:
            line = fh.readline()
            while line in (b"\r\n", b"\n"):
                line = fh.readline()
            if not line:
                return
            if not line.startswith(b"WARC/"):
                raise WarcError(f"expected a WARC version line, got {line[:40]!r}")
            headers = _read_headers(fh)
            try:
                length = int(headers["content-length"])
            except (KeyError, ValueError) as exc:
                raise WarcError("record without a valid Content-Length") from exc
            block = fh.read(length)
            if len(block) != length:
                raise WarcError("truncated record block")
            yield WarcRecord(headers, block)


def _dechunk(body: bytes) -> bytes:
    out = bytearray()
    pos = 0
    while pos < len(body):
        end = body.find(b"\r\n", pos)
        if end < 0:
            break
        size = int(body[pos:end].split(b";")[0].strip() or b"0", 16)
        if size == 0:
            break
        out += body[end + 2 : end + 2 + size]
        pos = end + 2 + size + 2
    return bytes(out)


def _split_http(block: bytes) -> tuple[int, dict[str, str], bytes]:
    head, sep, body = block.partition(b"\r\n\r\n")
    if not sep:
        head, sep, body = block.partition(b"\n\n")
    lines = head.decode("iso-8859-1").splitlines()
    if not lines or not lines[0].startswith("HTTP/"):
        raise WarcError(f"response record without an HTTP status line: {lines[:1]!r}")
    status = int(lines[0].split()[1])
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    if "chunked" in headers.get("transfer-encoding", "").lower():
        body = _dechunk(body)
    enc = headers.get("content-encoding", "").lower()
    if enc in ("gzip", "x-gzip"):
        body = gzip.decompress(body)
    elif enc == "deflate":
        body = zlib.decompress(body)
    return status, headers, body


_CHARSET = re.compile(r"charset=([\w.-]+)", re.I)
_WS = re.compile(r"[ \t\r\f\v]+")
_NL = re.compile(r"\s*\n\s*")


def _decode(body: bytes, content_type: str) -> str:
    m = _CHARSET.search(content_type)
    try:
        return body.decode(m.group(1) if m else "utf-8", "replace")
    except LookupError:
        return body.decode("utf-8", "replace")


class _TextExtractor(HTMLParser):
    _SKIP = frozenset({"script", "style", "noscript", "template", "svg"})
    _BLOCK = frozenset({"p", "div", "br", "li", "tr", "h1", "h2", "h3", "h4", "h5", "h6", "section", "article"})

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.title_parts: list[str] = []
        self._skip = 0
        self._in_title = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._tag(tag, opens=True)

    def handle_endtag(self, tag: str) -> None:
        self._tag(tag, opens=False)

    def _tag(self, tag: str, *, opens: bool) -> None:
        if tag in self._SKIP:
            self._skip = self._skip + 1 if opens else max(0, self._skip - 1)
        elif tag == "title":
            self._in_title = opens
        elif tag in self._BLOCK:
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if self._skip:
            return
        (self.title_parts if self._in_title else self.parts).append(data)


def html_to_text(html: str) -> tuple[str, str]:
    """(title, text) of an HTML page."""
    parser = _TextExtractor()
    parser.feed(html)
    parser.close()
    title = _WS.sub(" ", "".join(parser.title_parts)).strip()
    text = _NL.sub("\n", _WS.sub(" ", "".join(parser.parts))).strip()
    return title, text


def _page(url: str, date: dt.date, body: bytes, content_type: str) -> WarcPage:
    text = _decode(body, content_type)
    if "html" in content_type.lower() or text.lstrip()[:15].lower().startswith(("<!doctype html", "<html")):
        title, text = html_to_text(text)
    else:
        title = ""
        text = text.strip()
    return WarcPage(url, date, title, text)


def iter_pages(path: str | Path) -> Iterator[WarcPage]:
    """The text pages of a WARC file (2xx responses, resources, conversions)."""
    for rec in iter_records(path):
        url = rec.headers.get("warc-target-uri", "").strip("<>")
        if rec.type not in ("response", "resource", "conversion") or not url:
            continue
        date = dt.date.fromisoformat(rec.headers.get("warc-date", "")[:10])
        if rec.type == "response":
            status, http_headers, body = _split_http(rec.block)
            if not 200 <= status < 300:
                continue
            yield _page(url, date, body, http_headers.get("content-type", ""))
        else:
            yield _page(url, date, rec.block, rec.headers.get("content-type", "text/plain"))
