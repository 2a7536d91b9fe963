"""The HTTP/1.0 fetch used for node-local /metrics (against real local servers), and the backoff."""

from __future__ import annotations

import asyncio
import random
import socket
from collections.abc import Awaitable, Callable

import pytest

from tokenwatch.inputs.live.backoff import Backoff
from tokenwatch.inputs.live.http_fetch import HttpError, http_get, redact


async def serve(
    answer: bytes | Callable[[bytes], Awaitable[bytes]],
) -> tuple[asyncio.Server, int, list[bytes]]:
    requests: list[bytes] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        request = await reader.readuntil(b"\r\n\r\n")
        requests.append(request)
        writer.write(answer if isinstance(answer, bytes) else await answer(request))
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1], requests


async def open_tcp(host: str, port: int):
    return await asyncio.open_connection(host, port)


@pytest.mark.parametrize(
    ("answer", "body"),
    [
        (b"HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nvllm:x 1.0\n", "vllm:x 1.0\n"),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n",
            "hello world",
        ),
        (b"HTTP/1.1 200 OK\r\n\r\n\xff caf\xc3\xa9\n", "\ufffd café\n"),
    ],
)
async def test_fetches_bodies(answer: bytes, body: str) -> None:
    server, port, requests = await serve(answer)
    async with server:
        text = await http_get(open_tcp, f"http://127.0.0.1:{port}/metrics?x=1", timeout_s=5)
    assert text == body
    assert requests[0].startswith(b"GET /metrics?x=1 HTTP/1.0\r\n")
    assert f"Host: 127.0.0.1:{port}".encode() in requests[0]


async def test_gzip_body() -> None:
    import gzip

    payload = gzip.compress(b"a 1\n")
    server, port, _ = await serve(b"HTTP/1.0 200 OK\r\nContent-Encoding: gzip\r\n\r\n" + payload)
    async with server:
        assert await http_get(open_tcp, f"http://127.0.0.1:{port}/", timeout_s=5) == "a 1\n"


@pytest.mark.parametrize(
    ("answer", "problem"),
    [
        (b"HTTP/1.0 404 Not Found\r\n\r\nnope", "HTTP 404 Not Found"),
        (b"SSH-2.0-OpenSSH_9.2\r\n", "not an HTTP answer"),
        (b"HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "bad chunk size"),
    ],
)
async def test_bad_answers_are_one_line(answer: bytes, problem: str) -> None:
    server, port, _ = await serve(answer)
    async with server:
        with pytest.raises(HttpError, match=problem) as info:
            await http_get(open_tcp, f"http://127.0.0.1:{port}/m", timeout_s=5)
    assert "\n" not in str(info.value)


async def test_refused_and_silent_servers() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(HttpError, match="connection refused"):
        await http_get(open_tcp, f"http://127.0.0.1:{port}/m", timeout_s=5)

    release = asyncio.Event()

    async def never(_: bytes) -> bytes:
        await release.wait()
        return b""

    server, port, _ = await serve(never)
    async with server:
        with pytest.raises(HttpError, match=r"no answer within 0\.3 s"):
            await http_get(open_tcp, f"http://127.0.0.1:{port}/m", timeout_s=0.3)
        release.set()  # let the handler finish and close its socket before the loop goes
        await asyncio.sleep(0.05)  # a teardown courtesy to the handler; nothing checked depends on it


def test_redact_drops_credentials() -> None:
    assert redact("http://u:secret@host:8000/metrics") == "http://host:8000/metrics"
    assert redact("http://host/metrics") == "http://host/metrics"


def test_backoff_grows_with_jitter_to_the_cap_and_resets() -> None:
    backoff = Backoff(1.0, 30.0, rng=random.Random(7))
    delays = [backoff.next_delay() for _ in range(10)]
    ceilings = [min(30.0, 2.0**i) for i in range(10)]
    assert all(c / 2 <= d <= c for d, c in zip(delays, ceilings, strict=True))
    assert max(delays) <= 30.0
    assert len({round(d, 6) for d in delays[6:]}) > 1  # jitter: capped delays still differ
    backoff.reset()
    assert backoff.next_delay() <= 1.0
    with pytest.raises(ValueError, match="base_s"):
        Backoff(0)
