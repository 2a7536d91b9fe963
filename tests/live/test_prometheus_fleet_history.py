"""History from the engine: a fleet watch that attaches mid-run fills the timeline
from the run's start with ``query_range`` and the figures it backfills are, instant for instant, the ones
a watch from the start saw live; its recording holds the backfill as ordinary events, so a replay of it
ends on the board the watch showed.

Four simulated racks of 4 nodes run in real time, each on its own exporter (read between events, on the
test's loop), scraped every second by a real Prometheus, and again (racks made afresh) by a real
VictoriaMetrics. Watch A starts with the run; watch B attaches about 10 s in (plus the engine's latency
offset, 12 s on VictoriaMetrics); both stop 6 s later. About 25 s on Prometheus, 50 s on VictoriaMetrics.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pytest
from fleet_support import (
    ENGINES,
    VM_NEW_SERIES_OFFSET_S,
    close_all,
    missing_engine,
    rack_core,
    rack_events,
    serve,
    tsdb,
)

from tests.conftest import events_so_far, wait_until_async
from tokenwatch.base.events import RACK_FIGURES, Event, RackFiguresBatch, RunStarted
from tokenwatch.core import RackCore
from tokenwatch.frontends.metrics import MetricsServer
from tokenwatch.inputs.config import WatchConfig, load_watch_config
from tokenwatch.inputs.live.supervisor import LiveCollector
from tokenwatch.inputs.watch import fleet_watch
from tokenwatch.recording import RecordingReader, RecordingWriter
from tokenwatch.session import Session

pytestmark = [pytest.mark.timeout(120)]

RACKS, NODES = 4, 4
B_JOINS_AT_S, BOTH_STOP_AT_S = 10.0, 16.0


def config(tmp: Path, url: str, lookback: str, latency_offset_s: float = 0.0) -> WatchConfig:
    path = tmp / f"fleet-{lookback}.yaml"
    offset = f", latency_offset: {latency_offset_s:g}s" if latency_offset_s else ""
    path.write_text(
        "run: {name: fleet, scenario: Offline}\n"
        f"fleet: {{url: '{url}', interval: 1s, lookback: {lookback}{offset}}}\n"
    )
    return load_watch_config(path)


async def feed(cores: Sequence[RackCore], events: Sequence[Sequence[Event]], begun: float) -> None:
    """Each rack's simulated events, released as run time passes (the racks' own runs, live)."""
    done = [0] * len(cores)
    loop = asyncio.get_running_loop()
    while True:
        now = loop.time() - begun
        for r, core in enumerate(cores):
            while done[r] < len(events[r]) and events[r][done[r]].t <= now:
                core.ingest(events[r][done[r]])
                done[r] += 1
        await asyncio.sleep(0.1)  # the racks release their events as their run time comes


async def watch(collector: LiveCollector, path: Path, stop: asyncio.Event) -> Session:
    session = Session(RackCore(), [collector], recorder=RecordingWriter(path))
    task = asyncio.create_task(session.run())
    await stop.wait()
    session.stop()
    await task
    return session


def live_figures(path: Path) -> list[RackFiguresBatch]:
    """The rack figures a watch being recorded has read live so far (after it attached)."""
    events = events_so_far(path)  # none while the file is not made, or its header not written yet
    started = next((e for e in events if isinstance(e, RunStarted)), None)
    if started is None:
        return []
    attached = float(started.meta["attached_at_s"])
    return [e for e in events if isinstance(e, RackFiguresBatch) and e.t > attached]


def batches_by_instant(path: Path, settle_s: float) -> tuple[dict[int, RackFiguresBatch], float, RunStarted]:
    """The recording's rack figures by the grid instant (Unix second) each is of: a live batch was
    made ``settle_s`` after its instant; a backfilled one carries its instant as its time."""
    events = list(RecordingReader(path).events())
    started = events[0]
    assert isinstance(started, RunStarted)
    attached = float(started.meta["attached_at_s"])
    out: dict[int, RackFiguresBatch] = {}
    for event in events:
        if isinstance(event, RackFiguresBatch):
            wall = started.wall_epoch + event.t - (settle_s if event.t > attached else 0.0)
            out[round(wall)] = event
    return out, attached, started


@pytest.fixture  # per engine: the run moves the racks on
def racks() -> Iterator[tuple[list[RackCore], list[list[Event]], list[MetricsServer]]]:
    events = [rack_events(r, NODES, duration_s=120.0, until_s=60.0) for r in range(RACKS)]
    cores = [rack_core(e, 0.0) for e in events]  # the run has started; no work yet
    servers = [serve(core) for core in cores]
    try:
        yield cores, [e[sum(1 for x in e if x.t <= 0.0) :] for e in events], servers
    finally:
        close_all(servers)


@pytest.mark.parametrize("engine", ENGINES)
def test_the_backfill_is_what_a_watch_from_the_start_saw_and_replays_as_seen(
    racks: tuple[list[RackCore], list[list[Event]], list[MetricsServer]], tmp_path: Path, engine: str
) -> None:
    reason = missing_engine(engine)
    if reason is not None:
        pytest.skip(reason)
    cores, events, servers = racks
    prom = tsdb(engine, tmp_path, [f"127.0.0.1:{s.port}" for s in servers])
    # Each live round waits out the engine's latency offset (the fleet's `latency_offset`, as
    # VictoriaMetrics' Prometheus API has no flags to read it from), and its batch is made that long
    # after the instant it read: both the board and the mapping below account for it.
    offset = VM_NEW_SERIES_OFFSET_S if engine == "victoria-metrics" else 0.0
    prom.start()
    try:
        prom.wait_until_scraped()
        asyncio.run(_two_watches(tmp_path, prom.url, cores, events, servers, offset))
    finally:
        prom.stop()
    settle = 0.5 + offset
    live, _, _ = batches_by_instant(tmp_path / "a.jsonl", settle)
    later, attached, started = batches_by_instant(tmp_path / "b.jsonl", settle)
    assert attached > 5.0  # B joined a run well under way
    backfill = {k: b for k, b in later.items() if b.t <= attached}
    common = sorted(set(backfill) & set(live))
    assert len(common) >= 5
    moving = 0
    for instant in common:
        a, b = live[instant], backfill[instant]
        assert a.racks == b.racks
        # Equal but for the order the engine adds in (VictoriaMetrics' sums differ in the last bit).
        np.testing.assert_allclose(a.values, b.values, rtol=1e-12, err_msg=f"at {instant}")
        assert a.down.tolist() == b.down.tolist()
        assert a.worst_node == b.worst_node
        moving += bool(np.nansum(a.values[:, RACK_FIGURES.index("tokens_per_s")]) > 0)  # working
    assert moving >= 3
    # B's timeline starts where the run did (the first step the fleet's token counters grew), not
    # where B joined it.
    assert min(b.t for b in backfill.values()) <= 2.0
    assert started.meta["t0"] == "prometheus-fleet"


async def _two_watches(
    tmp: Path,
    url: str,
    cores: Sequence[RackCore],
    events: Sequence[Sequence[Event]],
    servers: Sequence[MetricsServer],
    latency_offset_s: float,
) -> None:
    loop = asyncio.get_running_loop()
    for server in servers:
        server.attach_loop(loop)  # scrapes read each core between two of its events
    a = fleet_watch(config(tmp, url, "0s", latency_offset_s))  # from the start: nothing before it to fill in
    stop = asyncio.Event()
    run_a = asyncio.create_task(watch(a, tmp / "a.jsonl", stop))
    await wait_until_async(lambda: bool(live_figures(tmp / "a.jsonl")), "A's first rack figures")
    feeder = asyncio.create_task(feed(cores, events, loop.time()))  # now the racks work
    # The scenario's pacing: B joins a run some seconds under way (and beyond the engine's latency offset,
    # which its backfill leaves to the live rounds).
    await asyncio.sleep(B_JOINS_AT_S + latency_offset_s)
    b = fleet_watch(config(tmp, url, "10m", latency_offset_s))
    run_b = asyncio.create_task(watch(b, tmp / "b.jsonl", stop))
    await wait_until_async(  # its backfill done, then live
        lambda: len(live_figures(tmp / "b.jsonl")) >= 2, "B's rack figures after it joined"
    )
    await asyncio.sleep(BOTH_STOP_AT_S - B_JOINS_AT_S)  # the scenario's pacing: both watch together
    stop.set()
    session_b = await run_b
    await run_a
    feeder.cancel()
    # A replay of B's recording ends on the board B's own core showed.
    replayed = RackCore()
    for event in RecordingReader(tmp / "b.jsonl").events():
        replayed.ingest(event)
    seen, again = session_b.core.snapshot().fleet, replayed.snapshot().fleet
    assert seen is not None
    assert again is not None
    assert seen.racks == again.racks
    assert seen.state == again.state
    np.testing.assert_array_equal(seen.tokens_per_s, again.tokens_per_s)
    np.testing.assert_array_equal(seen.spread_pct, again.spread_pct)
    assert math.isclose(session_b.core.snapshot().timeline.times[0], replayed.snapshot().timeline.times[0])
