"""A 64-rack fleet watched through Prometheus: what it costs us, and how close to the server's
own time our rounds are.

    python benchmarks/bench_fleet.py [--racks 64] [--nodes 18] [--seconds 60] [--warmup 15] [--rounds 20]
                                     [--parts watch,rounds,backfill]

1. watch: ``tokenwatch watch fleet.yaml --headless --interval 5s`` (the real CLI, one child process) of
   ``--racks`` racks of ``--nodes`` nodes x 4 GPUs, each served by its own tokenwatch exporter (all in
   one other child process, as 64 headless rack watches would serve them) and scraped every 5 s by a
   real Prometheus: the watch's CPU time over ``--seconds`` after ``--warmup`` as % of one core, and its
   RSS (peak and mean of 1-s samples). The whole-fleet node pass (alerts) runs every 30 s inside that.
   Targets: < 10 % of one core, < 300 MB.
2. rounds: against the same server, ``--rounds`` rounds of the collector (``poll``: its queries at
   once, the answers parsed, the events made), interleaved with the floor: the same queries sent at
   once over bare asyncio sockets that only read the answers' bytes. Per round kind: the rack
   figures with one rack on screen (every 5 s), and with every node and GPU (the alerting pass, every
   30 s). Target: within 20 % of the floor (medians). Prometheus' own evaluation time (``stats=all``:
   the slowest query's ``execTotalTime``, all sent at once) is shown too.
3. backfill: an 80-minute run of the fleet's node series (15-s scrapes) written as OpenMetrics, made into
   TSDB blocks by ``promtool``, served by a second Prometheus: the time to find the run's start, fetch
   its history on the screen's step and ingest it into a core. Target: < 5 s.

All parts share this machine's cores with Prometheus and the exporters, so each figure says what ran
beside it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlencode, urlsplit

import orjson
import psutil

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "tests" / "live"), str(REPO / "benchmarks")]

from bench_common import add_short_option, target  # noqa: E402
from fleet_support import Prometheus, rack_core, rack_events, rack_name, serve  # noqa: E402

from tokenwatch.base.events import RunStarted  # noqa: E402
from tokenwatch.core import RackCore  # noqa: E402
from tokenwatch.inputs.live.backlog import Backfill  # noqa: E402
from tokenwatch.inputs.live.history import merged, run_clock  # noqa: E402
from tokenwatch.inputs.prometheus.api import PrometheusApi  # noqa: E402
from tokenwatch.inputs.prometheus.fleet import FleetSettings, PrometheusFleetCollector  # noqa: E402

FAULTS = {3: "node02:throttle@60s", 11: "node05:down@100s"}


# ------------------------------------------------------------------------------------------ exporters
def serve_racks(racks: int, nodes: int, ports_file: Path) -> None:
    """(child process) ``racks`` simulated racks, held at t = 300 s, each on its own exporter."""
    cores = [rack_core(rack_events(r, nodes, FAULTS.get(r, ""), until_s=300.0), 300.0) for r in range(racks)]
    servers = [serve(core) for core in cores]
    ports_file.write_text("\n".join(str(s.port) for s in servers))
    while True:  # until terminated
        time.sleep(3600)


def start_exporters(tmp: Path, racks: int, nodes: int) -> tuple[subprocess.Popen[bytes], list[int]]:
    ports_file = tmp / "ports"
    proc = subprocess.Popen(
        [
            sys.executable,
            __file__,
            "--serve-racks",
            str(racks),
            "--nodes",
            str(nodes),
            "--ports-file",
            str(ports_file),
        ],
        cwd=REPO,
    )
    deadline = time.monotonic() + 120
    while not ports_file.exists() or not ports_file.read_text():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError("the exporters did not start")
        time.sleep(0.2)
    return proc, [int(p) for p in ports_file.read_text().split()]


def scrape_every(prom: Prometheus, seconds: int) -> None:
    path = prom.tmp / "prometheus.yml"
    text = path.read_text().replace("scrape_interval: 1s", f"scrape_interval: {seconds}s")
    # 64 exporters in one process on a shared machine can take over the tests' 900 ms to answer.
    path.write_text(text.replace("scrape_timeout: 900ms", f"scrape_timeout: {seconds * 0.8:g}s"))


# ------------------------------------------------------------------------------------------ part 1
def part_watch(tmp: Path, url: str, seconds: float, warmup: float) -> None:
    config = tmp / "fleet.yaml"
    config.write_text(
        f"run: {{name: fleet, scenario: Offline}}\nfleet: {{url: '{url}', interval: 5s, lookback: 0s}}\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "tokenwatch", "watch", str(config), "--headless", "--interval", "5s",
         "--stop-after", f"{warmup + seconds + 10:g}s"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=REPO,
    )  # fmt: skip
    ps = psutil.Process(proc.pid)
    time.sleep(warmup)
    cpu0, wall0 = sum(ps.cpu_times()[:2]), time.monotonic()
    rss: list[float] = []
    while time.monotonic() - wall0 < seconds:
        rss.append(ps.memory_info().rss / 2**20)
        time.sleep(1.0)
    cpu1, wall1 = sum(ps.cpu_times()[:2]), time.monotonic()
    _, err = proc.communicate(timeout=60)
    if proc.returncode != 0:
        print(err.decode()[-2000:])
    share = 100.0 * (cpu1 - cpu0) / (wall1 - wall0)
    what = f"watch of the fleet, 5-s interval, over {wall1 - wall0:.0f} s"
    target(f"{what}: CPU", f"{share:.1f} % of one core", "< 10 % of one core", share < 10)
    target(
        f"{what}: RSS",
        f"peak {max(rss):.0f} MB, mean {statistics.mean(rss):.0f} MB",
        "< 300 MB",
        max(rss) < 300,
    )


# ------------------------------------------------------------------------------------------ part 2
async def raw_get(url: str, promql: str, at: float, stats: bool = False) -> bytes:
    """One GET on a fresh connection with nothing but asyncio's streams: the answer's bytes, unparsed
    (the floor: what the server takes to answer, plus loopback TCP)."""
    parts = urlsplit(url)
    params = {"query": promql, "time": f"{at:.3f}"} | ({"stats": "all"} if stats else {})
    reader, writer = await asyncio.open_connection(parts.hostname, parts.port)
    writer.write(f"GET /api/v1/query?{urlencode(params)} HTTP/1.0\r\nHost: {parts.netloc}\r\n\r\n".encode())
    await writer.drain()
    body = await reader.read()
    writer.close()
    return body.split(b"\r\n\r\n", 1)[1]


async def floor_round(url: str, queries: list[str], at: float) -> float:
    began = time.perf_counter()
    await asyncio.gather(*(raw_get(url, q, at) for q in queries))
    return time.perf_counter() - began


async def server_eval(url: str, queries: list[str], at: float) -> float:
    """Prometheus' own evaluation of the round (``stats=all``): its slowest query's execTotalTime."""
    bodies = await asyncio.gather(*(raw_get(url, q, at, stats=True) for q in queries))
    return max(float(orjson.loads(b)["data"]["stats"]["timings"]["execTotalTime"]) for b in bodies)


async def part_rounds(url: str, rounds: int) -> None:
    c = PrometheusFleetCollector(FleetSettings(url=url, interval_s=5.0), now=time.monotonic)
    found = await c.discover()
    assert found is not None
    c.focus.show({rack_name(0)})
    figures = [c._q(q) for q in c.templates.values()]
    kinds = {
        "rack figures + one rack on screen (every 5 s)": False,
        "rack figures + every node and GPU (alerts, every 30 s)": True,
    }
    async with PrometheusApi(url) as api:
        for kind, detail in kinds.items():
            ours, floors, evals = [], [], []
            asked = figures + list(c._node_queries(None if detail else c.focus.racks).values())
            for _ in range(rounds):
                at = math.floor(time.time() / 5.0) * 5.0
                c.alerting_pass.counted_from = -math.inf if detail else at
                floors.append(await floor_round(url, asked, at))
                began = time.perf_counter()
                await c.poll(api, at)
                ours.append(time.perf_counter() - began)
                evals.append(await server_eval(url, asked, at))
            mine, floor = statistics.median(ours), statistics.median(floors)
            evaluation = statistics.median(evals)
            p95 = sorted(ours)[int(0.95 * (len(ours) - 1))]
            target(
                f"round, {kind} ({len(asked)} queries at once) against the bare-socket floor",
                f"ours {mine * 1000:.1f} ms median (p95 {p95 * 1000:.1f}), floor {floor * 1000:.1f} ms -> "
                f"{mine / floor:.2f}x; Prometheus' own evaluation {evaluation * 1000:.1f} ms -> "
                f"{mine / evaluation:.2f}x",
                "<= 1.2x the floor",
                mine / floor <= 1.2,
            )


# ------------------------------------------------------------------------------------------ part 3
def write_history(path: Path, racks: int, nodes: int, minutes: float, step_s: float, end: float) -> float:
    """80 minutes of every node's series as the racks' exporters serve them (the series the rack figures
    are made of), ending at ``end``; returns when the run began."""
    points = int(minutes * 60 / step_s) + 1
    begin = end - (points - 1) * step_s
    names = [(rack_name(r), f"node{n + 1:02d}") for r in range(racks) for n in range(nodes)]
    rates = [14_000.0 + 37.0 * ((7 * i) % 53) for i in range(len(names))]
    times = [begin + k * step_s for k in range(points)]
    with open(path, "w") as out:

        def family(name: str, kind: str, value: Callable[[int, int], float], extra: str = "") -> None:
            out.write(f"# TYPE {name} {kind}\n")
            sample = f"{name}_total" if kind == "counter" else name
            for i, (rack, node) in enumerate(names):
                labels = f'node="{node}",rack="{rack}"{extra}'
                out.writelines(f"{sample}{{{labels}}} {value(i, k)} {t:.3f}\n" for k, t in enumerate(times))

        family("tokenwatch_node_up", "gauge", lambda _i, _k: 1)
        family("tokenwatch_node_status", "gauge", lambda _i, _k: 1, ',status="up"')
        family("tokenwatch_node_tokens_per_second", "gauge", lambda i, k: rates[i] * (1 + 0.01 * math.sin(k)))
        family("tokenwatch_node_generated_tokens", "counter", lambda i, k: int(rates[i] * k * step_s))
        family("tokenwatch_node_measured_tokens_per_second", "gauge", lambda i, _k: rates[i])
        family("tokenwatch_node_power_watts", "gauge", lambda i, _k: 4 * 1050.0 + i % 17)
        family("tokenwatch_node_gpus", "gauge", lambda _i, _k: 4)
        family("tokenwatch_node_throttling", "gauge", lambda i, _k: int(i % 97 == 0))
        out.write("# EOF\n")
    return begin


async def timed_backfill(url: str) -> tuple[float, int]:
    began = time.perf_counter()
    c = PrometheusFleetCollector(FleetSettings(url=url, interval_s=5.0, timeout_s=30.0), now=lambda: 0.0)
    found = await c.discover()
    assert found is not None
    watch_wall = time.time()
    start = await c.run_start(watch_wall)
    assert start is not None
    events = await c.history(start, watch_wall)
    clock = run_clock(watch_wall, [(c.name, start)])
    core = RackCore()
    core.ingest(
        RunStarted(0.0, "fleet", "Offline", found.nodes, 4, None, None, "live", start, dict(found.meta))
    )
    for event in merged([Backfill(c.name, placed=events)], clock):
        core.ingest(event)
    core.snapshot()
    return time.perf_counter() - began, len(events)


def part_backfill(tmp: Path, racks: int, nodes: int) -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        print("backfill: promtool is not installed, skipped")
        return
    source = tmp / "history.om"
    began = time.perf_counter()
    write_history(source, racks, nodes, 80.0, 15.0, time.time() - 30.0)
    data = tmp / "history-data"
    subprocess.run([promtool, "tsdb", "create-blocks-from", "openmetrics", str(source), str(data)],
                   check=True, capture_output=True)  # fmt: skip
    source.unlink()
    print(
        f"(backfill: 80 minutes of {racks * nodes} nodes' series made into blocks in "
        f"{time.perf_counter() - began:.0f} s)"
    )
    prom_dir = tmp / "history-prom"
    prom_dir.mkdir()
    prom = Prometheus(prom_dir, [])
    (prom_dir / "prometheus.yml").write_text("global:\n  scrape_interval: 1m\n")
    prom.tmp = prom_dir
    (prom_dir / "data").symlink_to(data)
    prom.start()
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            with (
                contextlib.suppress(OSError),
                urllib.request.urlopen(f"{prom.url}/-/ready", timeout=5) as answer,
            ):
                if answer.status == 200:
                    break
            time.sleep(0.5)
        times = []
        for _ in range(3):
            seconds, count = asyncio.run(timed_backfill(prom.url))
            times.append(seconds)
        target(
            f"backfill of an 80-minute run, {racks} racks",
            f"{min(times):.2f} s best of 3 ({', '.join(f'{t:.2f}' for t in times)}; "
            f"{count} rack-figure batches)",
            "< 5 s",
            min(times) < 5,
        )
    finally:
        prom.stop()


# ------------------------------------------------------------------------------------------ main
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--racks", type=int, default=64)
    parser.add_argument("--nodes", type=int, default=18)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--warmup", type=float, default=15.0)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--parts", default="watch,rounds,backfill")
    parser.add_argument("--serve-racks", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--ports-file", type=Path, help=argparse.SUPPRESS)
    add_short_option(parser)
    args = parser.parse_args()
    if args.short:
        args.racks, args.seconds, args.warmup, args.rounds = 8, 10.0, 8.0, 3
    if args.serve_racks:
        serve_racks(args.serve_racks, args.nodes, args.ports_file)
        return
    parts = set(args.parts.split(","))
    print(f"{args.racks} racks x {args.nodes} nodes x 4 GPUs; load average {os.getloadavg()[0]:.2f}")
    with tempfile.TemporaryDirectory(prefix="bench-fleet-") as name:
        tmp = Path(name)
        if parts & {"watch", "rounds"}:
            exporters, ports = start_exporters(tmp, args.racks, args.nodes)
            prom_dir = tmp / "prom"
            prom_dir.mkdir()
            prom = Prometheus(prom_dir, [f"127.0.0.1:{p}" for p in ports])
            scrape_every(prom, 5)
            prom.start()
            try:
                prom.wait_until_scraped(timeout_s=120)
                time.sleep(6)  # a second 5-s scrape of every rack
                if "watch" in parts:
                    part_watch(tmp, prom.url, args.seconds, args.warmup)
                if "rounds" in parts:
                    asyncio.run(part_rounds(prom.url, args.rounds))
            finally:
                prom.stop()
                exporters.terminate()
                exporters.wait()
        if "backfill" in parts:
            part_backfill(tmp, args.racks, args.nodes)


if __name__ == "__main__":
    main()
