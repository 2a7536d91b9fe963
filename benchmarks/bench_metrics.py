"""/metrics render time for a 64-rack fleet (4,608 GPUs): ``python benchmarks/bench_metrics.py``.

Target: within 100 ms. Feeds minutes of ``sim --racks 64`` into a core, then times ``take_view``
(the snapshot taken on the loop thread) + ``render`` (the text exposition): the first, cold scrape,
then one scrape after each further second of the run, and HTTP scrapes of the running server. Also
the Server scenario, which adds per-node latency histograms.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_common import add_short_option, target

from tokenwatch.base.events import Event, Scenario
from tokenwatch.core import RackCore
from tokenwatch.frontends.metrics import MetricsServer
from tokenwatch.frontends.metrics.exposition import render
from tokenwatch.frontends.metrics.families import take_view
from tokenwatch.inputs.sim.profile import load_profile
from tokenwatch.inputs.sim.rack_sim import RackSimulation, SimSettings

RACKS = 64


def fleet(scenario: Scenario) -> tuple[RackCore, Iterator[Event]]:
    """A core fed by ``sim --racks 64`` (1,152 nodes, 4,608 GPUs), and the rest of its event stream."""
    profile = load_profile("gb300-nvl72")
    profile = dataclasses.replace(
        profile, nodes=profile.nodes * RACKS, total_samples=profile.total_samples * RACKS
    )
    return RackCore(), RackSimulation(
        SimSettings(profile, scenario=scenario, seed=1, duration_s=600.0)
    ).events()


def feed_until(core: RackCore, events: Iterator[Event], t: float) -> None:
    for event in events:
        core.ingest(event)
        if event.t >= t:
            return


def measure(label: str, scenario: Scenario, start_s: float, scrapes: int = 20) -> None:
    """The first (cold) scrape, then one scrape after each further second of the run (as Prometheus
    scraping every second sees it), then HTTP scrapes of the running server."""
    core, events = fleet(scenario)
    feed_until(core, events, start_s)
    run = core.run
    assert run is not None
    begin = time.perf_counter()
    body = render(take_view(core))
    cold = time.perf_counter() - begin
    times = []
    for k in range(1, scrapes + 1):
        feed_until(core, events, start_s + k)
        begin = time.perf_counter()
        body = render(take_view(core))
        times.append(time.perf_counter() - begin)
    server = MetricsServer(core, 0)
    http = []
    try:
        for _ in range(10):
            begin = time.perf_counter()
            urllib.request.urlopen(f"http://127.0.0.1:{server.port}/metrics", timeout=10).read()
            http.append(time.perf_counter() - begin)
    finally:
        server.close()
    lines = body.count(b"\n")
    print(
        f"{label}: {len(run.nodes)} nodes, {run.gpus} GPUs, {len(body) / 1e6:.1f} MB, {lines:,} lines | "
        f"first scrape {cold * 1000:.0f} ms | scrape each run second: median "
        f"{statistics.median(times) * 1000:.0f} ms (max {max(times) * 1000:.0f}) | "
        f"HTTP scrape median {statistics.median(http) * 1000:.0f} ms"
    )
    median = statistics.median(times) * 1000
    target(
        f"/metrics, 64 racks {label.strip()}: a scrape each run second",
        f"median {median:.0f} ms",
        "<= 100 ms",
        median <= 100,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_short_option(parser)
    short = parser.parse_args().short
    measure("Offline", "Offline", 60.0 if short else 300.0, 5 if short else 20)
    measure("Server ", "Server", 60.0 if short else 120.0, 5 if short else 20)


if __name__ == "__main__":
    main()
