"""The one run process of ``tokenwatch serve``, shown to every page that connects.

textual-serve starts a process per websocket; a ``watch`` started per page is an SSH fan-out to every node
per page (50 pages were 100 processes and 1.5 GB). Here one ``python -m tokenwatch RUN_COMMAND`` speaks
Textual's web driver protocol to the server, and :class:`SharedRun` multiplexes it:

- everything the dashboard draws goes to every viewer (each through its own queue, see
  :mod:`tokenwatch.cli.serve_viewer`);
- keys, mouse, focus and the terminal size come from the **controller** alone: the viewer that has been
  connected longest. The others watch, read-only; when the controller leaves, the next one takes over
  (and the dashboard takes its window size);
- a viewer that joins a dashboard already drawn gets the terminal modes the dashboard set (alternate screen,
  mouse reporting) and the dashboard is asked to paint its whole screen again (ctrl+l), since a terminal
  that joins late starts blank.

The process runs ``exec``-ed (no shell between) in a process group of its own, and is ended with the group:
asked to quit, then SIGTERM, then SIGKILL, so nothing it started outlives serve.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import shlex
import signal
from collections.abc import Callable
from typing import Any

from aiohttp import WSCloseCode
from textual_serve.app_service import AppService
from textual_serve.download_manager import DownloadManager

from tokenwatch.cli.serve_viewer import Viewer
from tokenwatch.cli.usage import stderr_line
from tokenwatch.frontends.notify.payloads import SERVE_URL_VARIABLE

QUIT_GRACE_S = 1.0  # the dashboard's own quit (serve refuses --record: there is no recording to flush)
TERM_GRACE_S = 0.5  # after SIGTERM to the group, before SIGKILL
KILL_WAIT_S = 0.25  # after SIGKILL, for the pipes to close (else something outside the group holds them)
REDRAW_KEY = b"\x0c"  # ctrl+l: the dashboard paints its whole screen again
_PRELUDE = b"__GANGLION__\n"  # Textual's web driver writes this line before its first packet
_PRELUDE_LINES = 10  # anything else a run command prints before the app starts is not Textual's
_STDERR_KEEP = 64 * 1024  # the tail of a run's stderr kept for its report
_PRIVATE_MODE = re.compile(rb"\x1b\[\?(\d+)([hl])")  # DEC private modes: alternate screen, mouse, paste


class SharedRun(AppService):
    """One ``python -m tokenwatch RUN_COMMAND`` process and the viewers it is shown to."""

    def __init__(
        self,
        argv: list[str],
        download_manager: DownloadManager,
        number: int,
        on_ended: Callable[[SharedRun], None],
        page_url: str = "",
    ) -> None:
        """``page_url``: where the pages are served, without the start's token (the run's notifications
        link to it: someone who already has the page's cookie goes straight in, nobody else can)."""
        super().__init__(
            shlex.join(argv),
            write_bytes=self._to_viewers,
            write_str=self._to_viewers,
            close=self._close_viewers,
            download_manager=download_manager,
        )
        self._argv = argv
        self._page_url = page_url
        self.number = number
        self._on_ended = on_ended
        self.viewers: list[Viewer] = []
        self._modes: dict[bytes, bytes] = {}  # mode number -> b"h" (set) or b"l" (reset), as last written
        self._drawing = False  # the dashboard has started (its prelude came)
        self._redraw_asked = False  # a ctrl+l is on its way and nothing was drawn since
        self._stopping = False
        self._stopped: asyncio.Task[None] | None = None

    def _build_environment(self, width: int = 80, height: int = 24) -> dict[str, str]:
        environment = super()._build_environment(width=width, height=height)
        if self._page_url:
            environment[SERVE_URL_VARIABLE] = self._page_url
        return environment

    @property
    def controller(self) -> Viewer | None:
        return self.viewers[0] if self.viewers else None

    # ------------------------------------------------------------------ viewers
    async def join(self, viewer: Viewer) -> None:
        self.viewers.append(viewer)
        if viewer is not self.controller and self._drawing:  # the first started the run at its own size
            viewer.send(b"".join(b"\x1b[?%s%s" % mode for mode in self._modes.items()))
            await self._ask_redraw()

    async def leave(self, viewer: Viewer) -> None:
        was_controller = viewer is self.controller
        with contextlib.suppress(ValueError):
            self.viewers.remove(viewer)
        controller = self.controller
        if was_controller and controller is not None and self._task is not None:
            await self.set_terminal_size(*controller.size)

    async def from_viewer(self, viewer: Viewer, envelope: list[Any]) -> None:
        """A message of textual-serve's page protocol: the controller's keys and size reach the dashboard."""
        kind = envelope[0]
        if kind == "resize":
            size = (int(envelope[1]["width"]), int(envelope[1]["height"]))
            viewer.size = (max(1, min(1000, size[0])), max(1, min(1000, size[1])))
        if viewer is not self.controller or self._task is None:
            return  # a read-only viewer, or a run that has ended
        if kind == "stdin":
            await self.send_bytes(str(envelope[1]).encode("utf-8"))
        elif kind == "resize":
            await self.set_terminal_size(*viewer.size)
        elif kind == "focus":
            await self.focus()
        elif kind == "blur":
            await self.blur()

    async def _ask_redraw(self) -> None:
        if not self._redraw_asked:  # one ctrl+l covers every viewer that joins before it is drawn
            self._redraw_asked = True
            await self.send_bytes(REDRAW_KEY)

    async def _to_viewers(self, packet: bytes | str) -> None:
        for viewer in self.viewers:
            viewer.send(packet)

    async def _close_viewers(self) -> None:
        for viewer in self.viewers:
            viewer.close_soon()

    async def on_data(self, payload: bytes) -> None:
        for mode, state in _PRIVATE_MODE.findall(payload):
            self._modes.pop(mode, None)  # re-inserted last: modes are replayed in the order they were set
            self._modes[mode] = state
        self._redraw_asked = False
        await self._to_viewers(payload)

    async def on_meta(self, data: bytes) -> None:
        # The app's "exit" comes before its process ends; the pages are closed once the exit status is known
        # (closing now would hide a failure's message behind textual-serve's "Session ended" dialog).
        with contextlib.suppress(ValueError, AttributeError):
            if json.loads(data).get("type") == "exit":
                return
        await super().on_meta(data)

    # ------------------------------------------------------------------ the process
    async def _open_app_process(self, width: int = 80, height: int = 24) -> asyncio.subprocess.Process:
        self._process = process = await asyncio.create_subprocess_exec(
            *self._argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=self._build_environment(width=width, height=height),
            start_new_session=True,  # its own process group, ended as one
        )
        assert process.stdin is not None
        self._stdin = process.stdin
        return process

    async def run(self) -> None:
        """Relay the app's packets to the viewers until the process ends, then close or show why it failed."""
        process = self._process
        assert process is not None
        assert process.stdout is not None
        assert process.stderr is not None
        stderr_tail = asyncio.create_task(self._forward_stderr(process.stderr))
        try:
            if await _wait_for_prelude(process.stdout):
                self._drawing = True
                await self._relay(process.stdout)
            elif process.returncode is None:  # it printed something that is not Textual's: no page will come
                self._say("the run command wrote something other than the dashboard to stdout: stopped")
                self._signal_group(signal.SIGKILL)
            returncode = await process.wait()
            errors = (await stderr_tail).decode("utf-8", "replace")
        finally:
            stderr_tail.cancel()
            self._task = None
            self._on_ended(self)
        self._ended(returncode, errors)

    async def _relay(self, stdout: asyncio.StreamReader) -> None:
        handlers = {b"D": self.on_data, b"M": self.on_meta, b"P": self.on_packed}
        with contextlib.suppress(asyncio.IncompleteReadError):  # the process ended
            while True:
                head = await stdout.readexactly(5)
                payload = await stdout.readexactly(int.from_bytes(head[1:], "big"))
                handler = handlers.get(head[:1])
                if handler is not None:
                    await handler(payload)

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
        stderr_line(f"tokenwatch serve: run {self.number}: {message.rstrip()}")

    def _ended(self, returncode: int, errors: str) -> None:
        failed = returncode != 0 and not self._stopping
        if not failed:
            for viewer in self.viewers:
                viewer.close_soon()
            return
        self._say(_exit_reason(returncode))
        # Left open: closing would cover the message with textual-serve's "Session ended" dialog.
        text = errors.strip() or "(nothing on stderr)"
        page = f"{text}\n\n{_exit_reason(returncode)}\nreload the page to try again\n"
        for viewer in self.viewers:
            viewer.send(b"\x1bc" + page.replace("\n", "\r\n").encode())

    def _signal_group(self, sig: signal.Signals) -> None:
        if self._process is not None:
            # The group outlives its leader while anything it started lives; once all are gone the id is free.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self._process.pid, sig)

    async def stop(self) -> None:
        """End the run: ask the app to quit, SIGTERM its group after :data:`QUIT_GRACE_S`, SIGKILL it
        after :data:`TERM_GRACE_S` more; then the viewers are let go. Called again, waits for the same end."""
        if self._stopped is None:
            self._stopping = True
            self._stopped = asyncio.create_task(self._end_group())
        await asyncio.shield(self._stopped)

    async def _end_group(self) -> None:
        task, process = self._task, self._process
        if task is not None and process is not None:
            await self._download_manager.cancel_app_downloads(app_service_id=self.app_service_id)
            loop = asyncio.get_running_loop()
            quit_by = loop.time() + QUIT_GRACE_S  # asking and quitting together: serve stops within ~2 s
            with contextlib.suppress(TimeoutError):  # a dashboard that reads no input fills its pipe
                await asyncio.wait_for(self.send_meta({"type": "quit"}), QUIT_GRACE_S)
            quit_grace = max(0.0, quit_by - loop.time())
            steps = ((None, quit_grace), (signal.SIGTERM, TERM_GRACE_S), (signal.SIGKILL, KILL_WAIT_S))
            for sig, grace in steps:
                if sig is not None:
                    self._signal_group(sig)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(asyncio.shield(task), grace)
                    break
            else:  # something outside the group holds its output open: stop reading it
                task.cancel()
                await asyncio.wait([task])
        self._signal_group(signal.SIGKILL)  # what the app started and left behind
        for viewer in self.viewers:
            viewer.close_soon(WSCloseCode.GOING_AWAY, "tokenwatch serve stopped")


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
