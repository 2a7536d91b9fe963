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

A key on its way (:class:`InputHold`) ends the slice at the next step and keeps the consumer asleep until
the key's frame is drawn (at most :attr:`InputHold.hold_s`): its callbacks then find the loop free, not a
slice of ingest in front of each. The terminal's reader says when a key came, the dashboard when the
frame after its action went out.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field

# The longest a key holds the consumer back: a key whose action draws nothing (no frame comes to end
# the hold) costs the input no more pace than this.
KEY_HOLD_S = 0.5


class InputHold:
    """A key between the terminal and the screen: from :meth:`key_arrived` (the terminal's reader thread)
    until :meth:`frame_sent` after :meth:`acted` (its action ran, then a frame went out), or ``hold_s``
    after it came. Plain attribute writes: the reader thread's and the loop's never need to agree more
    closely than a step of the consumer's work."""

    def __init__(self, hold_s: float = KEY_HOLD_S, now: Callable[[], float] = time.perf_counter) -> None:
        self.hold_s = hold_s
        self._now = now
        self._until = 0.0  # the clock's reading when the hold ends by itself (0: no key held)
        self._acted = False

    def key_arrived(self) -> None:
        self._acted = False
        self._until = self._now() + self.hold_s

    def acted(self) -> None:
        """A key's action ran: the next frame carries what it changed."""
        if self.held():
            self._acted = True

    def frame_sent(self) -> None:
        if self._acted:
            self._acted = False
            self._until = 0.0

    def release(self) -> None:
        """No key to wait for (the dashboard quits: the consumer must see the stop at once)."""
        self._acted = False
        self._until = 0.0

    def held(self) -> bool:
        return self._until > 0.0 and self._now() < self._until


@dataclass(frozen=True, slots=True)
class LoopShare:
    """``work_s``: the longest the consumer works before it lets the loop in (s); ``pause_s``: how long it
    then sleeps (s); ``backlog``: the queue's bound (events); ``hold``: a key on its way, which the
    consumer waits for."""

    work_s: float = 0.015
    pause_s: float = 0.004
    backlog: int = 64
    hold: InputHold = field(default_factory=InputHold, compare=False)


class LoopTurns:
    """The consumer's side of a :class:`LoopShare`: when its slice of work is over."""

    def __init__(self, share: LoopShare) -> None:
        self.share = share
        self._began = time.perf_counter()

    def restart(self) -> None:
        """The consumer waited (its queue was empty, or it paused): a new slice begins now."""
        self._began = time.perf_counter()

    def slice_over(self) -> bool:
        """The slice's time is up, or a key is on its way."""
        return self.share.hold.held() or time.perf_counter() - self._began >= self.share.work_s

    async def pause(self) -> None:
        """Let the loop in: :attr:`LoopShare.pause_s` of real time, and longer while a key is held (its
        frame drawn, or the hold over); then a new slice begins."""
        await asyncio.sleep(self.share.pause_s)
        # Looked at, not awaited as an asyncio.Event: the terminal's reader thread starts a hold, and an
        # Event belongs to the loop's thread.
        while self.share.hold.held():  # noqa: ASYNC110
            await asyncio.sleep(self.share.pause_s)
        self.restart()
