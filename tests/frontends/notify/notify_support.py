"""A local HTTP receiver that records what it is sent and misbehaves on request (500s, hanging, closed),
and the real Alertmanager (Debian's prometheus-alertmanager) routing to such a receiver."""

from __future__ import annotations

import contextlib
import http.server
import shutil
import subprocess
import threading
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from tests.conftest import PATIENCE_S, refusing_port, start_listening, stop_process, wait_until
from tokenwatch.frontends.notify.notification import Notification

ALERTMANAGER = shutil.which("alertmanager") or shutil.which("prometheus-alertmanager")


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: Any


@dataclass
class Receiver:
    """``mode``: ``ok`` (200), ``fail`` (500 to every request), ``fail_first`` (500 to the first
    ``failures`` requests, then 200), ``hang`` (holds each request until ``release`` is set)."""

    mode: str = "ok"
    failures: int = 0
    requests: list[Received] = field(default_factory=list)
    attempts: int = 0
    release: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)
    port: int = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def bodies(self, path: str | None = None) -> list[Any]:
        with self.lock:
            return [r.body for r in self.requests if path is None or r.path == path]


def _handler(receiver: Receiver) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            with receiver.lock:
                receiver.attempts += 1
                attempt = receiver.attempts
            if receiver.mode == "hang":
                receiver.release.wait(PATIENCE_S * 2)
            failing = receiver.mode == "fail" or (
                receiver.mode == "fail_first" and attempt <= receiver.failures
            )
            if failing:
                self.send_response(500)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            with receiver.lock:
                receiver.requests.append(Received(self.path, dict(self.headers.items()), orjson.loads(raw)))
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: object) -> None:
            pass

    return Handler


@contextlib.contextmanager
def receiving(mode: str = "ok", failures: int = 0) -> Iterator[Receiver]:
    receiver = Receiver(mode=mode, failures=failures)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _handler(receiver))
    server.daemon_threads = True
    receiver.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        receiver.release.set()
        server.shutdown()
        server.server_close()


def closed_url() -> str:
    """An address that refuses every connection: a receiver that is down."""
    return f"http://127.0.0.1:{refusing_port()}"


@dataclass
class Alertmanager:
    url: str
    proc: subprocess.Popen[bytes]

    def alerts(self, active_only: bool = True) -> list[dict[str, Any]]:
        query = "" if not active_only else "?active=true&silenced=false&inhibited=false"
        with urllib.request.urlopen(f"{self.url}/api/v2/alerts{query}", timeout=10) as answer:
            return list(orjson.loads(answer.read()))


@contextlib.contextmanager
def alertmanager(tmp: Path, hook_url: str) -> Iterator[Alertmanager]:
    """The real Alertmanager on 127.0.0.1 (clustering off), sending every group at once to ``hook_url``
    (resolved ones too)."""
    assert ALERTMANAGER is not None
    config = tmp / "alertmanager.yml"
    config.write_text(
        "route:\n  receiver: hook\n  group_by: [alertname, node]\n  group_wait: 0s\n  group_interval: 1s\n"
        "  repeat_interval: 1h\n"
        f"receivers:\n  - name: hook\n    webhook_configs:\n      - url: {hook_url}/am\n"
        "        send_resolved: true\n"
    )

    def launch(port: int) -> subprocess.Popen[bytes]:
        assert ALERTMANAGER is not None
        return subprocess.Popen(
            [
                ALERTMANAGER,
                f"--config.file={config}",
                f"--storage.path={tmp / 'am-data'}",
                f"--web.listen-address=127.0.0.1:{port}",
                "--cluster.listen-address=",
                "--log.level=warn",
            ],
            stdout=subprocess.DEVNULL,
            stderr=open(tmp / "alertmanager.log", "wb"),
        )

    proc, port = start_listening(launch, "alertmanager", tmp / "alertmanager.log")
    am = Alertmanager(f"http://127.0.0.1:{port}", proc)
    try:

        def ready() -> bool:
            if proc.poll() is not None:
                raise RuntimeError(f"alertmanager exited: {(tmp / 'alertmanager.log').read_text()[-400:]}")
            try:
                with urllib.request.urlopen(f"{am.url}/-/ready", timeout=5) as answer:
                    return bool(answer.status == 200)
            except OSError:
                return False

        wait_until(ready, "alertmanager ready")
        yield am
    finally:
        stop_process(proc)


def stale_edge(node: str, t: float, firing: bool = True) -> Notification:
    """A node's stale condition starting (``firing``) or clearing, as the notifier hands it on."""
    return Notification(
        key=f"r/{node}/stale",
        kind="node-down",
        alertname="TokenwatchNodeStale",
        rule="stale",
        run="run",
        rack="r",
        node=node,
        severity="warning",
        message=f"{node} stale: no data for 5 s" if firing else f"{node} reporting again",
        reason="",
        t=t,
        firing=firing,
        instant=False,
    )
