"""A proxy in front of a real Prometheus-API server that holds back the answers to some grid instants:
what a loaded machine (or a busy server) does to a fleet watch's rounds, one slow and the next prompt.
A query for an instant ``time`` whose number on the grid of ``interval_s`` is odd is answered
``delay_s`` late; every other request passes at once."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from access_proxy import AccessProxy
from aiohttp import web


# mypy cannot follow tests/live's bare-name imports (pyproject): AccessProxy reaches it as Any.
@dataclass
class LateProxy(AccessProxy):  # type: ignore[misc]
    interval_s: float = 2.0
    delay_s: float = 1.5
    delayed: int = 0  # queries held back

    async def _forward(self, request: web.Request) -> web.Response:
        at = request.query.get("time")
        if at is not None and round(float(at) / self.interval_s) % 2 == 1:
            self.delayed += 1
            await asyncio.sleep(self.delay_s)
        answer: web.Response = await super()._forward(request)
        return answer
