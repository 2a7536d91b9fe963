"""A simulator that cannot keep its speed drops its pace and says so, instead of racing to catch up.

A 64-rack sim at x60 is ingested slower than x60: its events fall behind their due times. Past
``LATE_LIMIT_S`` of wall time late, the pacer makes the event's run time "now": the run goes on at most at
its speed from where it is, never bursts through what it lost once the consumer is quicker, and
``behind`` says the pace it keeps (the dashboard's badge reads ``SIM x60 · behind, x20``). On a
``ManualClock``: the consumer's cost per event is the clock advanced by hand, so the paces are exact.
"""

from __future__ import annotations

import pytest

from tokenwatch.base.clock import ManualClock
from tokenwatch.base.pacing import LATE_LIMIT_S, PACE_WINDOW_S, Pacer

SPEED = 60.0
CONSUMER_S = 0.05  # wall seconds a slow consumer takes per 1-s event: x20 at most


async def _released(pacer: Pacer, clock: ManualClock, first_t: int, events: int, cost_s: float) -> int:
    """Release ``events`` events, one per run second from ``first_t``, each costing ``cost_s`` of wall."""
    for k in range(first_t, first_t + events):
        await pacer.wait_until(float(k))
        clock.advance(cost_s)
    return first_t + events


async def test_a_producer_behind_keeps_the_pace_it_can_and_says_so() -> None:
    clock = ManualClock()
    pacer = Pacer(clock, SPEED)
    t = await _released(pacer, clock, 0, 600, CONSUMER_S)
    assert pacer.behind == pytest.approx(1.0 / CONSUMER_S, rel=0.02)  # x20: one run second per 50 ms

    # The consumer is quick again: the run goes on at x60 from where it is, after at most the lateness
    # the pacer tolerates, where catching up would release the ~20 s of wall time lost at once.
    began = clock.time()
    t = await _released(pacer, clock, t, 600, 0.0)
    assert clock.time() - began >= 600 / SPEED - LATE_LIMIT_S

    # Keeping pace for two windows: no longer behind.
    await _released(pacer, clock, t, int(3 * PACE_WINDOW_S * SPEED), 0.0)
    assert pacer.behind is None


async def test_a_producer_on_pace_is_never_behind() -> None:
    clock = ManualClock()
    pacer = Pacer(clock, SPEED)
    await _released(pacer, clock, 0, 600, 0.5 / SPEED)  # half of its time used: on pace
    assert pacer.kept_speed == pytest.approx(SPEED, rel=0.02)
    assert pacer.behind is None
