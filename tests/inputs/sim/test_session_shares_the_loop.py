"""A session fed by a producer behind its pace still lets the rest of the loop in (a frame, a key, a
scrape).

A 64-rack sim at x60 falls behind its pace at once: every event is already due, so the producer never
waited, and ``queue.get`` on a non-empty queue does not suspend either; the consumer drained 4,096 events
at a time and the dashboard drew no first frame in 120 s. The producer now yields every few events, as an
unpaced one does, so the consumer gets that many events per turn of the loop.
"""

from __future__ import annotations

import asyncio

from tokenwatch.base.clock import ManualClock
from tokenwatch.base.pacing import Pacer


async def test_a_producer_behind_its_pace_lets_other_tasks_run() -> None:
    """A paced producer behind its pace (every event already due) is not a busy loop either: it yields
    every few events, as an unpaced one does."""
    clock = ManualClock()
    pacer = Pacer(clock, speed=60.0)
    await pacer.wait_until(0.0)  # anchors run time 0 at the clock's now
    clock.advance(3600.0)  # an hour of wall time later: every event of the first hour at x60 is overdue
    turns = 0
    finished = False

    async def another_task() -> None:
        nonlocal turns
        while not finished:
            turns += 1
            await asyncio.sleep(0)

    watcher = asyncio.create_task(another_task())
    await asyncio.sleep(0)  # the watcher takes its first turn
    before = turns
    for k in range(1, 641):
        await pacer.wait_until(float(k))
    finished = True
    await watcher
    assert turns - before >= 640 // 64 - 1  # it ran while the overdue events were released
