"""The /metrics HTTP server: a background thread on 127.0.0.1, serving the body of the last snapshot.

Thread safety: the core is fed on the event loop's thread. While a loop feeds it, the loop itself takes
a view of the core between two events (at most once per ``publish_every_s``, only when the core moved
and a scrape came since the last view) and a render thread turns it into the body scrapes serve
(:mod:`.published`): a scrape never waits behind a verdict tick or a dashboard frame; it serves what
was rendered after the scrape before it (at most a scrape interval old, plus one publish interval).
With no running loop attached (before or after a run) a scrape reads the core directly, under a lock,
as nothing else is writing then.

Crowds: the listen backlog holds :data:`LISTEN_BACKLOG` connections (the standard library's 5 left a
crowd of scrapers waiting for SYN retransmits, 30 s and more); at most :data:`MAX_WORKERS` requests are
served at once (more wait in the backlog); a client silent or unread for ``client_timeout_s`` is let go;
a client that disconnects mid-response is a debug log line, never a traceback on stderr.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import sys
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

from tokenwatch.frontends.metrics.exposition import CONTENT_TYPE
from tokenwatch.frontends.metrics.families import take_view
from tokenwatch.frontends.metrics.published import BodyRenderer, PublishedBody, core_key, render_view

if TYPE_CHECKING:
    from tokenwatch.core.rack import RackCore

VIEW_TIMEOUT_S = 10.0  # the first scrape after attaching waits this long for the first body
PUBLISH_EVERY_S = 0.5  # a 1-s scrape reads a body at most this old (plus one render)
# A scrape's thread needs the GIL a dozen times (the request, the headers, each send) while the loop's
# thread keeps it busy (a 64-rack sim behind its pace): Python hands it over every 5 ms by default.
GIL_SWITCH_S = 0.001
CLIENT_TIMEOUT_S = 10.0  # a client silent (or not reading) this long is let go
LISTEN_BACKLOG = 1024
MAX_WORKERS = 256
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
    ``publish_every_s``: how often (wall time) the loop hands a view of a moved core to the renderer.
    """

    def __init__(
        self,
        core: RackCore | Callable[[], RackCore],
        port: int,
        *,
        host: str = "127.0.0.1",
        client_timeout_s: float = CLIENT_TIMEOUT_S,
        publish_every_s: float = PUBLISH_EVERY_S,
    ) -> None:
        self._source = core
        self._loop: asyncio.AbstractEventLoop | None = None
        self._attachments = 0  # each attach starts one publishing chain on its loop; older ones stop
        self._lock = threading.Lock()
        self._direct: PublishedBody | None = None  # read without a loop, kept while the core stays put
        self._renderer = BodyRenderer()
        self._scraped = False  # a scrape came since the last view was taken: the next one is wanted
        self._closed = False
        self.publish_every_s = publish_every_s
        self.client_timeout_s = client_timeout_s
        self._httpd = _CrowdServer((host, port), _handler_for(self))
        self.port: int = self._httpd.server_address[1]
        self._switch_before = sys.getswitchinterval()
        sys.setswitchinterval(min(self._switch_before, GIL_SWITCH_S))
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, name="tokenwatch-metrics", daemon=True
        )
        self._thread.start()

    @property
    def core(self) -> RackCore:
        return self._source() if callable(self._source) else self._source

    def attach_loop(self, loop: asyncio.AbstractEventLoop) -> None:
        """The loop that feeds the core: views are taken on it from now on, the first at once."""
        self._loop = loop
        self._attachments += 1
        attachment = self._attachments
        with contextlib.suppress(RuntimeError):  # a closed loop: scrapes read the core directly
            loop.call_soon_threadsafe(self._publish_every, loop, attachment)

    def _publish_every(self, loop: asyncio.AbstractEventLoop, attachment: int) -> None:
        """On the loop: publish, then again in ``publish_every_s``, while this is the attachment."""
        if self._closed or attachment != self._attachments:
            return
        self._publish()
        loop.call_later(self.publish_every_s, self._publish_every, loop, attachment)

    def _publish(self) -> None:
        """On the loop, between two events: a view of the core to the renderer, if the core moved since
        the body it has, a scrape came since (a body nobody reads is not rendered: at 64 racks a Server
        body is ~14 MB of text) and the renderer is free (a view taken while it renders is skipped)."""
        renderer = self._renderer
        try:
            core = self.core
            key = core_key(core)
            latest = renderer.latest
            if (latest is None or (latest.key != key and self._scraped)) and not renderer.busy:
                self._scraped = False
                renderer.submit(key, take_view(core))
        except Exception as exc:  # the scrape reports it; the loop goes on
            renderer.fail(exc)

    @property
    def last_published(self) -> PublishedBody | None:
        """The last body the loop's views were rendered into (None before the first), without waiting."""
        return self._renderer.latest

    def published(self) -> PublishedBody:
        """What a scrape serves: the last body rendered, without waiting on the loop (only the very
        first scrape after attaching waits for the first body)."""
        loop = self._loop
        if loop is not None and loop.is_running() and not self._closed:
            self._scraped = True  # the loop renders the next body for the next scrape
            latest = self._renderer.latest
            if latest is not None:
                return latest
            with contextlib.suppress(RuntimeError):  # loop closed in between: read directly below
                loop.call_soon_threadsafe(self._publish)
                latest = self._renderer.wait_for(lambda body: body is not None, VIEW_TIMEOUT_S)
                if latest is not None:
                    return latest
                raise self._renderer.error or TimeoutError(
                    f"no snapshot of the core within {VIEW_TIMEOUT_S:g} s"
                )
        with self._lock:  # no loop feeds the core: nothing writes it, read it here
            core = self.core
            key = core_key(core)
            if self._direct is None or self._direct.key != key:
                self._direct = PublishedBody(key, render_view(take_view(core)))
            return self._direct

    def body(self) -> bytes:
        return self.published().body

    def wants_gzip(self) -> None:
        """A scraper asked for gzip: the render thread gzips each body as it renders it."""
        self._renderer.wants_gzip = True

    def close(self) -> None:
        self._closed = True
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)
        self._renderer.close()
        sys.setswitchinterval(self._switch_before)


def _handler_for(server: MetricsServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        timeout = server.client_timeout_s  # on the socket: reading the request and writing the response

        def do_GET(self) -> None:
            if self.path.split("?")[0] not in ("/metrics", "/"):
                self.send_error(404, "only /metrics here")
                return
            if self.path.startswith("/metrics"):
                try:
                    published, kind = server.published(), CONTENT_TYPE
                except Exception as exc:
                    self.send_error(500, f"tokenwatch could not read the core: {exc}")
                    return
                body, packed = published.body, None
                if "gzip" in self.headers.get("Accept-Encoding", ""):
                    server.wants_gzip()
                    packed = published.gzipped()
            else:
                body, kind, packed = b'<a href="/metrics">/metrics</a>\n', "text/html; charset=utf-8", None
            gzipped = packed is not None
            if packed is not None:
                body = packed
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
