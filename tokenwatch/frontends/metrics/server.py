"""The /metrics server: a process of its own answers scrapes with the body of the last snapshot.

Thread safety: the core is fed on the event loop's thread. While a loop feeds it, the loop itself takes
a view of the core between two events (at most once per ``publish_every_s``, only when the core moved,
timed to be ready just before the next scrape is due: :mod:`.render_schedule`) and a render thread turns
it into the body scrapes serve (:mod:`.published`), which is then pushed, whole, to the serving process
(:mod:`.serving_process`, :mod:`.body_server`): a scrape never waits behind a verdict tick, a dashboard
frame, a render in progress or this process's GIL; it serves what was rendered for it, shortly before it
came (once two scrapes have shown their interval; before that, what was rendered after the scrape before
it). With no running loop attached (before or after a run) a scrape asks this process, which reads the
core directly, under a lock, as nothing else is writing then.

Crowds (in the serving process): the listen backlog holds 1,024 connections, at most 256 requests are
served at once (more wait in the backlog), a client silent or unread for ``client_timeout_s`` is let go,
and a client that disconnects mid-response is a debug log line, never a traceback on stderr.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from tokenwatch.frontends.metrics.families import take_view
from tokenwatch.frontends.metrics.published import BodyRenderer, PublishedBody, core_key, render_view
from tokenwatch.frontends.metrics.render_schedule import RenderSchedule
from tokenwatch.frontends.metrics.serving_process import ServingProcess

if TYPE_CHECKING:
    from tokenwatch.core.rack import RackCore

VIEW_TIMEOUT_S = 10.0  # the first scrape after attaching waits this long for the first body
PUBLISH_EVERY_S = 0.5  # a 1-s scrape reads a body at most this old (plus one render)
CLIENT_TIMEOUT_S = 10.0  # a client silent (or not reading) this long is let go
log = logging.getLogger("tokenwatch.frontends.metrics")


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
        self._renderer = BodyRenderer(self._push_rendered)
        self._schedule = RenderSchedule(publish_every_s, time.monotonic)  # when the next view is wanted
        self._closed = False
        self.publish_every_s = publish_every_s
        self.client_timeout_s = client_timeout_s
        try:
            self._process = ServingProcess(
                host,
                port,
                client_timeout_s,
                answer=self._answer,
                scraped=self._scrape_served,
                live=self._live,
            )
        except BaseException:
            self._renderer.close()
            raise
        self.port: int = self._process.port

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
        the body it has, the next scrape wants it (a body nobody reads is not rendered: at 64 racks a
        Server body is ~14 MB of text) and the renderer is free (a view taken while it renders is skipped)."""
        renderer = self._renderer
        try:
            core = self.core
            key = core_key(core)
            latest = renderer.latest
            schedule = self._schedule
            schedule.render_s = renderer.render_s
            # The body of a core not yet started is replaced once it starts, scraped or not: a first
            # scrape then serves the run, not an empty page.
            first_of_run = latest is not None and latest.key[1] == -1 and key[1] != -1
            wanted = latest is None or (latest.key != key and (schedule.due() or first_of_run))
            if wanted and not renderer.busy:
                schedule.rendering()
                renderer.submit(key, take_view(core))
        except Exception as exc:  # the scrape reports it; the loop goes on
            renderer.fail(exc)

    @property
    def last_published(self) -> PublishedBody | None:
        """The last body the loop's views were rendered into (None before the first), without waiting."""
        return self._renderer.latest

    @property
    def process_exit_code(self) -> int | None:
        """The serving process's exit status once it ended (None while it serves)."""
        return self._process.exit_code

    @property
    def rendering(self) -> bool:
        """A view of the core waits for the render thread or is being rendered now."""
        return self._renderer.busy

    def published(self) -> PublishedBody:
        """What a scrape serves: the last body rendered, without waiting on the loop (only the very
        first scrape after attaching waits for the first body)."""
        loop = self._loop
        if loop is not None and loop.is_running() and not self._closed:
            first = not self._schedule.ever_scraped
            self._schedule.scraped()  # the loop renders the next body for the next scrape
            latest = self._renderer.latest
            if latest is not None and not first:
                return latest
            # The first scrape waits for a body of the core as it is now (one render), not what was
            # rendered at the attach, maybe before the run began.
            held = latest

            def fresh(body: PublishedBody | None) -> bool:
                return body is not None and (body is not held or body.key == core_key(self.core))

            with contextlib.suppress(RuntimeError):  # loop closed in between: read directly below
                loop.call_soon_threadsafe(self._publish)
                latest = self._renderer.wait_for(fresh, VIEW_TIMEOUT_S)
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
        self._process.close()
        self._renderer.close()

    def _live(self) -> bool:
        """Scrapes are served from the last body pushed: a running loop pushes each new one (after the
        first scrape, which asks for a body of the core as it is then)."""
        loop = self._loop
        return loop is not None and loop.is_running() and not self._closed and self._schedule.ever_scraped

    def _push_rendered(self, published: PublishedBody) -> None:
        """On the render thread: the new body goes to the serving process, whole."""
        try:
            self._process.push(published)
        except Exception as exc:  # the render thread must live on: the next body may go through
            log.warning("/metrics: a body could not be handed to the server process: %r", exc)

    def _scrape_served(self, packed: bool) -> None:
        """The serving process answered a scrape from the body it holds: the loop renders the next."""
        self._schedule.scraped()
        if packed:
            self.wants_gzip()

    def _answer(self, seq: int, packed: bool) -> None:
        """A scrape with no body to be served at once (no loop, or none rendered yet) asks for one."""
        try:
            published = self.published()
            if packed:
                self.wants_gzip()
                published.gzipped()
        except Exception as exc:
            self._process.fail(seq, str(exc))
            return
        self._process.push(published, seq)
