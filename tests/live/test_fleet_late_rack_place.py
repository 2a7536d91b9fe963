"""A rack whose exporter first appears after the watch began stands in its own site on a grouped board,
not in "(none)": the run's start says where the racks found then stand, and the later rack's labels
reached no one. A fleet written ahead into a real Prometheus (:mod:`written_fleet`): rack01 and
rack02 in site ``hall-a`` and ``hall-b``, rack03 in ``hall-b`` from a few rounds in; the watch's rounds
are driven at grid instants, and the board is looked at live and after a recording's round trip."""

from __future__ import annotations

import asyncio
import math
from pathlib import Path

import pytest
from fleet_support import PROMETHEUS
from written_fleet import WrittenFleet, WrittenRack, written_fleet

from tokenwatch.base.clock import ManualClock
from tokenwatch.base.events import Event, Heartbeat, RackFiguresBatch, RunStarted
from tokenwatch.core import RackCore
from tokenwatch.core.fleet.groups import NO_LABEL
from tokenwatch.inputs.prometheus.api import PrometheusApi
from tokenwatch.inputs.prometheus.fleet import FleetSettings, PrometheusFleetCollector
from tokenwatch.recording.codec import dumps, loads

pytestmark = [
    pytest.mark.skipif(PROMETHEUS is None, reason="prometheus is not installed (apt-get install prometheus)"),
    pytest.mark.timeout(300),
]

INTERVAL_S = 2.0
BEFORE_S = 60
ROUNDS = 8
APPEARS_AT_ROUND = 4  # rack03's first samples: after the watch's first rounds
RACKS = (
    WrittenRack("rack01", (5_000, 5_000), site="hall-a", row="r1"),
    WrittenRack("rack02", (5_000, 5_000), site="hall-b", row="r1"),
    WrittenRack("rack03", (5_000, 5_000), site="hall-b", row="r2", starts_s=BEFORE_S + 100.0),
)


async def watched(fleet: WrittenFleet) -> list[Event]:
    """The run start and every round's events, rack03 appearing at round APPEARS_AT_ROUND."""
    appears = fleet.began + math.ceil(RACKS[2].starts_s)
    first = (math.floor(appears / INTERVAL_S) - APPEARS_AT_ROUND) * INTERVAL_S
    clock = ManualClock(0.0, wall_start=first)
    settings = FleetSettings(url=fleet.url, interval_s=INTERVAL_S, detail_interval_s=3600.0)
    collector = PrometheusFleetCollector(settings, now=clock.time, clock=clock)
    found = await collector.discover()  # the fleet as it is now: rack03 not there yet
    assert found is not None
    assert collector.racks == ["rack01", "rack02"]
    events: list[Event] = [
        RunStarted(0.0, "fleet", "Offline", found.nodes, found.gpus_per_node or 1, None, None, "live",
                   first, dict(found.meta))
    ]  # fmt: skip
    async with PrometheusApi(fleet.url) as api:
        for k in range(ROUNDS + 1):
            instant = first + k * INTERVAL_S
            clock.advance(instant + settings.settle_s - clock.wall())
            events.append(Heartbeat(clock.time()))
            events += await collector.poll(api, instant)
    return events


def site_of(core: RackCore, rack: str) -> str:
    snap = core.snapshot()
    assert snap.fleet is not None
    assert snap.fleet_groups is not None
    assert snap.fleet_groups.site is not None
    site = snap.fleet_groups.site
    return site.names[int(site.rack_group[snap.fleet.racks.index(rack)])]


def test_a_rack_that_appears_later_stands_in_its_site_live_and_replayed(tmp_path: Path) -> None:
    with written_fleet(tmp_path, RACKS, before_s=BEFORE_S) as fleet:
        events = asyncio.run(watched(fleet))
    batches = [e for e in events if isinstance(e, RackFiguresBatch)]
    assert batches[0].racks == ("rack01", "rack02")
    assert batches[-1].racks == ("rack01", "rack02", "rack03")  # it appeared
    for stream in (events, [loads(dumps(e)) for e in events]):  # live, and read back from a recording
        core = RackCore()
        for event in stream:
            core.ingest(event)
        assert site_of(core, "rack03") == "hall-b" != NO_LABEL
        assert site_of(core, "rack02") == "hall-b"
        assert site_of(core, "rack01") == "hall-a"
        snap = core.snapshot()
        assert snap.fleet_groups is not None
        assert snap.fleet_groups.row is not None
        assert "hall-b/r2" in snap.fleet_groups.row.keys
    # Said once, in the batch it first appears in.
    assert [b.places for b in batches if b.places] == [(("rack03", "hall-b", "r2"),)]
