"""A minimal HTTP/1.0 GET over any byte stream: a local socket or an SSH direct-tcpip channel.

Node-local ``/metrics`` endpoints (vLLM on ``localhost:8000``, dcgm-exporter on ``:9400``) are
fetched through the node's SSH connection, so no port is opened on the node. HTTP/1.0 with
``Connection: close`` keeps the exchange to one request, one body, EOF: no chunking, no pooling.
"""

from __future__ import annotations

import asyncio
import gzip
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import urlsplit

MAX_BODY = 64 * 1024 * 1024

OpenTcp = Callable[[str, int], Awaitable[tuple[Any, Any]]]


class HttpError(Exception):
    """One line: what went wrong fetching the URL."""


def redact(url: str) -> str:
    """``url`` without any ``user[:password]@`` part, for messages and recordings."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return parts._replace(netloc=netloc).geturl()


async def http_get(open_tcp: OpenTcp, url: str, *, timeout_s: float = 10.0) -> str:
    """The body of ``url`` as text (UTF-8). Raises :class:`HttpError` on anything but a 2xx answer."""
    parts = urlsplit(url)
    if parts.scheme != "http" or not parts.hostname:
        raise HttpError(f"{redact(url)}: only http:// URLs with a host are supported")
    port = parts.port or 80
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    host_header = parts.hostname if port == 80 else f"{parts.hostname}:{port}"
    request = (
        f"GET {target} HTTP/1.0\r\nHost: {host_header}\r\nUser-Agent: tokenwatch\r\n"
        "Accept: text/plain;version=0.0.4;q=1,*/*;q=0.1\r\nConnection: close\r\n\r\n"
    ).encode("ascii", "strict")
    try:
        async with asyncio.timeout(timeout_s):
            reader, writer = await open_tcp(parts.hostname, port)
            try:
                writer.write(request)
                raw = await _read_all(reader)
            finally:
                writer.close()
    except TimeoutError:
        raise HttpError(f"{redact(url)}: no answer within {timeout_s:g} s") from None
    except HttpError:
        raise
    except Exception as exc:  # refused, channel open failure, reset: all one line for the engineer
        raise HttpError(f"{redact(url)}: {_why(exc)}") from None
    return _parse_response(raw, redact(url))


async def _read_all(reader: Any) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while True:
        data = await reader.read(65536)
        if not data:
            return b"".join(chunks)
        size += len(data)
        if size > MAX_BODY:
            raise HttpError(f"answer larger than {MAX_BODY // (1024 * 1024)} MiB")
        chunks.append(data)


def _parse_response(raw: bytes, url: str) -> str:
    head, sep, body = raw.partition(b"\r\n\r\n")
    if not sep:
        head, sep, body = raw.partition(b"\n\n")
    if not sep:
        raise HttpError(f"{url}: not an HTTP answer ({len(raw)} bytes)")
    lines = head.decode("latin-1").splitlines()
    status = lines[0].split(None, 2) if lines else []
    if len(status) < 2 or not status[0].startswith("HTTP/") or not status[1].isdigit():
        raise HttpError(f"{url}: not an HTTP answer: {lines[0][:80] if lines else ''!r}")
    code = int(status[1])
    if not 200 <= code < 300:
        reason = status[2] if len(status) > 2 else ""
        raise HttpError(f"{url}: HTTP {code} {reason}".rstrip())
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip().lower()
    if "chunked" in headers.get("transfer-encoding", ""):
        body = _dechunk(body, url)
    if headers.get("content-encoding") == "gzip":
        try:
            body = gzip.decompress(body)
        except (OSError, EOFError) as exc:
            raise HttpError(f"{url}: bad gzip body: {exc}") from None
    return body.decode("utf-8", "replace")


def _dechunk(body: bytes, url: str) -> bytes:
    out: list[bytes] = []
    pos = 0
    while True:
        line_end = body.find(b"\r\n", pos)
        if line_end < 0:
            raise HttpError(f"{url}: truncated chunked body")
        try:
            size = int(body[pos:line_end].split(b";")[0], 16)
        except ValueError:
            raise HttpError(f"{url}: bad chunk size") from None
        if size == 0:
            return b"".join(out)
        out.append(body[line_end + 2 : line_end + 2 + size])
        pos = line_end + 2 + size + 2


def _why(exc: BaseException) -> str:
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    reason = getattr(exc, "reason", None)  # asyncssh.ChannelOpenError
    if isinstance(reason, str) and reason:
        return reason
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc) or type(exc).__name__
