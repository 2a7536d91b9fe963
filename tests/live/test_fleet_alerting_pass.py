"""The fleet's alerting pass (every node of every rack, read through the server every
``detail_interval``) is not lost when its queries fail.

Counted as done when asked, a pass whose answers timed out on a loaded server left every node unread
until the next pass, an hour later with a long interval: the drill-down's nodes had no reading to form
a rate from, and the rules judged nothing. A pass whose node queries fail is asked again a round
later, then two, four... (a server that keeps refusing it is not asked for the whole fleet every
round), and once answered the next is a detail interval on. A pass answered without some rack's nodes
(that rack's scrape failed at its instant) asks that rack alone again on the same schedule.

A real Prometheus holds a written fleet; a proxy in front of it refuses the node queries (503) of the
instants it is told to, or answers them without one rack's series, passing everything else.
"""

from __future__ import annotations

import asyncio
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from access_proxy import AccessProxy
from aiohttp import web
from fleet_support import PROMETHEUS
from written_fleet import WrittenFleet, WrittenRack, written_fleet

from tokenwatch.base.clock import ManualClock
from tokenwatch.base.events import GpuBatch, ProgressBatch
from tokenwatch.inputs.prometheus.api import PrometheusApi
from tokenwatch.inputs.prometheus.fleet import FleetSettings, PrometheusFleetCollector
from tokenwatch.inputs.prometheus.fleet_node_queries import FLEET_NODE_LABEL

pytestmark = [
    pytest.mark.skipif(PROMETHEUS is None, reason="prometheus is not installed (apt-get install prometheus)"),
    pytest.mark.timeout(300),
]

INTERVAL_S = 2.0
RACKS = (
    WrittenRack("rack01", (5_000, 5_130, 4_870, 5_260)),
    WrittenRack("rack02", (6_000, 5_900, 6_100, 6_050)),
)
NODES = sum(len(rack.rates) for rack in RACKS)


# mypy cannot follow tests/live's bare-name imports (pyproject): AccessProxy reaches it as Any.
@dataclass
class RefusingProxy(AccessProxy):  # type: ignore[misc]
    """Answers 503 to the per-node queries (the node reader's, each joined into one fleet node label)
    asked for one of ``refused_at`` (Unix instants); passes everything else."""

    refused_at: set[float] = field(default_factory=set)
    refused: int = 0

    async def _forward(self, request: web.Request) -> web.Response:
        at = request.query.get("time")
        if at is not None and float(at) in self.refused_at and "label_join" in request.query.get("query", ""):
            self.refused += 1
            return web.Response(status=503, text="overloaded")
        answer: web.Response = await super()._forward(request)
        return answer


@dataclass
class HidingProxy(AccessProxy):  # type: ignore[misc]
    """Answers the per-node queries asked at one of ``hidden_at`` (Unix instants) without ``rack``'s
    series, as a server answers after that rack's scrape failed (its stale markers); passes the rest."""

    rack: str = ""
    hidden_at: set[float] = field(default_factory=set)
    hidden: int = 0

    async def _forward(self, request: web.Request) -> web.Response:
        answer: web.Response = await super()._forward(request)
        at = request.query.get("time")
        if (
            at is None
            or float(at) not in self.hidden_at
            or "label_join" not in request.query.get("query", "")
        ):
            return answer
        assert isinstance(answer.body, bytes)
        doc = json.loads(answer.body)
        result = doc["data"]["result"]
        kept = [r for r in result if not r["metric"].get(FLEET_NODE_LABEL, "").startswith(self.rack + "/")]
        self.hidden += len(result) - len(kept)
        doc["data"]["result"] = kept
        return web.Response(
            status=answer.status, body=json.dumps(doc).encode(), content_type="application/json"
        )


async def nodes_read_per_round(fleet: WrittenFleet, proxy: AccessProxy, rounds: int) -> list[set[int]]:
    """Each round from the first (no rack on screen, the pass due at once, then an hour on): the node
    indices whose counters and GPUs the round read."""
    first = (math.floor(fleet.began / INTERVAL_S) + 40) * INTERVAL_S  # inside the written history
    clock = ManualClock(0.0, wall_start=first - 1.0)
    settings = FleetSettings(url=proxy.url, interval_s=INTERVAL_S, detail_interval_s=3600.0)
    collector = PrometheusFleetCollector(settings, now=clock.time, clock=clock)
    assert await collector.discover() is not None
    read: list[set[int]] = []
    async with PrometheusApi(proxy.url) as api:
        for k in range(rounds):
            instant = first + k * INTERVAL_S
            clock.advance(instant + 0.5 - clock.wall())
            events = await collector.poll(api, instant)
            progress = {int(i) for e in events if isinstance(e, ProgressBatch) for i in e.node_index}
            gpus = {int(i) for e in events if isinstance(e, GpuBatch) for i in e.node_index}
            assert progress == gpus or not gpus, k  # counters and GPUs come in the same pass
            read.append(progress)
    return read


def test_a_failed_alerting_pass_is_asked_again_next_round_then_backing_off(tmp_path: Path) -> None:
    every = set(range(NODES))
    with written_fleet(tmp_path, RACKS) as fleet:
        first = (math.floor(fleet.began / INTERVAL_S) + 40) * INTERVAL_S
        # The first two rounds' passes are refused: asked again at round 1 (one interval on), then at
        # round 3 (two intervals after the second failure), which is answered.
        with RefusingProxy(fleet.url, {}, refused_at={first, first + INTERVAL_S}) as proxy:
            read = asyncio.run(nodes_read_per_round(fleet, proxy, 6))
            assert proxy.refused > 0
    assert read == [set(), set(), set(), every, set(), set()]


def test_an_answered_alerting_pass_waits_its_detail_interval(tmp_path: Path) -> None:
    every = set(range(NODES))
    with written_fleet(tmp_path, RACKS) as fleet, RefusingProxy(fleet.url, {}) as proxy:
        read = asyncio.run(nodes_read_per_round(fleet, proxy, 4))
    assert read == [every, set(), set(), set()]


def test_a_rack_an_answered_pass_left_unread_is_asked_again_alone_then_backing_off(tmp_path: Path) -> None:
    """The server answers the pass without rack02's nodes (its scrape failed at that instant), and the
    round after it too: rack02 alone is asked a round after the pass, then two rounds after that, when it
    is read; then nothing until the next pass."""
    rack01 = set(range(len(RACKS[0].rates)))
    rack02 = set(range(len(RACKS[0].rates), NODES))
    with written_fleet(tmp_path, RACKS) as fleet:
        first = (math.floor(fleet.began / INTERVAL_S) + 40) * INTERVAL_S
        hidden = {first, first + INTERVAL_S}
        with HidingProxy(fleet.url, {}, rack="rack02", hidden_at=hidden) as proxy:
            read = asyncio.run(nodes_read_per_round(fleet, proxy, 6))
            assert proxy.hidden > 0
    assert read == [rack01, set(), set(), rack02, set(), set()]
