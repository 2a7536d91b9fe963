"""An event loop that takes its I/O in batches: once it has woken, the next wake-up for I/O waits ``gap_s``.

A watch of 64 nodes gets two arrivals a node-second (a GPU round, a log line), each node at its own
phase, so an idle loop woke about 160 times a second for one arrival each. Most of the watch's CPU was
the cost of those wake-ups, not of the bytes: a busy machine, where the loop finds several arrivals
ready at once, spent half as much on the same data. With a gap, what arrives while the loop waits is
read in one turn, and the core ingests it one event after the other as before.

What waits, and what does not:

- I/O readiness (sockets, pipes, another thread's ``call_soon_threadsafe``, a signal) waits at most
  ``gap_s`` after the loop's last wake-up; arrivals are then stamped up to ``gap_s`` late.
- Timers keep their time: the pause never runs past the loop's next timer.
- Work that is ready never waits: a loop with callbacks to run polls without pausing.

The gap is 0 (off) until the input that wants it says so (:func:`batch_wakeups`): a live watch turns
it on once its backlogs are read and every node's first connection was tried (each round trip of a
handshake would have waited), and off again as it ends.
"""

from __future__ import annotations

import asyncio
import selectors
import time
import weakref
from collections.abc import Callable


class WakeupBatchingSelector(selectors.DefaultSelector):
    """The platform's selector, pausing before a blocking poll that comes within ``gap_s`` of the last."""

    def __init__(
        self,
        monotonic: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        super().__init__()
        self.gap_s = 0.0
        self._monotonic = monotonic
        self._sleep = sleep
        self._last_poll: float | None = None

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        # asyncio passes None (nothing scheduled), a timer's distance, or 0 (callbacks are ready)
        if self.gap_s > 0 and self._last_poll is not None and (timeout is None or timeout > 0):
            rest = self.gap_s - (self._monotonic() - self._last_poll)
            if rest > 0:
                self._sleep(rest if timeout is None else min(rest, timeout))
                timeout = 0  # what arrived meanwhile, or the timer now due: either way, at once
        ready = super().select(timeout)
        self._last_poll = self._monotonic()
        return ready


_SELECTORS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, WakeupBatchingSelector] = (
    weakref.WeakKeyDictionary()
)


def new_event_loop() -> asyncio.AbstractEventLoop:
    """A selector event loop whose wake-ups :func:`batch_wakeups` can space (``asyncio.Runner``'s
    ``loop_factory``)."""
    selector = WakeupBatchingSelector()
    loop = asyncio.SelectorEventLoop(selector)
    _SELECTORS[loop] = selector
    return loop


def batch_wakeups(gap_s: float) -> bool:
    """Space the running loop's I/O wake-ups ``gap_s`` apart from now on (0: each at once again).
    False where the loop was not made by :func:`new_event_loop` (the dashboard's, a test's): it wakes
    as before."""
    if gap_s < 0:
        raise ValueError(f"a wake-up gap is >= 0 s, not {gap_s:g}")
    selector = _SELECTORS.get(asyncio.get_running_loop())
    if selector is None:
        return False
    selector.gap_s = gap_s
    return True
