"""Many pages, one run: ``tokenwatch serve`` with raw websocket clients (the page's own origin and token).

Every websocket used to start a run process of its own (50 pages: 100 processes, 1.5 GB; for ``watch`` an
SSH fan-out each). Now the first page starts the one run, later ones join it read-only up to
``--max-viewers``, the last to leave ends the run's process group, and SIGINT or SIGTERM stops serve
cleanly whatever the pages do.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import textwrap
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import aiohttp
import psutil
import pytest
from textual_serve.download_manager import DownloadManager

from tests.cli.serve.conftest import Served, ServeFactory
from tokenwatch.cli.serve_viewer import Viewer
from tokenwatch.cli.shared_run import SharedRun

SIM = ("sim", "--speed", "0", "--duration", "2m", "--seed", "7")
CEILING_S = 60.0  # generous: a loaded 2-core machine


class Page:
    """A raw websocket client of serve that reads what the dashboard sends, as the page's script does."""

    def __init__(self, websocket: aiohttp.ClientWebSocketResponse) -> None:
        self.websocket = websocket
        self.screen = bytearray()  # every byte of terminal output received
        self.texts: list[str] = []
        self.closed: tuple[int | None, str] | None = None
        self._reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        while True:
            message = await self.websocket.receive()
            if message.type == aiohttp.WSMsgType.BINARY:
                self.screen += message.data
            elif message.type == aiohttp.WSMsgType.TEXT:
                self.texts.append(message.data)
            elif message.type == aiohttp.WSMsgType.CLOSE:  # serve's close frame: its code and reason
                self.closed = (message.data, str(message.extra or ""))
            elif message.type in (aiohttp.WSMsgType.CLOSED, aiohttp.WSMsgType.ERROR):
                self.closed = self.closed or (self.websocket.close_code, "")
                return

    async def wait(self, condition: str, check: Callable[[], bool], ceiling_s: float = CEILING_S) -> None:
        deadline = time.monotonic() + ceiling_s
        while not check():
            if time.monotonic() > deadline:
                raise AssertionError(f"never {condition} in {ceiling_s} s; closed={self.closed}")
            await asyncio.sleep(0.05)

    async def wait_closed(self) -> None:
        await self.wait("closed", lambda: self.closed is not None)

    async def wait_for_output(self, text: str) -> None:
        await self.wait(f"showed {text!r}", lambda: text.encode() in self.screen)

    async def send(self, *envelope: object) -> None:
        await self.websocket.send_json(list(envelope))

    async def round_trip(self, mark: str) -> None:
        """A ping answered: serve has handled every message this page sent before it."""
        await self.send("ping", mark)
        await self.wait(f"answered ping {mark}", lambda: f'["pong", "{mark}"]' in self.texts)

    async def close(self) -> None:
        await self.websocket.close()
        with contextlib.suppress(asyncio.CancelledError):
            await self._reader


@contextlib.asynccontextmanager
async def pages(served: Served, count: int) -> AsyncIterator[list[Page]]:
    async with aiohttp.ClientSession() as http:
        opened: list[Page] = []
        try:
            for _ in range(count):
                opened.append(Page(await http.ws_connect(served.ws_url, headers={"Origin": served.base})))
            yield opened
        finally:
            for page in opened:
                await page.close()


def _run_processes(served: Served) -> list[psutil.Process]:
    return list(psutil.Process(served.process.pid).children(recursive=True))


def _group_gone(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    return False


async def test_fifty_pages_share_one_run_process(serve: ServeFactory):
    served = serve(*SIM, options=("--max-viewers", "60"))
    async with pages(served, 50) as opened:
        # Each page is shown the dashboard: the first as it starts, the others through the redraw they asked.
        for page in opened:
            await page.wait_for_output("Nodes (18)")
        run = _run_processes(served)
        assert len(run) == 1, run
        dashboard = run[0]
        # Started by serve itself (exec: no shell between), in a process group of its own.
        assert dashboard.ppid() == served.process.pid
        assert dashboard.cmdline()[:5] == [sys.executable, "-m", "tokenwatch", *SIM[:2]]
        assert os.getpgid(dashboard.pid) == dashboard.pid != os.getpgid(served.process.pid)
    # The last page gone: the run is ended with its group.
    _, alive = psutil.wait_procs(run, timeout=CEILING_S)
    assert not alive
    assert _group_gone(dashboard.pid)
    status, out, err = served.stop()
    assert status == 0, err
    assert "stopped (1 run, 50 viewers)" in out


async def test_a_page_beyond_max_viewers_is_refused_with_a_reason(serve: ServeFactory):
    served = serve(*SIM, options=("--max-viewers", "2"))
    async with pages(served, 3) as (first, second, third):
        await third.wait_closed()
        assert third.closed == (1013, "2 viewers already, the most --max-viewers allows")
        await second.wait_for_output("Nodes (18)")
        assert first.closed is None
        assert second.closed is None
        assert len(_run_processes(served)) == 1
    status, _, err = served.stop()
    assert status == 0
    assert "refused a viewer from 127.0.0.1: 2 viewers already, the most --max-viewers allows" in err


async def test_only_the_controlling_page_drives_the_dashboard(serve: ServeFactory):
    served = serve(*SIM)
    async with pages(served, 1) as (controller,):
        await controller.wait_for_output("Nodes (18)")  # it joined first: it has the keys
        async with pages(served, 1) as (watcher,):
            await watcher.wait_for_output("Nodes (18)")
            (dashboard,) = _run_processes(served)
            # The watcher's "q" (quit) is not forwarded: serve has handled it once the ping after it is
            # answered, so had it gone to the dashboard it would be there before the controller's "?" (help).
            await watcher.send("stdin", "q")
            await watcher.round_trip("after-q")
            await controller.send("stdin", "?")
            await controller.wait_for_output("tokenwatch keys")
            await watcher.wait_for_output("tokenwatch keys")  # what the controller does, the watcher sees
            assert dashboard.is_running()
            assert controller.closed is None

            # The controller leaves: the watcher has the keys now, and its "q" ends the run.
            await controller.close()
            deadline = time.monotonic() + CEILING_S
            # ctrl+l until serve has seen the controller go: then it reaches the dashboard, which redraws.
            while True:
                mark = len(watcher.screen)
                await watcher.send("stdin", "\x0c")
                await watcher.round_trip(f"redraw-{mark}")
                try:
                    redrawn = lambda since=mark: b"tokenwatch keys" in watcher.screen[since:]  # noqa: E731
                    await watcher.wait("redrew", redrawn, ceiling_s=2)
                    break
                except AssertionError:
                    assert time.monotonic() < deadline, "the watcher never got the keys"
            mark = len(watcher.screen)
            await watcher.send("stdin", "?")  # the help closes
            await watcher.send("stdin", "\x0c")  # ctrl+l: the whole screen again, now the dashboard's
            await watcher.wait("redrew the dashboard", lambda: b"Nodes (18)" in watcher.screen[mark:])
            await watcher.send("stdin", "q")
            await watcher.wait_closed()  # by the run's end
            _, alive = psutil.wait_procs([dashboard], timeout=CEILING_S)
            assert not alive
    status, _, err = served.stop()
    assert status == 0, err


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
async def test_serve_stops_on_a_signal_with_fifty_pages_open(serve: ServeFactory, sig: signal.Signals):
    served = serve(*SIM, options=("--max-viewers", "60"))
    async with pages(served, 50) as opened:
        await opened[-1].wait_for_output("Nodes (18)")
        run = _run_processes(served)
        assert len(run) == 1
        # Waited on, not timed: the exit happens (the ceiling is generous), cleanly, with nothing left behind.
        status, out, err = served.stop(timeout_s=CEILING_S, sig=sig)
        assert status == 0, err
        assert "Traceback" not in err
        assert "Event loop is closed" not in err
        assert "stopped (1 run, 50 viewers)" in out
        _, alive = psutil.wait_procs(run, timeout=CEILING_S)
        assert not alive
        assert _group_gone(run[0].pid)
        for page in opened:
            await page.wait_closed()


async def test_a_run_that_ignores_quit_and_sigterm_is_killed_with_its_group(tmp_path: Path):
    """The dashboard's process group goes whole: a run that ignores the quit request and SIGTERM, and a
    child it started that ignores SIGTERM too, are killed; no shell stands between (the leader is the
    command)."""
    pids = tmp_path / "pids"
    script = textwrap.dedent(
        f"""
        import signal, subprocess, sys, time
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        child = subprocess.Popen([sys.executable, "-c",
            "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"])
        open({str(pids)!r}, "w").write(f"{{child.pid}}\\n")
        sys.stdout.buffer.write(b"__GANGLION__\\n")
        sys.stdout.flush()
        while True:
            time.sleep(600)
        """
    )
    ended: list[SharedRun] = []
    run = SharedRun([sys.executable, "-c", script], DownloadManager(), 1, ended.append)
    await run.start(80, 24)
    deadline = time.monotonic() + CEILING_S
    while not pids.exists() or not pids.read_text().endswith("\n"):
        assert time.monotonic() < deadline, "the run never started its child"
        await asyncio.sleep(0.05)
    leader = psutil.Process(run._process.pid if run._process is not None else 0)
    child = psutil.Process(int(pids.read_text()))
    assert leader.cmdline()[:2] == [sys.executable, "-c"]
    assert os.getpgid(child.pid) == leader.pid == os.getpgid(leader.pid)

    await run.stop()
    _, alive = psutil.wait_procs([leader, child], timeout=CEILING_S)
    assert not alive
    assert _group_gone(leader.pid)
    assert ended == [run]


async def test_a_page_that_falls_behind_is_let_go():
    """A page that reads nothing must not hold the dashboard up: past its queue, it is closed."""
    from aiohttp import web

    from tokenwatch.cli.serve_viewer import QUEUE_PACKETS

    held: list[Viewer] = []

    async def handler(request: web.Request) -> web.WebSocketResponse:
        websocket = web.WebSocketResponse(timeout=0.5)
        await websocket.prepare(request)
        viewer = Viewer(websocket, 1, 80, 24)
        held.append(viewer)
        async for _ in websocket:
            pass
        return websocket

    app = web.Application()
    app.router.add_get("/ws", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()  # port 0: the kernel's, bound at once, no race
    port = runner.addresses[0][1]
    try:
        async with aiohttp.ClientSession() as http:
            client = await http.ws_connect(f"ws://127.0.0.1:{port}/ws")
            deadline = time.monotonic() + CEILING_S
            while not held:
                assert time.monotonic() < deadline
                await asyncio.sleep(0.05)
            viewer = held[0]
            frame = b"x" * 16 * 1024
            sent = 0
            while not viewer.closing:  # the client never reads: the socket's buffers fill, then the queue
                viewer.send(frame)
                sent += 1
                assert sent < 100 * QUEUE_PACKETS, "never let go"
                await asyncio.sleep(0)
            await viewer.close_soon()
            assert viewer.websocket.closed
            await client.close()
    finally:
        await runner.cleanup()


async def test_a_page_that_breaks_the_protocol_is_one_line_and_let_go(serve: ServeFactory):
    served = serve(*SIM)
    async with pages(served, 1) as (page,):
        await page.wait_for_output("Nodes (18)")
        (dashboard,) = _run_processes(served)
        await page.websocket.send_str("not json")
        await page.wait_closed()
        _, alive = psutil.wait_procs([dashboard], timeout=CEILING_S)  # it was the last page
        assert not alive
    status, _, err = served.stop()
    assert status == 0
    assert "Traceback" not in err
    bad = [line for line in err.splitlines() if "a bad message from the page" in line]
    assert len(bad) == 1, err
    assert bad[0].startswith("tokenwatch serve: viewer 1: a bad message from the page (")
