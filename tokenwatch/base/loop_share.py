"""How a session that is behind its input shares the event loop with a dashboard on the same loop.

A 64-rack simulation at x60 makes more work than one core can ingest, so the queue never empties and the
session's consumer never has to wait: without a bound it would hold the loop until the backlog drained,
and the dashboard (its first frame, every key) waited seconds for a turn. With a share, the consumer works
at most :attr:`LoopShare.work_s` at a time and then sleeps :attr:`LoopShare.pause_s` of real time: a
sleep rather than a bare ``sleep(0)``, because a key travels through several callbacks (the driver's
thread, the app's message queue, the screen, the binding, the repaint timer), and each of them would
otherwise wait a whole slice of ingest for its turn. The queue is bounded to :attr:`LoopShare.backlog`
events, so the producer cannot run ahead of the consumer by more than that (at 64 racks an event is a
batch of ~0.5 MB). What the input loses is pace, never events: a simulator behind its pace says so
(:mod:`tokenwatch.base.pacing`).

Replays are left without one: a seek plays minutes of recording through the session at once, and pauses
there would only make the seek longer.
"""

from __future__ import annotations

import time
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class LoopShare:
    """``work_s``: the longest the consumer works before it lets the loop in (s); ``pause_s``: how long it
    then sleeps (s); ``backlog``: the queue's bound (events)."""

    work_s: float = 0.015
    pause_s: float = 0.004
    backlog: int = 64


class LoopTurns:
    """The consumer's side of a :class:`LoopShare`: when its slice of work is over."""

    def __init__(self, share: LoopShare) -> None:
        self.share = share
        self._began = time.perf_counter()

    def restart(self) -> None:
        """The consumer waited (its queue was empty, or it paused): a new slice begins now."""
        self._began = time.perf_counter()

    def slice_over(self) -> bool:
        return time.perf_counter() - self._began >= self.share.work_s
