"""A fleet watch against a server that fails keeps asking, with a growing pause, and starts again at its
own cadence once answered; a server that never answers is said at once (the history is not sought from
a server that could not list the fleet, which cost a second timeout); and an answer is bounded in size
and time, alone and together with the answers read beside it: a hostile server costs a warning, never
the watch's memory."""

from __future__ import annotations

import asyncio
import contextlib
import http.server
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import PATIENCE_S, run_tokenwatch
from tokenwatch.base.clock import ManualClock
from tokenwatch.base.events import Event, Notice
from tokenwatch.inputs.prometheus import api as prometheus_api
from tokenwatch.inputs.prometheus.api import PromApiError, PrometheusApi
from tokenwatch.inputs.prometheus.fleet import BACKOFF_CAP_S, FleetSettings, PrometheusFleetCollector

EMPTY = b'{"status":"success","data":{"resultType":"vector","result":[]}}'


class FailsFirst(http.server.BaseHTTPRequestHandler):
    """503 for the first ``failing`` requests, then an empty vector (an answer)."""

    failing = 0
    seen: list[str] = []  # noqa: RUF012 - one list per server class, made below
    lock = threading.Lock()

    def do_GET(self) -> None:
        with self.lock:
            type(self).seen.append(self.path)
            fail = len(self.seen) <= self.failing
        body = b"overloaded" if fail else EMPTY
        self.send_response(503 if fail else 200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            self.wfile.write(body)

    def log_message(self, *_args: object) -> None:
        pass


@contextlib.contextmanager
def serving(handler: type[http.server.BaseHTTPRequestHandler]) -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


class Recording(PrometheusFleetCollector):
    """The instants its rounds were asked at."""

    instants: list[float]

    async def poll(self, api: PrometheusApi, instant: float) -> list[Event]:
        self.instants.append(instant)
        return await super().poll(api, instant)


def test_failing_rounds_back_off_and_an_answer_restores_the_cadence() -> None:
    """Five rounds fail (every query a 503), then the server answers. After the n-th failed round in a
    row the next one comes 2^(n-1) intervals later (at most a minute); after an answer, one interval."""
    queries_per_round = 13  # the rack figures (no fleet was listed: no node queries)
    handler: type[FailsFirst] = type("Handler", (FailsFirst,), {"failing": 5 * queries_per_round, "seen": []})
    with serving(handler) as url:
        collector = Recording(
            FleetSettings(url=url, interval_s=1.0), now=lambda: 0.0, clock=ManualClock(), polls=8
        )
        collector.instants = []
        said: list[Event] = []

        async def emit(event: Event) -> None:
            said.append(event)

        asyncio.run(collector.run(emit))
    assert len(handler.seen) == 8 * queries_per_round
    gaps = [b - a for a, b in zip(collector.instants, collector.instants[1:], strict=False)]
    failed_before = [1, 2, 3, 4, 5, 0, 0]  # failed rounds in a row before each gap
    assert gaps == [min(2 ** (n - 1), BACKOFF_CAP_S + 1) if n else 1.0 for n in failed_before]
    messages = [e.message for e in said if isinstance(e, Notice)]
    assert any("HTTP 503: overloaded" in m for m in messages)
    assert messages[-1] == "prometheus fleet: every query answers again"


def test_the_pause_is_capped_at_a_minute() -> None:
    collector = PrometheusFleetCollector(
        FleetSettings(url="http://127.0.0.1:9"), now=lambda: 0.0, clock=ManualClock()
    )
    collector._last_instant = collector.clock.wall() - 5.0
    collector._failed_rounds = 40
    wall = collector.clock.wall()
    assert collector._next_instant() - wall == pytest.approx(BACKOFF_CAP_S, abs=collector.settings.interval_s)


class Silent:
    """A TCP server that accepts every connection and never answers; remembers what was asked."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.requests: list[bytes] = []
        self.held: list[socket.socket] = []
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self) -> None:
        with contextlib.suppress(OSError):
            while True:
                conn, _ = self.sock.accept()
                self.held.append(conn)
                conn.settimeout(PATIENCE_S)
                with contextlib.suppress(OSError):
                    self.requests.append(conn.recv(4096))

    def close(self) -> None:
        self.sock.close()
        for conn in self.held:
            conn.close()


def test_a_server_that_never_answers_is_said_after_one_timeout(tmp_path: Path) -> None:
    """The listing's timeout is said, and the run's start is not sought (no range query) from a server
    that could not list the fleet: that second timeout delayed the first line past ten seconds."""
    silent = Silent()
    try:
        config = tmp_path / "fleet.yaml"
        config.write_text(
            f"run: {{name: blind}}\nfleet: {{url: '{silent.url}', interval: 1s, lookback: 10m}}\n"
        )
        result = run_tokenwatch("watch", str(config), "--headless", "--stop-after", "2s")
    finally:
        silent.close()
    assert result.returncode == 1
    lines = result.stderr.splitlines()
    assert lines[0] == (
        "tokenwatch: warning: prometheus fleet: cannot list the fleet's nodes: "
        f"no answer from {silent.url} within 5 s"
    )
    asked = b"".join(silent.requests)
    assert b"/api/v1/query?" in asked
    assert b"/api/v1/query_range" not in asked


class Endless(http.server.BaseHTTPRequestHandler):
    """A 200 whose body never ends (no length, chunks of zeros as fast as they go)."""

    def do_GET(self) -> None:
        self.send_response(200)
        self.end_headers()
        chunk = b"0" * 65536
        with contextlib.suppress(OSError):
            while True:
                self.wfile.write(chunk)

    def log_message(self, *_args: object) -> None:
        pass


class Trickle(http.server.BaseHTTPRequestHandler):
    """A 200 whose body comes a byte at a time, each a little after the last."""

    def do_GET(self) -> None:
        self.send_response(200)
        self.end_headers()
        with contextlib.suppress(OSError):
            for _ in range(10_000):
                self.wfile.write(b" ")
                self.wfile.flush()
                threading.Event().wait(0.2)  # the trickle's pace

    def log_message(self, *_args: object) -> None:
        pass


async def ask(url: str, timeout_s: float) -> str:
    async with PrometheusApi(url, timeout_s) as api:
        with pytest.raises(PromApiError) as caught:
            await api.query("up")
    return str(caught.value)


def test_an_endless_answer_is_refused_at_the_size_bound() -> None:
    with serving(Endless) as url:
        said = asyncio.run(ask(url, PATIENCE_S))
    assert said == f"answer larger than {prometheus_api.MAX_RESPONSE_BYTES // 2**20} MiB: refusing it"


def test_a_trickling_answer_is_cut_at_the_timeout() -> None:
    with serving(Trickle) as url:
        said = asyncio.run(ask(url, 1.0))
    assert said == f"no answer from {url} within 1 s"


def test_answers_read_together_are_bounded_together(monkeypatch: pytest.MonkeyPatch) -> None:
    """Eight endless answers at once, each under the bound for one answer when the bound for all is
    reached: at least one is refused for the total, and each refused answer lets its bytes go."""
    monkeypatch.setattr(prometheus_api, "MAX_RESPONSE_BYTES", 4 * 2**20)
    monkeypatch.setattr(prometheus_api, "MAX_INFLIGHT_BYTES", 8 * 2**20)
    held: list[int] = []

    async def together(url: str) -> list[str]:
        async with PrometheusApi(url, PATIENCE_S) as api:
            original = api._get

            async def watched(path: str, params: dict[str, str] | str) -> tuple[int, bytes]:
                try:
                    return await original(path, params)
                finally:
                    held.append(api._inflight_bytes)

            api._get = watched  # type: ignore[method-assign]
            answers, failed = await api.query_all({f"q{i}": "up" for i in range(8)})
        assert answers == {}
        return [str(e) for e in failed.values()]

    with serving(Endless) as url:
        said = asyncio.run(together(url))
    assert len(said) == 8
    assert any(s.startswith("answers being read at once exceed 8 MiB") for s in said), said
    assert all("8 MiB" in s or "4 MiB" in s for s in said), said
    assert held[-1] == 0  # every refused answer's bytes let go
