"""Pacing run time against the clock: ``speed`` run seconds per wall second; 0 = as fast as possible.

The simulator and replay both pace through this, so the event stream itself never depends on
speed: only when each event is released does.
"""

from __future__ import annotations

import asyncio

from tokenwatch.base.clock import Clock

_YIELD_EVERY = 64  # unpaced producers still let the loop breathe (UI, Ctrl-C) every N events


class Pacer:
    def __init__(self, clock: Clock, speed: float) -> None:
        if speed < 0:
            raise ValueError("speed must be >= 0")
        self.clock = clock
        self.speed = speed
        self.paused = False
        self._anchor_wall: float | None = None
        self._anchor_t = 0.0
        self._unpaced = 0

    def rebase(self, t: float) -> None:
        """Make run time ``t`` correspond to now (after a seek, a pause or a speed change)."""
        self._anchor_wall = self.clock.time()
        self._anchor_t = t

    def set_speed(self, speed: float, t: float) -> None:
        self.speed = max(0.0, speed)
        self.rebase(t)

    def delay_until(self, t: float) -> float:
        """Seconds of wall time until run time ``t`` is due (0 when unpaced; the first call anchors)."""
        if self.speed == 0:
            return 0.0
        if self._anchor_wall is None:
            self.rebase(t)
            return 0.0
        return self._anchor_wall + (t - self._anchor_t) / self.speed - self.clock.time()

    async def yield_sometimes(self) -> None:
        """Unpaced producers call this per event: every so often the loop gets a turn."""
        self._unpaced += 1
        if self._unpaced % _YIELD_EVERY == 0:
            await asyncio.sleep(0)

    async def wait_until(self, t: float) -> None:
        """Return when run time ``t`` is due."""
        while self.paused:
            await self.clock.sleep(0.05)
            self.rebase(t)
        if self.speed == 0:
            await self.yield_sometimes()
            return
        delay = self.delay_until(t)
        if delay > 0:
            await self.clock.sleep(delay)
        else:  # behind the pace (a consumer slower than x speed): the loop still gets its turns
            await self.yield_sometimes()
