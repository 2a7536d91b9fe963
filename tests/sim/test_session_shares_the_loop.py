"""A session whose queue never empties still lets the rest of the loop in (a frame, a key, a scrape).

``queue.get`` on a non-empty queue does not suspend: a producer ahead of the core (a 64-rack sim at x60
falls behind at once) kept the consumer busy until the queue drained, and the dashboard drew no first
frame in 120 s. The consumer now yields after a slice of work; the slice is set to nothing here, so the
test does not depend on how fast the machine is.
"""

from __future__ import annotations

import asyncio

import pytest

import tokenwatch.session as session_module
from tokenwatch.base.clock import ManualClock
from tokenwatch.base.events import Emit, Event
from tokenwatch.base.pacing import Pacer
from tokenwatch.core import RackCore
from tokenwatch.inputs.sim.profile import load_profile
from tokenwatch.inputs.sim.rack_sim import RackSimulation, SimSettings
from tokenwatch.session import Session


class Flood:
    """Emits its events without ever waiting (the queue is big enough never to fill)."""

    name = "flood"

    def __init__(self, events: list[Event]) -> None:
        self.events = events

    async def run(self, emit: Emit) -> None:
        for event in self.events:
            await emit(event)


async def test_a_queue_that_never_empties_lets_other_tasks_run(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(session_module, "_YIELD_AFTER_S", -1.0)  # yield after every event
    settings = SimSettings(load_profile("gb300-nvl72"), seed=2, duration_s=60.0)
    events = list(RackSimulation(settings).events())
    session = Session(RackCore(), [Flood(events)], queue_size=len(events) + 1, flush_interval_s=None)
    seen_by_another_task: list[int] = []
    finished = False

    async def another_task() -> None:  # a frame timer, a key, a scrape
        while not finished:
            seen_by_another_task.append(session.events_seen)
            await asyncio.sleep(0)

    watcher = asyncio.create_task(another_task())
    try:
        await session.run()
    finally:
        finished = True
        await watcher
    assert session.events_seen == len(events)
    between = [n for n in seen_by_another_task if 0 < n < len(events)]
    assert len(between) >= len(events) // 2  # it ran between the events, not only before and after


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
