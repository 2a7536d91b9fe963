"""The /metrics HTTP server: a background thread on 127.0.0.1, reading the core at scrape time.

Thread safety: the core is fed on the event loop's thread. A scrape (on the HTTP thread) asks that
loop to take the snapshot between two events and waits for it, so it never reads the core
mid-update; with no running loop attached (before or after a run) it reads the core directly,
under a lock, as nothing else is writing then.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import gzip
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING

from tokenwatch.exporter.exposition import CONTENT_TYPE, render
from tokenwatch.exporter.families import MetricsView, take_view

if TYPE_CHECKING:
    from tokenwatch.core.rack import RackCore

VIEW_TIMEOUT_S = 5.0
_GZIP_MIN_BYTES = 4096


class MetricsServer:
    """``close()`` stops it. ``port`` is the bound port (useful with port 0 in tests).

    ``core`` is the core, or a function returning the current one (a replay's seek swaps cores).
    """

    def __init__(
        self, core: RackCore | Callable[[], RackCore], port: int, *, host: str = "127.0.0.1"
    ) -> None:
        self._source = core
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer((host, port), _handler_for(self))
        self._httpd.daemon_threads = True
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
