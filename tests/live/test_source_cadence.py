"""A node's stream is stale after max(stale_after, 3 x its observed interval): a scrape every 10 s is not
stale after 5 s of silence, nvidia-smi every 200 ms still is (docs/watch-rack.md)."""

from __future__ import annotations

import statistics

import pytest

from tokenwatch.base.clock import ManualClock
from tokenwatch.base.events import Event, NodeStatus
from tokenwatch.inputs.live.node_health import NodeHealth
from tokenwatch.inputs.live.node_sources import NodeContext
from tokenwatch.inputs.live.source_supervisor import SourceSupervisor
from tokenwatch.inputs.live.transport import Transport

STALE_AFTER_S = 5.0


class Periodic:
    def __init__(self, name: str, periodic_s: float) -> None:
        self.name = name
        self.periodic_s: float | None = periodic_s

    async def run(self, transport: Transport, ctx: NodeContext) -> None:
        raise AssertionError(f"{self.name} on {ctx.node} ({transport!r}) is never started in this test")


def setup(*sources: Periodic) -> tuple[ManualClock, NodeContext, SourceSupervisor, list[Event]]:
    clock = ManualClock()
    events: list[Event] = []

    async def emit(event: Event) -> None:
        events.append(event)

    health = NodeHealth("n", emit, clock.time)
    health.down_reason = None
    ctx = NodeContext("n", emit, clock, 0.0, health)
    supervisor = SourceSupervisor(list(sources), ctx, stale_after_s=STALE_AFTER_S)
    for source in sources:
        ctx.restarted(source.name)
    return clock, ctx, supervisor, events


def stale_reasons(events: list[Event]) -> list[str]:
    return [e.reason for e in events if isinstance(e, NodeStatus) and e.state == "stale"]


async def test_a_slow_scrape_is_judged_by_its_own_interval() -> None:
    scrape = Periodic("metrics", 10.0)
    clock, ctx, supervisor, events = setup(scrape)
    arrivals = [10.0, 10.0, 10.5, 9.5, 10.0]
    for gap in arrivals:
        clock.advance(gap)
        ctx.saw("metrics")
    limit = max(STALE_AFTER_S, 3 * statistics.median(arrivals))
    assert supervisor.stale_limit_s(scrape) == pytest.approx(limit)
    clock.advance(9.0)  # past stale_after, inside its own cadence: not stale
    await supervisor.check_silence()
    assert stale_reasons(events) == []
    clock.advance(limit - 9.0 + 0.5)
    await supervisor.check_silence()
    assert stale_reasons(events) == [f"no metrics data for {limit:g} s"]
    ctx.saw("metrics")
    await supervisor.check_silence()
    assert isinstance(events[-1], NodeStatus)
    assert events[-1].state == "up"


async def test_a_fast_stream_is_still_stale_after_stale_after() -> None:
    smi = Periodic("nvidia-smi", 0.2)
    clock, ctx, supervisor, events = setup(smi)
    for _ in range(20):
        clock.advance(0.2)
        ctx.saw("nvidia-smi")
    assert supervisor.stale_limit_s(smi) == STALE_AFTER_S
    clock.advance(STALE_AFTER_S + 0.5)
    await supervisor.check_silence()
    assert stale_reasons(events) == [f"no nvidia-smi data for {STALE_AFTER_S:g} s"]


async def test_before_any_arrival_the_configured_interval_counts() -> None:
    scrape = Periodic("dcgm-exporter", 30.0)
    clock, _, supervisor, events = setup(scrape)
    assert supervisor.stale_limit_s(scrape) == 90.0
    clock.advance(60.0)
    await supervisor.check_silence()
    assert stale_reasons(events) == []
