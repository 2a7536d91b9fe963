"""The /metrics body rendered once per snapshot, off the scrape path.

A scrape used to ask the event loop for a view and wait for it: behind a verdict tick and a dashboard
frame, a 64-rack scrape took hundreds of ms. Now the loop hands a view (the snapshot and the latency
buckets, both copies) to a render thread at most once per ``publish_every_s`` and only when the core
moved; the thread renders it and swaps the finished body in whole. A scrape serves the last body as it
is: it never waits on the loop, and never sees a half-written body (a body is swapped in only once
complete, as one reference).
"""

from __future__ import annotations

import gzip
import itertools
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from tokenwatch.frontends.metrics.exposition import render
from tokenwatch.frontends.metrics.families import MetricsView

if TYPE_CHECKING:
    from tokenwatch.core.rack import RackCore

GZIP_MIN_BYTES = 4096
# The exposition keeps per-family text between renders (exposition._HISTOGRAM_TEXT): one render at a time.
_RENDER_LOCK = threading.Lock()

CoreKey = tuple[int, int]
_SERIALS = itertools.count(1)


def core_key(core: RackCore) -> CoreKey:
    """What a body was rendered from: the core (a replay's seek swaps it) and its state's version."""
    return id(core), core.state.version if core.started else -1


def render_view(view: MetricsView | None) -> bytes:
    with _RENDER_LOCK:
        return render(view)


class PublishedBody:
    """One rendered body and, once a scraper asked for it, its gzip (made once, then shared)."""

    __slots__ = ("_gzip_lock", "_gzipped", "body", "key", "serial")

    def __init__(self, key: CoreKey, body: bytes) -> None:
        self.key = key
        self.body = body
        self.serial = next(_SERIALS)  # the order bodies were made in: a later one is newer
        self._gzipped: bytes | None = None
        self._gzip_lock = threading.Lock()

    @property
    def packed(self) -> bytes | None:
        """The gzip, if it was made (None otherwise: this does not make it)."""
        return self._gzipped

    def gzipped(self) -> bytes | None:
        """The body gzipped (None for a body too small to be worth it)."""
        if len(self.body) <= GZIP_MIN_BYTES:
            return None
        with self._gzip_lock:
            if self._gzipped is None:
                self._gzipped = gzip.compress(self.body, compresslevel=1)
            return self._gzipped


class BodyRenderer:
    """A daemon thread that renders the views handed to it (the latest wins: one rendered late is
    skipped), and ``latest``, the last complete body."""

    def __init__(self, on_published: Callable[[PublishedBody], None] | None = None) -> None:
        self.latest: PublishedBody | None = None
        self._on_published = on_published  # called on the render thread with each new complete body
        self.wants_gzip = False  # set once a scraper asked for gzip: bodies are gzipped in the thread too
        self.error: Exception | None = None  # why the last view could not be taken or rendered
        self.render_s = 0.0  # how long the last body took to render (and gzip), wall time
        self._pending: tuple[CoreKey, MetricsView | None] | None = None
        self._rendering = False
        self._closed = False
        self._changed = threading.Condition()
        self._thread = threading.Thread(target=self._run, name="tokenwatch-metrics-render", daemon=True)
        self._thread.start()

    @property
    def busy(self) -> bool:
        """A view waits or is being rendered: taking another now would only be skipped."""
        with self._changed:
            return self._pending is not None or self._rendering

    def submit(self, key: CoreKey, view: MetricsView | None) -> None:
        with self._changed:
            self._pending = (key, view)
            self._changed.notify_all()

    def fail(self, error: Exception) -> None:
        """Taking the view failed (on the loop): a scrape with no body yet says why."""
        with self._changed:
            self.error = error
            self._changed.notify_all()

    def wait_for(
        self, ready: Callable[[PublishedBody | None], bool], timeout_s: float
    ) -> PublishedBody | None:
        """The latest body once ``ready(latest)`` holds (or at ``timeout_s``, whatever it is then)."""
        with self._changed:
            self._changed.wait_for(
                lambda: ready(self.latest) or self.error is not None or self._closed, timeout=timeout_s
            )
            return self.latest

    def close(self) -> None:
        with self._changed:
            self._closed = True
            self._changed.notify_all()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        while True:
            with self._changed:
                self._changed.wait_for(lambda: self._pending is not None or self._closed)
                if self._closed:
                    return
                assert self._pending is not None
                (key, view), self._pending = self._pending, None
                self._rendering = True
            published: PublishedBody | None = None
            error: Exception | None = None
            began = time.monotonic()
            try:
                published = PublishedBody(key, render_view(view))
                if self.wants_gzip:
                    published.gzipped()
                self.render_s = time.monotonic() - began
            except Exception as exc:  # kept for the scrape to report; the last good body stays served
                error = exc
            with self._changed:
                self._rendering = False
                if published is not None:
                    self.latest, self.error = published, None
                else:
                    self.error = error
                self._changed.notify_all()
            if published is not None and self._on_published is not None:
                self._on_published(published)
