"""The browser view's web server: textual-serve's page, terminal and protocol, with tokenwatch's rules.

textual-serve starts one process per websocket and lets any page, from any site, connect. What this module
changes and adds:

- access (:mod:`tokenwatch.cli.serve_access`): the start's token on the page and the websocket, the
  websocket's Origin the page's own, every request's Host this server's; a refusal is a 403 and one line
  on the terminal;
- one run per serve (:mod:`tokenwatch.cli.shared_run`): the first page starts it, later pages join it,
  read-only, up to ``--max-viewers``; the last page to leave ends it, and the next page starts it again;
- a run command that fails shows its error in the page (and on the terminal) instead of a blank page;
- the page's addresses are the ones the browser used (an allowed Host), so a tunnel or a host name works;
- SIGINT or SIGTERM ends the run's process group and lets every page go within about 2 s, whatever the
  pages do, and a port already in use is an ``OSError`` from :meth:`BrowserServer.bind`.

textual-serve is pinned exactly in pyproject.toml: this subclasses its ``Server`` and ``AppService``.
"""

from __future__ import annotations

import asyncio
import json
import shlex
import signal
from collections.abc import Awaitable, Callable

import aiohttp_jinja2
import jinja2
from aiohttp import WSCloseCode, WSMsgType, web
from textual_serve.server import Server

from tokenwatch.cli.serve_access import AccessRules, new_token
from tokenwatch.cli.serve_viewer import CLOSE_WAIT_S, Viewer, close_websocket
from tokenwatch.cli.shared_run import SharedRun
from tokenwatch.cli.usage import stderr_line

HANDLERS_GRACE_S = 0.25  # after the pages were let go, what aiohttp gives its handlers before cancelling them
_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class BrowserServer(Server):
    """textual-serve's server for one run command, bound by :meth:`bind` and run until Ctrl-C."""

    def __init__(self, run_argv: list[str], *, host: str, port: int, title: str, max_viewers: int) -> None:
        super().__init__(shlex.join(run_argv), host=host, port=port, title=title)
        self.run_argv = run_argv
        self.max_viewers = max_viewers
        self.rules = AccessRules.for_server(host, port, new_token())
        self._loop = asyncio.new_event_loop()
        self._runner: web.AppRunner | None = None
        self._stop = asyncio.Event()
        self._stopping = False
        self._run: SharedRun | None = None  # the run new pages join
        self._runs: set[SharedRun] = set()  # every run not yet stopped
        self._viewers: set[Viewer] = set()  # every open page
        self.runs_started = 0
        self.viewers_joined = 0

    @property
    def url(self) -> str:
        """The address to open, with the start's token."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/?token={self.rules.token}"

    def bind(self) -> None:
        """Listen on host:port (port 0: any free port, then :attr:`port`); raises ``OSError``."""
        try:
            self._loop.run_until_complete(self._listen())
        except BaseException:
            self._loop.close()
            raise

    def run_until_stopped(self) -> None:
        """Serve until SIGINT or SIGTERM, then end the run and let every page go."""
        loop = self._loop
        try:
            loop.run_until_complete(self._serve_until_signal())
            loop.run_until_complete(_cancel_the_rest())
            loop.run_until_complete(loop.shutdown_asyncgens())
        finally:
            for sig in _SIGNALS:
                loop.remove_signal_handler(sig)
            loop.close()

    async def _listen(self) -> None:
        runner = web.AppRunner(
            await self._make_app(), handle_signals=False, access_log=None, shutdown_timeout=HANDLERS_GRACE_S
        )
        await runner.setup()
        site = web.TCPSite(runner, self.host, self.port)
        try:
            await site.start()
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner
        self.port = int(runner.addresses[0][1])
        self.rules = AccessRules.for_server(self.host, self.port, self.rules.token)
        # From now on Ctrl-C stops the server cleanly, even before run_until_stopped() waits for it; a second
        # one while it stops changes nothing (no KeyboardInterrupt traceback halfway through).
        for sig in _SIGNALS:
            self._loop.add_signal_handler(sig, self._stop.set)

    async def _serve_until_signal(self) -> None:
        assert self._runner is not None
        try:
            await self._stop.wait()
        finally:
            self._stopping = True
            going = [
                viewer.close_soon(WSCloseCode.GOING_AWAY, "tokenwatch serve stopped")
                for viewer in self._viewers
            ]
            await asyncio.gather(*(run.stop() for run in list(self._runs)), *going, return_exceptions=True)
            await self._runner.cleanup()

    # ------------------------------------------------------------------ routes and access
    async def _make_app(self) -> web.Application:
        app = web.Application(middlewares=[self._host_check()])
        aiohttp_jinja2.setup(app, loader=jinja2.FileSystemLoader(self.templates_path))
        app.add_routes(
            [
                web.get("/", self.handle_index, name="index"),
                web.get("/ws", self.handle_websocket),  # no token: refused, with its reason
                web.get("/ws/{token}", self.handle_websocket, name="websocket"),
                web.get("/download/{key}", self.handle_download, name="download"),
                web.static("/static", self.statics_path, name="static"),
            ]
        )
        return app

    def _host_check(self) -> Callable[..., Awaitable[web.StreamResponse]]:
        @web.middleware
        async def check_host(
            request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
        ) -> web.StreamResponse:
            refusal = self.rules.host_refusal(request.headers.get("Host"))
            if refusal is not None:
                raise _refuse(request, refusal)
            return await handler(request)

        return check_host

    async def handle_index(self, request: web.Request) -> web.StreamResponse:
        given = request.query.get("token")
        cookie = request.cookies.get(self.rules.cookie_name)
        if not self.rules.token_matches(given if given is not None else cookie):
            raise _refuse(request, "no token" if given is None and cookie is None else "wrong token")
        # The page's addresses are the ones this browser used (its Host is one of this server's names).
        base = f"http://{request.host}"
        context = {
            "font_size": _cells(request, "fontsize", 16),
            "app_websocket_url": f"ws://{request.host}/ws/{self.rules.token}",
            "config": {"static": {"url": f"{base}/static/"}},
            "application": {"name": self.title},
        }
        response = aiohttp_jinja2.render_template("app_index.html", request, context)
        response.headers["Cache-Control"] = "no-store"
        response.headers["Referrer-Policy"] = "no-referrer"  # the address holds the token
        if given is not None:  # a reload without the query still works; no other site's request carries it
            response.set_cookie(self.rules.cookie_name, self.rules.token, httponly=True, samesite="Strict")
        return response

    # ------------------------------------------------------------------ viewers
    async def handle_websocket(self, request: web.Request) -> web.WebSocketResponse:
        token = request.match_info.get("token")
        if not self.rules.token_matches(token):
            raise _refuse(request, "no token" if token is None else "wrong token")
        refusal = self.rules.origin_refusal(request.headers.get("Origin"))
        if refusal is not None:
            raise _refuse(request, refusal)
        websocket = web.WebSocketResponse(heartbeat=15, timeout=CLOSE_WAIT_S)
        await websocket.prepare(request)
        refusal = self._viewer_refusal()
        if refusal is not None:
            stderr_line(f"tokenwatch serve: refused a viewer from {request.remote}: {refusal}")
            await close_websocket(websocket, WSCloseCode.TRY_AGAIN_LATER, refusal.encode())
            return websocket
        self.viewers_joined += 1
        viewer = Viewer(
            websocket, self.viewers_joined, _cells(request, "width", 80), _cells(request, "height", 24)
        )
        self._viewers.add(viewer)
        run: SharedRun | None = None
        try:
            run = await self._join(viewer)
            await self._take_messages(viewer, run)
        except (ValueError, TypeError, KeyError, IndexError) as exc:  # a page that breaks the protocol
            stderr_line(f"tokenwatch serve: viewer {viewer.number}: a bad message from the page ({exc})")
        finally:
            self._viewers.discard(viewer)
            if run is not None:
                await self._leave(run, viewer)
            await viewer.close_soon()
        return websocket

    def _viewer_refusal(self) -> str | None:
        if self._stopping:
            return "tokenwatch serve is stopping"
        if len(self._viewers) >= self.max_viewers:
            return f"{self.max_viewers} viewers already, the most --max-viewers allows"
        return None

    async def _join(self, viewer: Viewer) -> SharedRun:
        """The running run, or a new one started at this viewer's size."""
        run = self._run
        if run is not None:
            await run.join(viewer)
            return run
        self.runs_started += 1
        run = self._run = SharedRun(
            list(self.run_argv),
            self.download_manager,
            self.runs_started,
            self._run_ended,
            page_url=self.url.split("?", 1)[0],
        )
        self._runs.add(run)
        await run.join(viewer)  # before it starts: the first viewer controls it
        await run.start(*viewer.size)
        return run

    def _run_ended(self, run: SharedRun) -> None:
        if self._run is run:  # the next page starts another
            self._run = None

    async def _leave(self, run: SharedRun, viewer: Viewer) -> None:
        """The last viewer to leave ends the run at once (a page that comes later starts it again)."""
        await run.leave(viewer)
        if not run.viewers:
            if self._run is run:
                self._run = None
            await run.stop()
            self._runs.discard(run)

    async def _take_messages(self, viewer: Viewer, run: SharedRun) -> None:
        async for message in viewer.websocket:
            if message.type != WSMsgType.TEXT:
                continue
            envelope = message.json()
            if not isinstance(envelope, list) or not envelope:
                raise ValueError(f"not a message: {message.data[:60]!r}")
            if envelope[0] == "ping":
                viewer.send(json.dumps(["pong", envelope[1]]))
            else:
                await run.from_viewer(viewer, envelope)


async def _cancel_the_rest() -> None:
    """What is still pending once the server stopped (a page's writer, a close), cancelled and awaited."""
    rest = asyncio.all_tasks() - {asyncio.current_task()}
    for task in rest:
        task.cancel()
    await asyncio.gather(*rest, return_exceptions=True)


def _refuse(request: web.Request, why: str) -> web.HTTPForbidden:
    """403 (to raise), and one line on the terminal (never the path: a websocket's holds the token)."""
    what = (
        "the websocket" if request.path.startswith("/ws") else "the page" if request.path == "/" else "a file"
    )
    stderr_line(f"tokenwatch serve: refused {what} to {request.remote}: {why}")
    return web.HTTPForbidden(text=f"tokenwatch serve: {why}\n")


def _cells(request: web.Request, name: str, default: int) -> int:
    try:
        return max(1, min(1000, int(request.query.get(name, default))))
    except ValueError:
        return default
