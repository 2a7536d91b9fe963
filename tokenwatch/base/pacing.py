"""Pacing run time against the clock: ``speed`` run seconds per wall second; 0 = as fast as possible.

The simulator and replay both pace through this, so the event stream itself never depends on
speed: only when each event is released does.
"""

from __future__ import annotations

import asyncio

from tokenwatch.base.clock import Clock

_YIELD_EVERY = 64  # unpaced producers still let the loop breathe (UI, Ctrl-C) every N events
LATE_LIMIT_S = 1.0  # wall seconds late before a paced producer drops its pace instead of catching up
PACE_WINDOW_S = 2.0  # the pace kept is measured over this much wall time
_KEPT_SHARE = 0.95  # a pace kept below this share of the speed asked is "behind"


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
        self.kept_speed: float | None = None  # run s per wall s over the last window (None: not measured)
        self._window: tuple[float, float] | None = None  # (wall, run time) where the window began
        self._dropped_at: float | None = None  # the wall time the pace was last dropped

    def rebase(self, t: float) -> None:
        """Make run time ``t`` correspond to now (after a seek, a pause or a speed change)."""
        self._anchor_wall = self.clock.time()
        self._anchor_t = t

    def set_speed(self, speed: float, t: float) -> None:
        self.speed = max(0.0, speed)
        self.rebase(t)
        self._window, self.kept_speed, self._dropped_at = None, None, None  # measured afresh

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
        """Return when run time ``t`` is due.

        Behind by more than :data:`LATE_LIMIT_S` (a consumer slower than x speed: a 64-rack sim at x60),
        the pace is dropped rather than caught up: run time ``t`` becomes now, so the run goes on at
        most at ``speed`` from where it is, and never races to make up what it lost. :attr:`behind` says
        so, with the pace kept."""
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
            if delay < -LATE_LIMIT_S:
                self.rebase(t)
                self._dropped_at = self.clock.time()
            await self.yield_sometimes()
        self._measure(t)

    def _measure(self, t: float) -> None:
        """The pace kept: run time over wall time, in windows of :data:`PACE_WINDOW_S`."""
        now = self.clock.time()
        if self._window is None:
            self._window = (now, t)
            return
        began, began_t = self._window
        if now - began >= PACE_WINDOW_S:
            self.kept_speed = (t - began_t) / (now - began)
            self._window = (now, t)

    @property
    def behind(self) -> float | None:
        """The pace kept (run s per wall s) while the producer cannot keep ``speed``; None while it can
        (or has not run a window yet). Behind means the pace was dropped within the last two windows and
        the last window kept less than 95 % of ``speed``."""
        if self.speed == 0 or self.kept_speed is None or self._dropped_at is None:
            return None
        if self.clock.time() - self._dropped_at > 2 * PACE_WINDOW_S:
            return None
        return self.kept_speed if self.kept_speed < _KEPT_SHARE * self.speed else None
