"""Injected clocks: collectors, pacing and rate windows never read the wall clock directly.

``MonotonicClock`` is the real one; ``ManualClock`` lets tests move time by hand, so the
simulator, replay pacing and stale detection are deterministic under test.
"""

from __future__ import annotations

import asyncio
import time
from typing import Protocol


class Clock(Protocol):
    def time(self) -> float:
        """Monotonic seconds."""
        ...

    def wall(self) -> float:
        """Unix time, for stamping a run's start."""
        ...

    async def sleep(self, seconds: float) -> None: ...


class MonotonicClock:
    def time(self) -> float:
        return time.monotonic()

    def wall(self) -> float:
        return time.time()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))


class ManualClock:
    """Time moves only when ``advance`` is called or a sleeper asks (sleep advances instantly)."""

    def __init__(self, start: float = 0.0, wall_start: float = 1_700_000_000.0) -> None:
        self._now = start
        self._wall_offset = wall_start - start

    def time(self) -> float:
        return self._now

    def wall(self) -> float:
        return self._now + self._wall_offset

    def advance(self, seconds: float) -> None:
        self._now += seconds

    async def sleep(self, seconds: float) -> None:
        self._now += max(0.0, seconds)
        await asyncio.sleep(0)
