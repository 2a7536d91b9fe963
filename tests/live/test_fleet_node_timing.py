"""A fleet's drill-down reads its nodes' counters through the server at grid instants; the rates formed
of them are the rack's figure on the board however late the answers arrive.

Under load the answers come late, and by different amounts: stamped when they arrived, two rounds'
readings lay closer together (or further apart) than the instants they measure, and the drill-down's
nodes summed to ~1.7 M tok/s where the board said 974 k for the same rack. Here a fleet written ahead
into a real Prometheus (:mod:`written_fleet`: counters exactly linear at every whole second) is read
round by round with the collector's clock set to each answer's arrival, late by a different amount each
round; at every round the drill-down's node rates are the written ones and sum to the board's row. Then
``tokenwatch watch --headless --rack`` reads it through a proxy that answers every other instant 1.5 s
late: every JSONL line's nodes sum to its rack figure, and every line says that figure.
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
from pathlib import Path

import numpy as np
import orjson
import pytest
from fleet_support import PROMETHEUS
from late_proxy import LateProxy
from written_fleet import WrittenFleet, WrittenRack, written_fleet

from tests.conftest import run_tokenwatch
from tokenwatch.base.clock import ManualClock
from tokenwatch.base.events import Heartbeat, RunStarted
from tokenwatch.base.formatting import DASH
from tokenwatch.core import RackCore
from tokenwatch.inputs.prometheus.api import PrometheusApi
from tokenwatch.inputs.prometheus.fleet import FleetSettings, PrometheusFleetCollector
from tokenwatch.recording import read_events

pytestmark = [
    pytest.mark.skipif(PROMETHEUS is None, reason="prometheus is not installed (apt-get install prometheus)"),
    pytest.mark.timeout(300),
]

INTERVAL_S = 2.0
SETTLE_S = 0.5
RACKS = (
    WrittenRack("rack01", (5_000, 5_130, 4_870, 5_260)),
    WrittenRack("rack02", (6_000, 5_900, 6_100, 6_050)),
)
# How long after it was due each round's answers arrive (s): a loaded machine's pattern, where one slow
# round is followed by one on time (the next instant is already due when the slow one ends).
LATE_S = (1.4, 0.05, 1.9, 0.0, 0.3, 1.6, 0.1, 1.2, 0.0, 0.8, 1.7, 0.2)


# Seconds (of every MISS_CYCLE_S after the fleet began) with no scrape of rack01: the first round's
# instant (3 or 4 s after) has its own sample, later ones a sample 0, 1 or 2 s old.
MISSED = (0, 1, 5)
# How late the rounds of the missed scrapes answer: at most 1 s, so a reading is never stamped more than
# MAX_READING_LAG_S (4 s) before its round's answers (settle 0.5 + a sample 2 s old + 1 s late).
LATE_WITH_MISSED_S = tuple(min(late, 1.0) for late in LATE_S)


async def rounds(
    fleet: WrittenFleet, late_s: tuple[float, ...] = LATE_S
) -> list[tuple[float, dict[str, float], float]]:
    """Each round from the run's start, answered ``late_s`` late: (run time, the drill-down's node rates
    of rack01, the board's rack01 tokens/s)."""
    first = (math.floor(fleet.began / INTERVAL_S) + 2) * INTERVAL_S  # a whole second the fleet has written
    start_wall = first - 1.0
    clock = ManualClock(0.0, wall_start=start_wall)  # run time = wall time since the run's start
    settings = FleetSettings(
        url=fleet.url, interval_s=INTERVAL_S, detail_interval_s=3600.0, settle_s=SETTLE_S
    )
    collector = PrometheusFleetCollector(settings, now=clock.time, clock=clock)
    found = await collector.discover()
    assert found is not None
    core = RackCore()
    core.ingest(
        RunStarted(0.0, "fleet", "Offline", found.nodes, found.gpus_per_node or 1, None, None, "live",
                   start_wall, dict(found.meta))
    )  # fmt: skip
    collector.focus.show({"rack01"})
    seen: list[tuple[float, dict[str, float], float]] = []
    async with PrometheusApi(fleet.url) as api:
        for k, late in enumerate(late_s):
            instant = first + k * INTERVAL_S
            clock.advance(instant + SETTLE_S + late - clock.wall())  # the answers arrive now
            events = await collector.poll(api, instant)
            core.ingest(Heartbeat(clock.time()))
            for event in events:
                core.ingest(event)
            drill = core.rack_snapshot("rack01")
            assert drill is not None
            nodes = drill.nodes
            rates = {name: float(rate) for name, rate in zip(nodes.names, nodes.tokens_per_s, strict=True)}
            table = core.snapshot().fleet
            assert table is not None
            seen.append((clock.time(), rates, float(table.tokens_per_s[table.racks.index("rack01")])))
    return seen


def test_node_rates_sum_to_the_racks_figure_however_late_the_answers(tmp_path: Path) -> None:
    with written_fleet(tmp_path, RACKS) as fleet:
        seen = asyncio.run(rounds(fleet))
    assert_rates_are_written(seen)


def test_node_rates_sum_to_the_racks_figure_however_the_scrapes_fall(tmp_path: Path) -> None:
    """A loaded server's scrapes come late or not at all: a round's last sample of a node is 0, 1 or 2 s
    old, and a different age each round. Stamped with the rounds' times (2 s apart), two readings held
    1 to 4 s of growth and the nodes' rates were half to twice their written ones; stamped with their
    samples' scrape times, each is its written rate and they sum to the board's row."""
    racks = (dataclasses.replace(RACKS[0], missed=MISSED), RACKS[1])
    with written_fleet(tmp_path, racks) as fleet:
        seen = asyncio.run(rounds(fleet, LATE_WITH_MISSED_S))
    assert_rates_are_written(seen)


def assert_rates_are_written(seen: list[tuple[float, dict[str, float], float]]) -> None:
    """At every round from the second, rack01's node rates are the written ones and sum to its row."""
    written = {f"rack01/{RACKS[0].node(n)}": float(rate) for n, rate in enumerate(RACKS[0].rates)}
    assert all(row == sum(RACKS[0].rates) for _, _, row in seen)  # the board: the server's sum
    judged = 0
    for t, rates, row in seen[1:]:  # from the second round, two readings bound every node's rate
        assert set(rates) == set(written), t
        got = np.array([rates[name] for name in written])
        want = np.array(list(written.values()))
        assert got == pytest.approx(want, rel=1e-9), (t, rates)
        assert got.sum() == pytest.approx(row, rel=1e-9), t
        judged += 1
    assert judged == len(seen) - 1 == len(LATE_S) - 1


def test_headless_rack_lines_and_jsonl_through_a_server_that_answers_late(tmp_path: Path) -> None:
    with written_fleet(tmp_path, RACKS) as fleet, LateProxy(fleet.url, {}) as proxy:
        config = tmp_path / "fleet.yaml"
        config.write_text(
            "run: {name: fleet, scenario: Offline, duration: 80m}\n"
            f"fleet: {{url: '{proxy.url}', interval: 2s, detail_interval: 10s, lookback: 1h}}\n"
        )
        jsonl, recording = tmp_path / "rack.jsonl", tmp_path / "fleet.jsonl.zst"
        watch = run_tokenwatch(
            "watch", str(config), "--headless", "--rack", "rack01", "--interval", "2s", "--stop-after", "24s",
            "--jsonl", str(jsonl), "--record", str(recording), timeout=300,
        )  # fmt: skip
        assert watch.returncode == 0, watch.stderr
        assert proxy.delayed > 0  # the rounds were late
    rack_sum = float(sum(RACKS[0].rates))
    records = [orjson.loads(line) for line in jsonl.read_bytes().splitlines() if line.strip()][:-1]
    started = read_events(recording)[0][0]
    assert isinstance(started, RunStarted)
    attached = started.meta["attached_at_s"]  # the run's history before it has the rack figures alone
    summed = 0
    for record in records:
        agg = record["aggregate"]
        if agg["tokens_per_s"] is None:  # no round answered lately (a loaded machine): the rack is stale
            continue
        assert agg["tokens_per_s"] == rack_sum, record["t"]  # the drill-down's figure is the board's row
        rates = [n["tokens_per_s"] for n in record["nodes"]]
        if record["t"] >= attached and all(rate is not None for rate in rates):
            # Each rate is rounded to 0.001 in the JSON: the sum, to half that per node.
            assert abs(sum(rates) - rack_sum) <= 0.0005 * len(rates) + 1e-9, (record["t"], rates)
            summed += 1
    assert summed >= 5
    # The human lines say the rack's figure, the same at every line.
    lines = [line for line in watch.stdout.splitlines() if " tok/s " in line and "run figures" not in line]
    assert len(lines) >= 5
    for line in lines:
        shown = line.split(" tok/s")[0].split()[-1]
        assert shown == DASH or float(shown.replace(",", "")) == rack_sum, line
