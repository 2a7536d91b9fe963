"""The core advanced in steps, as the dashboard's session advances it to let the loop in between.

A 64-rack fleet's verdict tick is one rack's forecast after another (100-250 ms in one piece on a loaded
machine): ``RackCore.advance_steps`` yields after each tick and between the racks, so keys are answered
while it works. Held here: a core fed that way ends every event in the same state as one fed at once
(the snapshots equal as JSON, every forecast included); between the racks' steps the fleet's
projections are the last tick's, never half old and half new; and a stepping closed part way (the
session stopped) never samples its tick a second time.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from tests.core.fleet.fleet_runs import fleet_events
from tokenwatch.base.events import Event
from tokenwatch.core import RackCore
from tokenwatch.core.snapshot_json import snapshot_json

RACKS, PER_RACK = 4, 3


# Two snapshots made and written as JSON at each of ~1,000 events: ~16 s of CPU alone, 120 s of wall time
# at load 20 and past the suite's 180-s hang guard at load 25 (2 cores); the ceiling is a hang guard,
# sized for the CPU this test needs on a machine shared 15 ways, not a budget it is held to.
@pytest.mark.timeout(900)
@pytest.mark.parametrize(("scenario", "faults"), [("Offline", ""), ("Server", "node02:slow@20s-50s")])
def test_stepped_core_ends_each_event_as_the_core_fed_at_once(scenario: str, faults: str) -> None:
    events = fleet_events(RACKS, PER_RACK, scenario=scenario, duration_s=60.0, faults=faults)
    at_once, stepped = RackCore(), RackCore()
    steps = 0
    for event in events:
        at_once.ingest(event)
        for _ in stepped.advance_steps(event.t):
            steps += 1
        stepped.ingest(event)
        assert snapshot_json(stepped.snapshot()) == snapshot_json(at_once.snapshot()), event
    ticks = at_once.state.ticks_sampled
    verdict_ticks = math.ceil(events[-1].t / at_once.config.verdict_interval_s)
    # A step after each tick, and one after each rack's forecast at each verdict tick.
    assert steps >= ticks + RACKS * (verdict_ticks - 1)
    assert at_once.state.version == stepped.state.version


def _up_to_a_verdict_tick(core: RackCore, events: list[Event]) -> tuple[int, float]:
    """Feed ``core`` every event before the first one whose ticks hold a verdict tick after 35 s (the
    fleet's projections change there from the last tick's, made at 30 s); its index and the tick's time."""
    for i, event in enumerate(events):
        state = core.state if core.started else None
        if state is not None and event.t > 35.0 and event.t > state.ticks_sampled * core.config.tick_s:
            due = state.fleet.next_due_s if state.fleet is not None else math.inf
            if state.ticks_sampled * core.config.tick_s <= due < event.t:
                return i, due
        core.ingest(event)
    raise AssertionError("no verdict tick in the run")


def test_between_the_racks_the_projections_are_the_last_ticks() -> None:
    events = fleet_events(RACKS, PER_RACK, duration_s=60.0, faults="node04:slow@5s")
    core = RackCore()
    i, _due = _up_to_a_verdict_tick(core, events)
    before = core.snapshot().fleet
    assert before is not None
    seen = []
    for _ in core.advance_steps(events[i].t):
        fleet = core.snapshot().fleet
        assert fleet is not None
        seen.append(fleet.projected_tokens_per_s.copy())
    after = core.snapshot().fleet
    assert after is not None
    assert not np.allclose(after.projected_tokens_per_s, before.projected_tokens_per_s, equal_nan=True)
    for projected in seen:  # each step shows one tick's projections whole: the old or the new
        assert np.allclose(projected, before.projected_tokens_per_s, equal_nan=True) or np.allclose(
            projected, after.projected_tokens_per_s, equal_nan=True
        )
    assert sum(np.allclose(p, before.projected_tokens_per_s, equal_nan=True) for p in seen) >= RACKS - 1


def test_a_stepping_closed_part_way_never_samples_its_tick_twice() -> None:
    events = fleet_events(RACKS, PER_RACK, duration_s=60.0)
    whole, cut = RackCore(), RackCore()
    i, due = _up_to_a_verdict_tick(cut, events)
    for event in events[:i]:
        whole.ingest(event)
    steps = cut.advance_steps(events[i].t)
    for _ in range(2):  # into the verdict tick's racks, then stopped
        next(steps)
    steps.close()
    for event in events[i:]:
        whole.ingest(event)
        cut.ingest(event)
    assert cut.state.ticks_sampled == whole.state.ticks_sampled
    assert cut.state.version == whole.state.version
    history_whole, history_cut = whole.history(), cut.history()
    assert np.array_equal(history_cut.times, history_whole.times)
    assert np.array_equal(history_cut.rack_tokens_per_s, history_whole.rack_tokens_per_s, equal_nan=True)
    assert np.array_equal(history_cut.rack_power_w, history_whole.rack_power_w, equal_nan=True)
    assert due < events[-1].t
