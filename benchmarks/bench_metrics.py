"""/metrics render time for a 64-rack fleet (4,608 GPUs): ``python benchmarks/bench_metrics.py``.

Target: within 100 ms. Feeds minutes of ``sim --racks 64`` into a core, then times ``take_view``
(the snapshot taken on the loop thread) + ``render`` (the text exposition): the first, cold scrape,
then one scrape after each further second of the run, and HTTP scrapes of the running server. Also
the Server scenario, which adds per-node latency histograms.

Under the dashboard (target: <= 50 ms p95): ``tokenwatch sim --racks 64 --speed 60 --scenario Server
--prometheus-port PORT`` with its dashboard in a real terminal (a 200x60 tmux pane), scraped once a
second over HTTP with gzip, as Prometheus does; each scrape's wall time from the request to the body
decompressed, split into the wait for the headers, the send and the client's decompress, beside the
same bytes served by an idle process of their own (the floor: the client's part at this load).
``--before CHECKOUT`` measures another checkout's tokenwatch first, in the same run.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import gzip
import http.client
import math
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
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


@dataclasses.dataclass(frozen=True, slots=True)
class ScrapeTimes:
    """One scrape's wall time (s), split: the request until the response's headers (the server's wait:
    its loop, its GIL, the body), the headers until the last byte (the send), the client's decompress."""

    headers: float
    transfer: float
    decompress: float

    @property
    def total(self) -> float:
        return self.headers + self.transfer + self.decompress


def _scrape(port: int) -> tuple[ScrapeTimes, bytes, bytes]:
    """(times, body, the bytes as sent) of one scrape with gzip asked, as Prometheus asks."""
    began = time.perf_counter()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("GET", "/metrics", headers={"Accept-Encoding": "gzip"})
        answer = conn.getresponse()
        headed = time.perf_counter()
        sent = answer.read()
        read = time.perf_counter()
        if answer.status != 200:
            raise OSError(f"HTTP {answer.status}")
        body = gzip.decompress(sent) if answer.getheader("Content-Encoding") == "gzip" else sent
        done = time.perf_counter()
    finally:
        conn.close()
    return ScrapeTimes(headed - began, read - headed, done - read), body, sent


# The floor: the same bytes (as sent, gzipped) from an idle process of its own, scraped right after each
# scrape of tokenwatch. What it takes is the client's part (connect, receive, decompress) at this load.
FLOOR_SERVER = """
import http.server, sys
path = sys.argv[1]
class Same(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        data = open(path, "rb").read()
        self.send_response(200)
        self.send_header("Content-Encoding", "gzip")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
    def log_message(self, *args):
        pass
http.server.HTTPServer(("127.0.0.1", int(sys.argv[2])), Same).serve_forever()
"""


def _p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def _split(label: str, times: list[ScrapeTimes]) -> str:
    parts = {
        "to the headers": [t.headers for t in times],
        "send": [t.transfer for t in times],
        "decompress": [t.decompress for t in times],
        "whole scrape": [t.total for t in times],
    }
    figures = ", ".join(
        f"{name} {statistics.median(v) * 1000:.1f} / {_p95(v) * 1000:.1f}" for name, v in parts.items()
    )
    return f"  {label} (median / p95 ms): {figures}"


def measure_under_dashboard(scrapes: int, checkout: Path = ROOT, label: str = "") -> None:
    """Scrapes once a second of a 64-rack Server sim at x60 whose dashboard runs in a tmux pane, each
    followed by a scrape of the same bytes from an idle process (the floor). ``checkout``: the tokenwatch
    to run (another checkout: the code before, measured in the same run)."""
    if shutil.which("tmux") is None:
        print("skipped (through a real terminal): tmux is not installed")
        return
    port, floor_port = _free_port(), _free_port()
    command = (
        f"{sys.executable} -m tokenwatch sim --racks {RACKS} --speed 60 --scenario Server "
        f"--prometheus-port {port}"
    )
    terminal = TmuxTerminal(command, 200, 60, cwd=checkout)
    handle, name = tempfile.mkstemp(prefix="tokenwatch-bench-", suffix=".gz")
    os.close(handle)
    same_bytes = Path(name)
    floor = subprocess.Popen(
        [sys.executable, "-c", FLOOR_SERVER, str(same_bytes), str(floor_port)], stderr=subprocess.DEVNULL
    )
    try:
        began = time.perf_counter()
        body = b""
        while b"tokenwatch_node_generated_tokens" not in body:
            if time.perf_counter() - began > 300:
                raise SystemExit("the dashboard served no run figures within 300 s:\n" + terminal.screen())
            with contextlib.suppress(OSError):
                _, body, _ = _scrape(port)
            time.sleep(0.2)
        times: list[ScrapeTimes] = []
        floors: list[ScrapeTimes] = []
        failed = 0
        for _ in range(scrapes):
            due = time.perf_counter() + 1.0
            try:
                scraped, body, sent = _scrape(port)
            except OSError:  # an HTTP 500 (the core not read in time) or a timeout: a failed scrape
                failed += 1
            else:
                times.append(scraped)
                same_bytes.write_bytes(sent)
                floors.append(_scrape(floor_port)[0])
            time.sleep(max(0.0, due - time.perf_counter()))
    finally:
        terminal.close()
        floor.kill()
        floor.wait()
        same_bytes.unlink()
    load = os.getloadavg()[0]
    totals = [t.total for t in times] or [math.inf]
    p95 = _p95(totals) * 1000
    floor_p95 = _p95([f.total for f in floors] or [math.inf]) * 1000
    print(
        f"under the dashboard{label}: {len(body) / 1e6:.1f} MB a body; {scrapes} scrapes at 1 s, load "
        f"{load:.1f}: median {statistics.median(totals) * 1000:.0f} ms, p95 {p95:.0f} ms, max "
        f"{max(totals) * 1000:.0f} ms; {failed} failed"
    )
    print(_split("tokenwatch", times))
    print(_split("the same bytes from an idle process (floor)", floors))
    target(
        f"/metrics, 64 racks Server, a 1-s scrape while the dashboard runs{label}",
        f"p95 {p95:.0f} ms, {failed} of {scrapes} failed (floor p95 {floor_p95:.0f} ms)",
        "<= 50 ms",
        p95 <= 50 and not failed,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_short_option(parser)
    parser.add_argument(
        "--parts", default="render,dashboard", help="render (in process), dashboard (under a dashboard)"
    )
    parser.add_argument(
        "--before",
        type=Path,
        metavar="CHECKOUT",
        help="also measure the dashboard part with the tokenwatch of this checkout (e.g. `git worktree add "
        "/tmp/before main`), first, in the same run",
    )
    args = parser.parse_args()
    short, parts = args.short, set(args.parts.split(","))
    if "render" in parts:
        measure("Offline", "Offline", 60.0 if short else 300.0, 5 if short else 20)
        measure("Server ", "Server", 60.0 if short else 120.0, 5 if short else 20)
    if "dashboard" in parts:
        if args.before is not None:
            measure_under_dashboard(10 if short else 60, args.before.resolve(), " (before)")
        measure_under_dashboard(10 if short else 60)


if __name__ == "__main__":
    main()
