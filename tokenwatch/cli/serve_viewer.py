"""One page connected to ``tokenwatch serve``: its websocket, fed through a queue of its own.

The dashboard's output goes to every viewer; a page that stops reading (a frozen tab, a client that never
reads) must hold up neither the others nor the dashboard, whose stdout would fill and block it. Each viewer
has its own bounded queue and writer task; one that falls :data:`QUEUE_PACKETS` packets behind is let go.
"""

from __future__ import annotations

import asyncio
import contextlib

from aiohttp import WSCloseCode, web

QUEUE_PACKETS = 1024  # the dashboard writes one packet per frame (at most 60 a second): many seconds' worth
CLOSE_WAIT_S = 0.5  # a page that does not answer the close handshake is cut off after this


class Viewer:
    """A page's websocket, its number (in the order pages joined) and its terminal size in cells."""

    def __init__(self, websocket: web.WebSocketResponse, number: int, width: int, height: int) -> None:
        self.websocket = websocket
        self.number = number
        self.size = (width, height)
        self._outbox: asyncio.Queue[bytes | str | None] = asyncio.Queue(QUEUE_PACKETS)
        self._writer = asyncio.create_task(self._write())
        self._closing: asyncio.Task[None] | None = None

    @property
    def closing(self) -> bool:
        return self._closing is not None

    def send(self, packet: bytes | str) -> None:
        """Queue ``packet`` for the page (bytes: terminal output; str: a JSON message of textual-serve's)."""
        if self._closing is not None:
            return
        try:
            self._outbox.put_nowait(packet)
        except asyncio.QueueFull:
            self.close_soon(
                WSCloseCode.TRY_AGAIN_LATER, "this page fell too far behind the dashboard", flush=False
            )

    def close_soon(
        self, code: int = WSCloseCode.OK, reason: str = "", *, flush: bool = True
    ) -> asyncio.Task[None]:
        """Close the page's websocket after what is queued (``flush``), or at once; returns the task."""
        if self._closing is None:
            if flush:
                with contextlib.suppress(asyncio.QueueFull):
                    self._outbox.put_nowait(None)
            else:
                self._writer.cancel()
            self._closing = asyncio.create_task(self._close(code, reason.encode()[:123], flush))
        return self._closing

    async def _close(self, code: int, reason: bytes, flush: bool) -> None:
        if flush:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(self._writer), CLOSE_WAIT_S)
            self._writer.cancel()
        await asyncio.wait([self._writer])  # ended or cancelled; never raises
        await close_websocket(self.websocket, code, reason)

    async def _write(self) -> None:
        websocket = self.websocket
        with contextlib.suppress(ConnectionError, RuntimeError):  # the page went
            while (packet := await self._outbox.get()) is not None:
                if isinstance(packet, bytes):
                    await websocket.send_bytes(packet)
                else:
                    await websocket.send_str(packet)


async def close_websocket(websocket: web.WebSocketResponse, code: int, reason: bytes) -> None:
    """Close within :data:`CLOSE_WAIT_S`: a page that does not read leaves the close frame unsent (drain)
    or unanswered; it is then cut off."""
    try:
        await asyncio.wait_for(websocket.close(code=code, message=reason), CLOSE_WAIT_S)
    except (TimeoutError, ConnectionError, RuntimeError):
        pass
    except asyncio.CancelledError:
        # aiohttp cancels a drain whose connection it lost: that is a closed page, not this task's end.
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            raise
