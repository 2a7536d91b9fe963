"""A fleet whose racks stand in sites and rows, watched through a real Prometheus: one simulated fleet of
six racks (``sim --racks 6 --sites 2 --rows 2``'s places) served by tokenwatch's exporter, whose node and
GPU series carry ``site`` and ``row`` beside ``rack``, scraped every second. The fleet watch finds where
each rack stands, and its site and row groups equal the source's own figures summed over the group's
nodes; ``tokenwatch watch fleet.yaml --headless --jsonl`` writes the group rows, equal to its rack rows
summed, and a line per site.

Cost: 6 racks of 3 nodes x 4 GPUs, simulated to t = 60 s once and then held still (what the server
aggregates is exactly what the source core says); ~15 s, most of it Prometheus starting and scraping.
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest

from tests.conftest import PATIENCE_S, REPO_ROOT, cli_env, wait_until
from tests.core.fleet.test_fleet_groups import PER_RACK, check_groups, grouped_fleet
from tests.live.fleet_support import missing_engine, serve, tsdb
from tokenwatch.base.events import RackFiguresBatch, RunStarted
from tokenwatch.core import RackCore
from tokenwatch.inputs.prometheus.api import PrometheusApi
from tokenwatch.inputs.prometheus.fleet import FleetSettings, PrometheusFleetCollector
from tokenwatch.inputs.sim.rack_places import sim_rack_places

pytestmark = [pytest.mark.timeout(180)]

RACKS, SITES, ROWS = 6, 2, 2
HELD_AT_S = 60.0
PLACES = sim_rack_places(RACKS, SITES, ROWS)


@dataclasses.dataclass
class GroupedFleet:
    url: str
    source: RackCore


@pytest.fixture(scope="module")
def grouped(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GroupedFleet]:
    reason = missing_engine("prometheus")
    if reason is not None:
        pytest.skip(reason)
    source = RackCore()
    for ev in grouped_fleet(RACKS, SITES, ROWS, faults="node05:down@30s", duration_s=600.0):
        if ev.t > HELD_AT_S:
            break
        source.ingest(ev)
    server = serve(source)
    prom = tsdb("prometheus", tmp_path_factory.mktemp("groups"), [f"127.0.0.1:{server.port}"])
    prom.start()
    try:
        prom.wait_until_scraped()
        yield GroupedFleet(prom.url, source)
    finally:
        prom.stop()
        server.close()


def source_sums(source: RackCore, racks: list[str]) -> tuple[float, int]:
    """The source's own tokens/s and nodes up over the nodes of ``racks`` (its node table, summed here)."""
    snap = source.snapshot()
    fleet = snap.fleet
    assert fleet is not None
    nodes = [n for r in racks for n in fleet.nodes_of(fleet.index(r))]
    rates = snap.nodes.tokens_per_s[nodes]
    up = sum(snap.nodes.state[n] in ("up", "idle", "finished") for n in nodes)
    return float(np.nansum(rates)), int(up)


async def discovered_round(url: str) -> tuple[RunStarted, RackFiguresBatch]:
    c = PrometheusFleetCollector(FleetSettings(url=url, interval_s=1.0), now=lambda: 1.0)
    found = await c.discover()
    assert found is not None
    start = RunStarted(
        0.0,
        "fleet",
        "Offline",
        found.nodes,
        found.gpus_per_node or 1,
        None,
        None,
        "live",
        time.time(),
        dict(found.meta),
    )
    async with PrometheusApi(url) as api:
        events = await c.poll(api, time.time() - 0.5)
    batch = next(e for e in events if isinstance(e, RackFiguresBatch))
    return start, batch


def test_the_watch_finds_the_places_and_its_groups_are_the_sources_figures(grouped: GroupedFleet) -> None:
    start, batch = asyncio.run(discovered_round(grouped.url))
    assert start.meta["rack_places"] == PLACES
    core = RackCore()
    core.ingest(start)
    core.ingest(batch)
    snap = core.snapshot(1.0)
    assert snap.fleet is not None
    assert snap.fleet_groups is not None
    assert check_groups(snap.fleet, snap.fleet_groups, PLACES, "first round") == SITES + SITES * ROWS
    site = snap.fleet_groups.site
    assert site is not None
    for g, key in enumerate(site.keys):
        racks = [r for r, (s, _) in PLACES.items() if s == key]
        tokens, up = source_sums(grouped.source, racks)
        assert float(site.tokens_per_s[g]) == pytest.approx(tokens, rel=1e-9), key
        assert int(site.nodes_up[g]) == up, key
        assert int(site.nodes_total[g]) == PER_RACK * len(racks)
    assert site.nodes_up.tolist() == [8, 9]  # node05 (rack02, site01) is down


def jsonl_records(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    lines = path.read_bytes().splitlines()
    out = []
    for line in lines:
        try:
            out.append(orjson.loads(line))
        except orjson.JSONDecodeError:
            break  # a line still being written
    return out


def with_every_rack(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        r
        for r in records
        if isinstance(r.get("fleet"), list)
        and len(r["fleet"]) == RACKS
        and all(row["state"] == "up" for row in r["fleet"])
        and "fleet_groups" in r
    ]


def test_headless_watch_writes_the_group_rows_and_lines(grouped: GroupedFleet, tmp_path: Path) -> None:
    config = tmp_path / "fleet.yaml"
    config.write_text(
        "run: {name: fleet, scenario: Offline}\n"
        f"fleet: {{url: '{grouped.url}', interval: 1s, lookback: 0s}}\n"
    )
    jsonl = tmp_path / "fleet.jsonl"
    watch = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tokenwatch",
            "watch",
            str(config),
            "--headless",
            "--interval",
            "1s",
            "--jsonl",
            str(jsonl),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=cli_env(),
        cwd=REPO_ROOT,
    )
    try:
        wait_until(
            lambda: watch.poll() is not None or len(with_every_rack(jsonl_records(jsonl))) >= 2,
            "two JSONL records with every rack up and the groups",
        )
        watch.send_signal(signal.SIGINT)
        out, err = watch.communicate(timeout=PATIENCE_S)
    finally:
        if watch.poll() is None:
            watch.kill()
            watch.communicate()
    assert watch.returncode == 130, err
    records = with_every_rack(jsonl_records(jsonl))
    assert records, err
    for record in records:
        racks = {row["rack"]: row for row in record["fleet"]}
        groups = record["fleet_groups"]
        assert isinstance(groups, list)
        assert [(g["level"], g["group"]) for g in groups] == [
            ("site", "site01"),
            ("site", "site02"),
            ("row", "site01/row01"),
            ("row", "site01/row02"),
            ("row", "site02/row01"),
            ("row", "site02/row02"),
        ]
        for g in groups:
            assert g["kind"] == "group"
            members = [
                row
                for rack, row in racks.items()
                if PLACES[rack][0] == g["site"] and (g["row"] is None or PLACES[rack][1] == g["row"])
            ]
            assert g["racks"] == len(members)
            assert g["nodes_up"] == sum(row["nodes_up"] for row in members)
            tokens = sum(row["tokens_per_s"] for row in members)
            # JSON rounds each figure to 3 decimals: the sum of rounded rows within their rounding.
            assert math.isclose(g["tokens_per_s"], tokens, abs_tol=0.001 * (len(members) + 1))
    lines = out.splitlines()
    assert any(line.startswith("  site01  racks 3/3  nodes 8/9") for line in lines), out[-2000:]
    assert any(line.startswith("  site02  racks 3/3  nodes 9/9") for line in lines), out[-2000:]
