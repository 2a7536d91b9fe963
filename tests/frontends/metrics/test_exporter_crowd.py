"""The /metrics exporter holds a crowd.

200 scrapers at once are all answered (the listen backlog was 5: connections beyond it waited for SYN
retransmits, 94 of 5,236 requests timed out at 30 s); a client that stalls mid-request is let go; a
client that disconnects mid-response is a debug line, not a traceback on the headless output. The
socket timeouts below only detect a request left hanging; nothing is timed.
"""

from __future__ import annotations

import http.client
import logging
import socket
import struct
import threading
from collections.abc import Iterator

import pytest

from tests.conftest import PATIENCE_S
from tests.frontends.tui.apps import OFFLINE
from tokenwatch.core import RackCore
from tokenwatch.frontends.metrics import MetricsServer
from tokenwatch.runs.from_core import ingest_recording

SCRAPERS = 200
SCRAPES_EACH = 5
HANG_S = PATIENCE_S  # a request unanswered this long is hanging, whatever the machine's load


@pytest.fixture(scope="module")
def core() -> RackCore:
    core, _ = ingest_recording(OFFLINE, until_s=600)
    return core


@pytest.fixture
def server(core: RackCore) -> Iterator[MetricsServer]:
    server = MetricsServer(core, 0, client_timeout_s=1.0)
    try:
        yield server
    finally:
        server.close()


def scrape(port: int) -> bytes:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=HANG_S)
    try:
        conn.request("GET", "/metrics")
        response = conn.getresponse()
        body = response.read()
        assert response.status == 200
        return body
    finally:
        conn.close()


def test_two_hundred_concurrent_scrapers_are_all_answered(server: MetricsServer) -> None:
    expected = scrape(server.port)
    assert b"tokenwatch_" in expected
    failures: list[str] = []
    answered = [0]
    lock = threading.Lock()
    start = threading.Barrier(SCRAPERS)

    def scraper() -> None:
        start.wait()  # all at once
        for _ in range(SCRAPES_EACH):
            try:
                body = scrape(server.port)
            except Exception as exc:  # every kind of failure is what is counted
                with lock:
                    failures.append(repr(exc))
                continue
            with lock:
                answered[0] += body == expected

    threads = [threading.Thread(target=scraper) for _ in range(SCRAPERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    assert answered[0] == SCRAPERS * SCRAPES_EACH


def test_a_stalled_client_is_let_go(server: MetricsServer) -> None:
    with socket.create_connection(("127.0.0.1", server.port), timeout=HANG_S) as sock:
        sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")  # and never the blank line that ends it
        received = b""
        while chunk := sock.recv(4096):  # the server closes the connection (timeout -> b"" here)
            received += chunk
    assert b"200 OK" not in received
    assert scrape(server.port)  # and it still serves the others


def test_a_client_that_disconnects_mid_response_is_no_traceback(
    server: MetricsServer, capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="tokenwatch.frontends.metrics")
    for _ in range(20):
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1024)  # the response cannot all be sent at once
        sock.settimeout(HANG_S)
        sock.connect(("127.0.0.1", server.port))
        sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        sock.recv(100)  # the response has begun
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.close()  # reset: the server's next write fails
    assert scrape(server.port)  # the server goes on; by now every broken response has been handled
    err = capfd.readouterr().err
    assert "Traceback" not in err
    assert "Exception occurred" not in err
    assert any("disconnected" in r.getMessage() for r in caplog.records if r.levelno == logging.DEBUG)
