"""The /metrics HTTP server: a background thread on 127.0.0.1, reading the core at scrape time.

Thread safety: the core is fed on the event loop's thread. A scrape (on the HTTP thread) asks that
loop to take the snapshot between two events and waits for it, so it never reads the core
mid-update; with no running loop attached (before or after a run) it reads the core directly,
under a lock, as nothing else is writing then.

Crowds: the listen backlog holds :data:`LISTEN_BACKLOG` connections (the standard library's 5 left a
crowd of scrapers waiting for SYN retransmits, 30 s and more); at most :data:`MAX_WORKERS` requests are
served at once (more wait in the backlog); a client silent or unread for ``client_timeout_s`` is let go;
a client that disconnects mid-response is a debug log line, never a traceback on stderr.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import gzip
import logging
import socket
import sys
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

from tokenwatch.frontends.metrics.exposition import CONTENT_TYPE, render
from tokenwatch.frontends.metrics.families import MetricsView, take_view

if TYPE_CHECKING:
    from tokenwatch.core.rack import RackCore

VIEW_TIMEOUT_S = 5.0
CLIENT_TIMEOUT_S = 10.0  # a client silent (or not reading) this long is let go
LISTEN_BACKLOG = 1024
MAX_WORKERS = 256
_GZIP_MIN_BYTES = 4096
log = logging.getLogger("tokenwatch.frontends.metrics")


class _CrowdServer(ThreadingHTTPServer):
    request_queue_size = LISTEN_BACKLOG
    daemon_threads = True

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler]) -> None:
        super().__init__(address, handler)
        self._workers = threading.BoundedSemaphore(MAX_WORKERS)

    def process_request(self, request: Any, client_address: Any) -> None:
        self._workers.acquire()  # beyond MAX_WORKERS, connections wait in the backlog
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._workers.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._workers.release()

    def handle_error(self, _request: Any, client_address: Any) -> None:
        """Never a traceback on stderr (the headless lines are there): a client gone or too slow is
        routine; anything else is one warning line."""
        exc = sys.exc_info()[1]
        if isinstance(exc, ConnectionError | TimeoutError | socket.timeout):
            log.debug("/metrics client %s disconnected or timed out: %s", client_address[0], exc)
        else:
            log.warning("/metrics request from %s failed: %r", client_address[0], exc)


class MetricsServer:
    """``close()`` stops it. ``port`` is the bound port (useful with port 0 in tests).

    ``core`` is the core, or a function returning the current one (a replay's seek swaps cores).
    """

    def __init__(
        self,
        core: RackCore | Callable[[], RackCore],
        port: int,
        *,
        host: str = "127.0.0.1",
        client_timeout_s: float = CLIENT_TIMEOUT_S,
    ) -> None:
        self._source = core
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock = threading.Lock()
        self.client_timeout_s = client_timeout_s
        self._httpd = _CrowdServer((host, port), _handler_for(self))
        self.port: int = self._httpd.server_address[1]
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, name="tokenwatch-metrics", daemon=True
        )
        self._thread.start()

    @property
    def core(self) -> RackCore:
        return self._source() if callable(self._source) else self._source

    def attach_loop(self, loop: asyncio.AbstractEventLoop) -> None:
        """The loop that feeds the core: scrapes take their snapshot on it from now on."""
        self._loop = loop

    def view(self) -> MetricsView | None:
        loop = self._loop
        if loop is not None and loop.is_running():
            future: concurrent.futures.Future[MetricsView | None] = concurrent.futures.Future()

            def take() -> None:
                try:
                    future.set_result(take_view(self.core))
                except Exception as exc:  # reported to the scraper, never to the loop
                    future.set_exception(exc)

            with contextlib.suppress(RuntimeError):  # loop closed in between: read directly
                loop.call_soon_threadsafe(take)
                return future.result(timeout=VIEW_TIMEOUT_S)
        with self._lock:
            return take_view(self.core)

    def body(self) -> bytes:
        return render(self.view())

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)


def _handler_for(server: MetricsServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        timeout = server.client_timeout_s  # on the socket: reading the request and writing the response

        def do_GET(self) -> None:
            if self.path.split("?")[0] not in ("/metrics", "/"):
                self.send_error(404, "only /metrics here")
                return
            if self.path.startswith("/metrics"):
                try:
                    body, kind = server.body(), CONTENT_TYPE
                except Exception as exc:
                    self.send_error(500, f"tokenwatch could not read the core: {exc}")
                    return
            else:
                body, kind = b'<a href="/metrics">/metrics</a>\n', "text/html; charset=utf-8"
            gzipped = "gzip" in self.headers.get("Accept-Encoding", "") and len(body) > _GZIP_MIN_BYTES
            if gzipped:
                body = gzip.compress(body, compresslevel=1)
            self.send_response(200)
            self.send_header("Content-Type", kind)
            if gzipped:
                self.send_header("Content-Encoding", "gzip")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass  # scrapes every second would drown the headless log

    return Handler
