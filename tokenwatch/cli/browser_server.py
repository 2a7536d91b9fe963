"""The browser view's web server: textual-serve's page, terminal and protocol, with tokenwatch's rules.

textual-serve starts one process per browser session and relays Textual's web driver packets over a
websocket. What it leaves to us, and this module adds:

- a run command that fails shows its error in the page (and on the terminal) instead of a blank page
  that waits forever: textual-serve only prints it on its own stdout;
- the page's websocket address is the one the browser used, so ``--host 0.0.0.0`` works from a laptop
  (textual-serve would send ``ws://0.0.0.0:8000``);
- Ctrl-C ends every session (each app is told to quit, and killed if it has not after a grace period),
  and a port already in use is an ``OSError`` from :meth:`BrowserServer.bind` rather than a traceback.

textual-serve is pinned exactly in pyproject.toml: this subclasses its ``Server`` and ``AppService``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
from typing import Any

from aiohttp import web
from textual_serve.app_service import AppService
from textual_serve.download_manager import DownloadManager
from textual_serve.server import Server

from tokenwatch.cli.parser import stderr_line

QUIT_GRACE_S = 12.0  # the dashboard's own quit waits up to 10 s for a recording to flush
_PRELUDE = b"__GANGLION__\n"  # Textual's web driver writes this line before its first packet
_PRELUDE_LINES = 10  # anything else a run command prints before the app starts is not Textual's
_STDERR_KEEP = 64 * 1024  # the tail of a session's stderr kept for its report


class RunSession(AppService):
    """One browser session: its ``python -m tokenwatch RUN_COMMAND`` process and what it says."""

    def __init__(
        self,
        command: str,
        websocket: web.WebSocketResponse,
        download_manager: DownloadManager,
        session_number: int,
    ) -> None:
        super().__init__(
            command,
            write_bytes=websocket.send_bytes,
            write_str=websocket.send_str,
            close=self._close_page,
            download_manager=download_manager,
        )
        self._websocket = websocket
        self.number = session_number
        self._stopping = False

    async def _close_page(self) -> None:
        await self._websocket.close()

    async def on_meta(self, data: bytes) -> None:
        # The app's "exit" comes before its process ends; the page is closed once the exit status is known
        # (closing now would hide a failure's message behind textual-serve's "Session ended" dialog).
        with contextlib.suppress(ValueError, AttributeError):
            if json.loads(data).get("type") == "exit":
                return
        await super().on_meta(data)

    async def run(self) -> None:
        """Relay the app's packets to the page until the process ends, then close or show why it failed."""
        process = self._process
        assert process is not None
        assert process.stdout is not None
        assert process.stderr is not None
        stderr_tail = asyncio.create_task(self._forward_stderr(process.stderr))
        if await _wait_for_prelude(process.stdout):
            await self._relay(process.stdout)
        elif process.returncode is None:  # it printed something that is not Textual's: no page will come
            self._say("the run command wrote something other than the dashboard to stdout: stopped")
            process.kill()
        returncode = await process.wait()
        errors = (await stderr_tail).decode("utf-8", "replace")
        await self._ended(returncode, errors)

    async def _relay(self, stdout: asyncio.StreamReader) -> None:
        handlers = {b"D": self.on_data, b"M": self.on_meta, b"P": self.on_packed}
        page_open = True
        with contextlib.suppress(asyncio.IncompleteReadError):  # the process ended
            while True:
                head = await stdout.readexactly(5)
                payload = await stdout.readexactly(int.from_bytes(head[1:], "big"))
                handler = handlers.get(head[:1])
                if page_open and handler is not None:
                    try:
                        await handler(payload)
                    except ConnectionError:
                        # The page went away; its stop() tells the app to quit. Read on meanwhile, so the
                        # app never blocks on a full pipe and can quit.
                        page_open = False

    async def _forward_stderr(self, stream: asyncio.StreamReader) -> bytes:
        """Each line the run command writes to stderr, on the terminal as it comes; returns the tail."""
        kept = b""
        pending = b""
        while chunk := await stream.read(16 * 1024):
            kept = (kept + chunk)[-_STDERR_KEEP:]
            *lines, pending = (pending + chunk).split(b"\n")
            pending = pending[-_STDERR_KEEP:]
            for line in lines:
                self._say(line.decode("utf-8", "replace"))
        if pending:
            self._say(pending.decode("utf-8", "replace"))
        return kept

    def _say(self, message: str) -> None:
        stderr_line(f"tokenwatch serve: session {self.number}: {message.rstrip()}")

    async def _ended(self, returncode: int, errors: str) -> None:
        failed = returncode != 0 and not self._stopping
        if failed:
            self._say(_exit_reason(returncode))
        with contextlib.suppress(ConnectionError, RuntimeError):  # the page may be gone already
            if not failed:
                await self.remote_close()
                return
            # Left open: closing would cover the message with textual-serve's "Session ended" dialog.
            text = errors.strip() or "(nothing on stderr)"
            page = f"{text}\n\n{_exit_reason(returncode)}\nreload the page to try again\n"
            await self.remote_write_bytes(b"\x1bc" + page.replace("\n", "\r\n").encode())

    async def stop(self) -> None:
        """Tell the app to quit; kill its process if it has not ended within :data:`QUIT_GRACE_S`."""
        self._stopping = True
        task = self._task
        if task is None:
            return
        self._task = None
        await self._download_manager.cancel_app_downloads(app_service_id=self.app_service_id)
        await self.send_meta({"type": "quit"})
        try:
            await asyncio.wait_for(asyncio.shield(task), QUIT_GRACE_S)
        except TimeoutError:
            if self._process is not None and self._process.returncode is None:
                self._say(f"the dashboard did not quit within {QUIT_GRACE_S:g} s: killed")
                self._process.kill()
            await task


class BrowserServer(Server):
    """textual-serve's server for one run command, bound by :meth:`bind` and run until Ctrl-C."""

    def __init__(self, command: str, *, host: str, port: int, title: str) -> None:
        super().__init__(command, host=host, port=port, title=title)
        self._loop = asyncio.new_event_loop()
        self._runner: web.AppRunner | None = None
        self._sockets: set[web.WebSocketResponse] = set()
        self._stop = asyncio.Event()
        self.sessions_started = 0

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def bind(self) -> None:
        """Listen on host:port (port 0: any free port, then :attr:`port`); raises ``OSError``."""
        try:
            self._loop.run_until_complete(self._listen())
        except BaseException:
            self._loop.close()
            raise

    def run_until_stopped(self) -> int:
        """Serve until SIGINT or SIGTERM, then end every session; returns how many sessions there were."""
        try:
            self._loop.run_until_complete(self._serve_until_signal())
        finally:
            self._loop.close()
        return self.sessions_started

    async def _listen(self) -> None:
        runner = web.AppRunner(
            await self._make_app(), handle_signals=False, access_log=None, shutdown_timeout=QUIT_GRACE_S + 3
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
        # From now on Ctrl-C stops the server cleanly, even before run_until_stopped() waits for it.
        for sig in (signal.SIGINT, signal.SIGTERM):
            self._loop.add_signal_handler(sig, self._stop.set)

    async def _serve_until_signal(self) -> None:
        assert self._runner is not None
        try:
            await self._stop.wait()
        finally:
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._loop.remove_signal_handler(sig)
            # Closing a page's websocket ends its session (the handler stops the app); cleanup() then
            # waits for the handlers.
            await asyncio.gather(*(ws.close() for ws in list(self._sockets)), return_exceptions=True)
            await self._runner.cleanup()

    async def on_startup(self, app: web.Application) -> None:
        """The command prints its own line (textual-serve would print its logo)."""

    async def handle_index(self, request: web.Request) -> Any:
        # The page embeds absolute URLs made from public_url: make them the address this browser used.
        # (handle_index reads it before it first yields, so concurrent requests cannot mix them up.)
        self.public_url = f"{request.scheme}://{request.host}"
        return await super().handle_index(request)

    async def handle_websocket(self, request: web.Request) -> web.WebSocketResponse:
        websocket = web.WebSocketResponse(heartbeat=15)
        await websocket.prepare(request)
        self.sessions_started += 1
        session = RunSession(self.command, websocket, self.download_manager, self.sessions_started)
        self._sockets.add(websocket)
        try:
            await session.start(_cells(request, "width", 80), _cells(request, "height", 24))
            await self._process_messages(websocket, session)
        except (ValueError, TypeError, KeyError, AssertionError) as exc:  # a page that breaks the protocol
            stderr_line(f"tokenwatch serve: session {session.number}: a bad message from the page ({exc})")
        finally:
            self._sockets.discard(websocket)
            await session.stop()
            await websocket.close()
        return websocket


async def _wait_for_prelude(stdout: asyncio.StreamReader) -> bool:
    for _ in range(_PRELUDE_LINES):
        try:
            line = await stdout.readline()
        except ValueError:  # a line longer than the stream's limit: not Textual's
            return False
        if not line:
            return False
        if line == _PRELUDE:
            return True
    return False


def _exit_reason(returncode: int) -> str:
    if returncode < 0:
        with contextlib.suppress(ValueError):
            return f"the run command was killed by {signal.Signals(-returncode).name}"
    return f"the run command ended with exit status {returncode}"


def _cells(request: web.Request, name: str, default: int) -> int:
    try:
        return max(1, min(1000, int(request.query.get(name, default))))
    except ValueError:
        return default
