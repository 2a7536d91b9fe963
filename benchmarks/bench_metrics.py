"""/metrics render time for a 64-rack fleet (4,608 GPUs): ``python benchmarks/bench_metrics.py``.

Target: within 100 ms. Feeds minutes of ``sim --racks 64`` into a core, then times ``take_view``
(the snapshot taken on the loop thread) + ``render`` (the text exposition): the first, cold scrape,
then one scrape after each further second of the run, and HTTP scrapes of the running server. Also
the Server scenario, which adds per-node latency histograms.

Under the dashboard (target: <= 50 ms p95): ``tokenwatch sim --racks 64 --speed 60 --scenario Server
--prometheus-port PORT`` with its dashboard in a real terminal (a 200x60 tmux pane), scraped once a
second over HTTP with gzip, as Prometheus does; each scrape's wall time from request to the last byte.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import gzip
import shutil
import socket
import statistics
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_common import ROOT, add_short_option, target
from tmux_terminal import TmuxTerminal

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


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _scrape(port: int) -> bytes:
    request = urllib.request.Request(f"http://127.0.0.1:{port}/metrics", headers={"Accept-Encoding": "gzip"})
    with urllib.request.urlopen(request, timeout=30) as answer:
        body: bytes = answer.read()
        return gzip.decompress(body) if answer.headers.get("Content-Encoding") == "gzip" else body


def measure_under_dashboard(scrapes: int) -> None:
    """Scrapes once a second of a 64-rack Server sim at x60 whose dashboard runs in a tmux pane."""
    if shutil.which("tmux") is None:
        print("skipped (through a real terminal): tmux is not installed")
        return
    port = _free_port()
    command = (
        f"{sys.executable} -m tokenwatch sim --racks {RACKS} --speed 60 --scenario Server "
        f"--prometheus-port {port}"
    )
    terminal = TmuxTerminal(command, 200, 60, cwd=ROOT)
    try:
        began = time.perf_counter()
        body = b""
        while b"tokenwatch_node_generated_tokens" not in body:
            if time.perf_counter() - began > 300:
                raise SystemExit("the dashboard served no run figures within 300 s:\n" + terminal.screen())
            with contextlib.suppress(OSError):
                body = _scrape(port)
            time.sleep(0.2)
        times = []
        failed = 0
        for _ in range(scrapes):
            due = time.perf_counter() + 1.0
            start = time.perf_counter()
            try:
                body = _scrape(port)
            except OSError:  # an HTTP 500 (the core not read in time) or a timeout: a failed scrape
                failed += 1
            times.append(time.perf_counter() - start)
            time.sleep(max(0.0, due - time.perf_counter()))
    finally:
        terminal.close()
    times.sort()
    p95 = times[min(len(times) - 1, round(0.95 * (len(times) - 1)))] * 1000
    print(
        f"under the dashboard: {len(body) / 1e6:.1f} MB a body; {scrapes} scrapes at 1 s: median "
        f"{statistics.median(times) * 1000:.0f} ms, p95 {p95:.0f} ms, max {times[-1] * 1000:.0f} ms; "
        f"{failed} failed"
    )
    target(
        "/metrics, 64 racks Server, a 1-s scrape while the dashboard runs",
        f"p95 {p95:.0f} ms, {failed} of {scrapes} failed",
        "<= 50 ms",
        p95 <= 50 and not failed,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_short_option(parser)
    parser.add_argument(
        "--parts", default="render,dashboard", help="render (in process), dashboard (under a dashboard)"
    )
    args = parser.parse_args()
    short, parts = args.short, set(args.parts.split(","))
    if "render" in parts:
        measure("Offline", "Offline", 60.0 if short else 300.0, 5 if short else 20)
        measure("Server ", "Server", 60.0 if short else 120.0, 5 if short else 20)
    if "dashboard" in parts:
        measure_under_dashboard(10 if short else 60)


if __name__ == "__main__":
    main()
