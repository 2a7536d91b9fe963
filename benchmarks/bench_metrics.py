"""/metrics render time for a 64-rack fleet (4,608 GPUs): ``python benchmarks/bench_metrics.py``.

Target: within 100 ms. Feeds 5 simulated minutes of ``sim --racks 64`` into a core, then times
``take_view`` (the snapshot taken on the loop thread) + ``render`` (the text exposition), and a
full HTTP scrape of the running server. Also the Server scenario, which adds per-node histograms.
"""

from __future__ import annotations

import dataclasses
import statistics
import sys
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tokenwatch.core import RackCore
from tokenwatch.exporter import MetricsServer
from tokenwatch.exporter.exposition import render
from tokenwatch.exporter.families import take_view
from tokenwatch.sim.profile import load_profile
from tokenwatch.sim.rack_sim import RackSimulation, SimSettings

RACKS = 64


def fleet_core(scenario: str, seconds: float) -> RackCore:
    profile = load_profile("gb300-nvl72")
    profile = dataclasses.replace(
        profile, nodes=profile.nodes * RACKS, total_samples=profile.total_samples * RACKS
    )
    core = RackCore()
    for event in RackSimulation(SimSettings(profile, scenario=scenario, seed=1, duration_s=600.0)).events():
        if event.t > seconds:
            break
        if core.started:
            core.advance(event.t)
        core.ingest(event)
    return core


def measure(label: str, core: RackCore) -> None:
    run = core.run
    assert run is not None
    times, size = [], 0
    for _ in range(20):
        start = time.perf_counter()
        body = render(take_view(core))
        times.append(time.perf_counter() - start)
        size = len(body)
    server = MetricsServer(core, 0)
    http = []
    try:
        for _ in range(10):
            start = time.perf_counter()
            urllib.request.urlopen(f"http://127.0.0.1:{server.port}/metrics", timeout=10).read()
            http.append(time.perf_counter() - start)
    finally:
        server.close()
    lines = body.count(b"\n")
    print(
        f"{label}: {len(run.nodes)} nodes, {run.gpus} GPUs, {size / 1e6:.1f} MB, {lines:,} lines | "
        f"view+render median {statistics.median(times) * 1000:.0f} ms (min {min(times) * 1000:.0f}) | "
        f"HTTP scrape median {statistics.median(http) * 1000:.0f} ms"
    )


def main() -> None:
    measure("Offline", fleet_core("Offline", 300.0))
    measure("Server ", fleet_core("Server", 120.0))


if __name__ == "__main__":
    main()
