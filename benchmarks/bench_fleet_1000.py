"""A 1,000-rack fleet (18 nodes x 4 GPUs a rack: 72,000 GPUs) watched through a real VictoriaMetrics.

    python benchmarks/bench_fleet_1000.py [--racks 1000] [--nodes 18] [--minutes 80] [--rounds 10]
                                          [--gpu-minutes 3] [--short] [--started]
                                          [--recorded-only]
                                          [--compare CHECKOUT [--pairs N]]

1. The history: every node's series as the racks' tokenwatch exporters serve them (``site``, ``row``,
   ``rack`` and ``node`` labels; a few nodes down, a few throttling), one point every 30 s over
   ``--minutes``, and every GPU's series over the last ``--gpu-minutes`` (what the alerting pass's instant
   queries read), written into a real ``victoria-metrics`` through its import API (``/api/v1/import``,
   JSON lines). The recorded series of ``tokenwatch rules --recording`` are made as the rules would make
   them: the server's own answers to the rules' expressions every 15 s, imported under the rules' names.
2. The watch (in a child process, so its RSS is the watch's alone): the backfill of the whole run
   (discover the fleet, find the run's start, ``query_range`` of the rack figures, every batch into a
   core), target < 10 s; the first alerting pass into that core (every node and GPU read: the series a
   live watch fills from then on); then rounds at the history's last instant, each against the floor
   of the same queries sent at once on bare sockets (what the server itself takes, plus loopback TCP):
   the rack figures from the recorded series with one rack on screen (every interval), the same from
   the raw queries, and the alerting pass (every node and GPU, every 30 s). Target: each within 20 % of
   the floor (medians). The watch's peak RSS, target < 500 MB (after the backfill, after the first
   alerting pass into its core, and at the end).
3. The alerting pass alone, in a process of its own that holds no core and read no history: the peak RSS
   it adds and its CPU (what reading 72,000 GPUs' answers takes, with no freed heap of a backfill to reuse).

``--started``: also a watch started with the run (not attached at its end), in a process of its own:
no backfill, a round every 5 s with one rack on screen and two alerting passes 30 s apart, each into
its core as the live watch feeds it; its peak RSS after the second pass, target < 500 MB (the core's
per-node rings and series, filled by the passes, on top of the answers read).

``--recorded-only``: of the rounds, only the live board's every-5-s round (the rack figures from the
recorded series, one rack on screen): the raw and alerting rounds take minutes at 1,000 racks.

``--short``: 20 racks x 10 minutes, a quick pass that only shows the script still runs. ``--compare
CHECKOUT``: the watch part also run with another checkout's tokenwatch (such as ``git worktree add --detach
/tmp/base main``) against the same server, the two alternately ``--pairs`` times: the code before and
after in one session, at one load. ``--rounds 0`` leaves out the rounds (the backfill and the first
alerting pass only).
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlencode

import orjson

REPO = Path(__file__).resolve().parent.parent
# The tokenwatch the watch part runs: this checkout's, or the one ``--compare`` names (its child's).
CODE = Path(os.environ.get("BENCH_FLEET_CODE", REPO))
sys.path[:0] = [str(CODE), str(REPO / "tests" / "live"), str(REPO / "benchmarks")]

from bench_common import add_short_option, target  # noqa: E402

import tokenwatch  # noqa: E402  (first: bench_fleet puts this checkout first on the path)
from tokenwatch.base.events import GpuBatch, Notice, RunStarted  # noqa: E402
from tokenwatch.core import RackCore  # noqa: E402
from tokenwatch.inputs.live.backlog import Backfill  # noqa: E402
from tokenwatch.inputs.live.history import merged, run_clock  # noqa: E402
from tokenwatch.inputs.prometheus.api import PrometheusApi  # noqa: E402
from tokenwatch.inputs.prometheus.fleet import FleetSettings, PrometheusFleetCollector  # noqa: E402
from tokenwatch.sources.fleet_rules import RuleSet  # noqa: E402

from bench_fleet import floor_round  # noqa: E402  isort: skip

SCRAPE_S = 30.0  # the history's points; the rules' evaluations (the recorded series) every 15 s
RULES_S = 15.0
INTERVAL_S = 5.0  # the watch's
GPUS = 4
RACKS_PER_SITE, RACKS_PER_ROW = 250, 10
GPU_FAMILIES = {  # the exporter's per-GPU families (tokenwatch's units) and a steady value
    "tokenwatch_gpu_power_watts": 1050.0,
    "tokenwatch_gpu_power_limit_watts": 1400.0,
    "tokenwatch_gpu_sm_clock_hertz": 1.98e9,
    "tokenwatch_gpu_memory_clock_hertz": 3.99e9,
    "tokenwatch_gpu_hbm_used_bytes": 2.5e11,
    "tokenwatch_gpu_hbm_total_bytes": 2.88e11,
    "tokenwatch_gpu_hbm_busy_ratio": 0.61,
    "tokenwatch_gpu_utilization_ratio": 0.97,
    "tokenwatch_gpu_temperature_celsius": 71.0,
    "tokenwatch_gpu_throttle_reasons": 0.0,
}


# ----------------------------------------------------------------------------------------- the server
class Victoria:
    """A real VictoriaMetrics on loopback, storing under ``tmp``."""

    def __init__(self, tmp: Path) -> None:
        exe = shutil.which("victoria-metrics")
        assert exe is not None
        import socket

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = int(s.getsockname()[1])
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc = subprocess.Popen(
            [exe, f"-storageDataPath={tmp / 'vm'}", f"-httpListenAddr=127.0.0.1:{self.port}",
             "-retentionPeriod=10y", "-search.latencyOffset=1s", "-loggerLevel=ERROR",
             "-search.maxUniqueTimeseries=2000000",
             # An alerting pass sends ~16 heavy queries at once, past the engine's 4 at a time: on a
             # loaded machine the rest waited beyond its 10 s queue and 30 s query limits (HTTP 503
             # and 422). The watch waits 60 s for an answer; the engine is told to wait as long.
             "-search.maxQueueDuration=120s", "-search.maxQueryDuration=120s",
             # The watch lists the fleet at the present, minutes after the history's end (the import):
             # the engine answers with each series' last point of the last two hours.
             "-search.maxStalenessInterval=2h"],
            stdout=subprocess.DEVNULL, stderr=open(tmp / "vm.log", "wb"),  # noqa: SIM115
        )  # fmt: skip
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"{self.url}/health", timeout=5) as answer:
                    if answer.status == 200:
                        return
            except OSError:
                time.sleep(0.3)
        raise RuntimeError("victoria-metrics did not start")

    def post(self, path: str, body: bytes) -> None:
        request = urllib.request.Request(f"{self.url}{path}", data=body, method="POST")
        with urllib.request.urlopen(request, timeout=600) as answer:
            answer.read()

    def flush(self) -> None:
        with urllib.request.urlopen(f"{self.url}/internal/force_flush", timeout=120) as answer:
            answer.read()

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=30)


# ---------------------------------------------------------------------------------------- the history
def rack_labels(r: int) -> dict[str, str]:
    return {
        "site": f"site{r // RACKS_PER_SITE + 1}",
        "row": f"row{(r % RACKS_PER_SITE) // RACKS_PER_ROW + 1:02d}",
        "rack": f"rack{r + 1:04d}",
        "job": "tokenwatch-racks",
        "instance": f"rack{r + 1:04d}-head:9464",
    }


def numbers(values: Iterator[float] | list[float]) -> str:
    return ",".join(f"{v:.6g}" if v != int(v) or abs(v) >= 1e15 else str(int(v)) for v in values)


def node_lines(racks: int, nodes: int, times_ms: list[int]) -> Iterator[bytes]:
    """Every node's (and rack's) series over the history, one JSON line each. Node ``i`` makes
    ``rate(i)`` tokens/s; one node in 97 throttles, one in 211 goes down half-way."""
    points = len(times_ms)
    stamps = ",".join(map(str, times_ms))
    cache: dict[tuple[object, ...], str] = {}

    def line(metric: dict[str, str], values: str) -> bytes:
        return (
            b'{"metric":'
            + orjson.dumps(metric)
            + f',"values":[{values}],"timestamps":[{stamps}]}}\n'.encode()
        )

    def steady(value: float) -> str:
        key = ("steady", value)
        if key not in cache:
            cache[key] = numbers([value] * points)
        return cache[key]

    half = points // 2
    for r in range(racks):
        labels = rack_labels(r)
        rack_rate = 0.0
        for n in range(nodes):
            i = r * nodes + n
            rate = 14_000.0 + 37.0 * ((7 * i) % 53)
            phase = i % 7
            down = i % 211 == 5
            node = {**labels, "node": f"node{n + 1:02d}"}
            rack_rate += rate
            key = ("rate", rate, phase, down)
            if key not in cache:
                live = [
                    0.0 if down and k >= half else rate * (1 + 0.01 * math.sin(k + phase))
                    for k in range(points)
                ]
                total, counts = 0.0, []
                for k, v in enumerate(live):
                    total += v * SCRAPE_S if k else 0.0
                    counts.append(float(round(total)))
                cache[key] = numbers(live)
                cache[("tokens", *key)] = numbers(counts)
                cache[("up", down)] = numbers([0.0 if down and k >= half else 1.0 for k in range(points)])
            up = cache[("up", down)]
            yield line({"__name__": "tokenwatch_node_up", **node}, up)
            yield line({"__name__": "tokenwatch_node_status", **node, "status": "up"}, up)
            yield line({"__name__": "tokenwatch_node_tokens_per_second", **node}, cache[key])
            yield line(
                {"__name__": "tokenwatch_node_generated_tokens_total", **node}, cache[("tokens", *key)]
            )
            yield line({"__name__": "tokenwatch_node_measured_tokens_per_second", **node}, steady(rate))
            yield line({"__name__": "tokenwatch_node_power_watts", **node}, steady(GPUS * 1050.0 + i % 17))
            yield line({"__name__": "tokenwatch_node_gpus", **node}, steady(GPUS))
            yield line({"__name__": "tokenwatch_node_throttling", **node}, steady(float(i % 97 == 0)))
        yield line(
            {"__name__": "tokenwatch_rack_projected_tokens_per_second", **labels}, steady(round(rack_rate))
        )
        yield line({"__name__": "tokenwatch_rack_projected_valid", **labels}, steady(1.0))


def gpu_lines(racks: int, nodes: int, times_ms: list[int]) -> Iterator[bytes]:
    """Every GPU's series over the last minutes (the alerting pass reads each GPU's latest value)."""
    stamps = ",".join(map(str, times_ms))
    steady = {name: numbers([v] * len(times_ms)) for name, v in GPU_FAMILIES.items()}
    for r in range(racks):
        labels = rack_labels(r)
        for n in range(nodes):
            for g in range(GPUS):
                gpu = {**labels, "node": f"node{n + 1:02d}", "gpu": str(g)}
                for name, values in steady.items():
                    metric = orjson.dumps({"__name__": name, **gpu})
                    yield (
                        b'{"metric":' + metric + f',"values":[{values}],"timestamps":[{stamps}]}}\n'.encode()
                    )


def import_lines(vm: Victoria, lines: Iterator[bytes], chunk_bytes: int = 16 << 20) -> tuple[int, int]:
    """Posts the lines in chunks; (lines, bytes) sent."""
    chunk: list[bytes] = []
    size = count = sent = 0
    for one in lines:
        chunk.append(one)
        size += len(one)
        count += 1
        if size >= chunk_bytes:
            vm.post("/api/v1/import", b"".join(chunk))
            sent += size
            chunk, size = [], 0
    if chunk:
        vm.post("/api/v1/import", b"".join(chunk))
        sent += size
    return count, sent


def record(vm: Victoria, begin: float, end: float) -> int:
    """The recorded series as the rules make them: each rule's expression evaluated every 15 s by the
    server, imported under the rule's name and labels. Returns the series written."""
    rule_set = RuleSet()
    written = 0
    for rule in rule_set.rules():
        params = urlencode(
            {"query": rule["expr"], "start": f"{begin:.3f}", "end": f"{end:.3f}", "step": "15s"}
        )
        with urllib.request.urlopen(f"{vm.url}/api/v1/query_range?{params}", timeout=600) as answer:
            result = orjson.loads(answer.read())["data"]["result"]
        out = []
        for series in result:
            metric = {**series["metric"], "__name__": rule["record"], **rule["labels"]}  # type: ignore[dict-item]
            times = [round(float(t) * 1000) for t, _ in series["values"]]
            values = [float(v) for _, v in series["values"]]
            out.append(orjson.dumps({"metric": metric, "values": values, "timestamps": times}) + b"\n")
        vm.post("/api/v1/import", b"".join(out))
        written += len(out)
    return written


# ------------------------------------------------------------------------------------------ the watch
def fleet_settings(url: str) -> FleetSettings:
    return FleetSettings(url=url, interval_s=INTERVAL_S, timeout_s=60.0, latency_offset_s=0.0)


async def backfill(url: str, end: float, begin: float) -> tuple[float, int, str, RackCore, float]:
    """The watch's start at ``end``: (seconds, rack-figure batches, which queries made them, the core,
    the run time of ``end``)."""
    began = time.perf_counter()
    c = PrometheusFleetCollector(fleet_settings(url), now=lambda: 0.0)
    found = await c.discover()
    assert found is not None, c._said
    start = await c.run_start(end)
    assert start is not None, c._said
    listed = time.perf_counter()
    events = await c.history(start, end)
    fetched = time.perf_counter()
    clock = run_clock(end, [(c.name, start)])
    core = RackCore()
    # As the live watch starts its core: it joined the run at attach_s (the old history's ticks run no
    # alert rules, as they would not for a watch that attached mid-run).
    meta = {**found.meta, "attached_at_s": round(clock.attach_s, 3)}
    core.ingest(RunStarted(0.0, "fleet", "Offline", found.nodes, GPUS, None, None, "live", start, meta))
    for event in merged([Backfill(c.name, placed=events)], clock):
        core.ingest(event)
    core.snapshot()
    batches = sum(type(e).__name__ == "RackFiguresBatch" for e in events)
    print(f"  run start found at {start - begin:+.0f} s from the history's first point", flush=True)
    print(
        f"  backfill: listing and the run's start {listed - began:.2f} s, the history fetched and parsed "
        f"{fetched - listed:.2f} s, into the core {time.perf_counter() - fetched:.2f} s",
        flush=True,
    )
    return time.perf_counter() - began, batches, c.figure_queries.kind, core, clock.attach_s


async def alerting_pass_into(core: RackCore, url: str, at: float, run_s: float) -> tuple[int, float, float]:
    """The watch's first alerting pass after its backfill (every node's counters and every GPU read at
    the instant ``at``), into the backfill's core, and a snapshot: what the live watch holds from then
    on (the node and GPU series made and filled). Returns (the events, the pass's seconds: its queries
    answered and read into events, the seconds of the events into the core and a snapshot)."""
    c = PrometheusFleetCollector(fleet_settings(url), now=lambda: run_s)
    assert await c.discover() is not None
    print(f"  before the alerting pass: {memory()}", flush=True)
    async with PrometheusApi(url, 120.0) as api:
        began, cpu = time.perf_counter(), time.process_time()
        events = await c.poll(api, at)
        polled, cpu = time.perf_counter(), time.process_time() - cpu
    rows = sum(len(e.gpu) for e in events if isinstance(e, GpuBatch))
    print(
        f"  the alerting pass read ({rows:,} GPU rows, {cpu:.2f} s of the watch's CPU): {memory()}",
        flush=True,
    )
    for event in events:  # a query the server refused (its own limits): the figures below lack it
        if isinstance(event, Notice) and event.level == "warning":
            print(f"  the alerting pass: {event.message}", flush=True)
    for event in events:
        core.ingest(event)
    print(f"  its events in the core: {memory()}", flush=True)
    core.snapshot()
    print(f"  and a snapshot: {memory()}", flush=True)
    return len(events), polled - began, time.perf_counter() - polled


async def pass_alone(url: str, at: float) -> tuple[float, float, float, int]:
    """One alerting pass (every node and GPU at the instant ``at``) in a watch process that holds no core
    and read no history (no heap a backfill freed for it to reuse): what reading the pass's answers
    takes. Returns (the RSS it added in MB, its seconds, its seconds of CPU, the GPU rows read)."""
    c = PrometheusFleetCollector(fleet_settings(url), now=lambda: 30.0)
    assert await c.discover() is not None, c._said
    before = peak_rss_mb()
    async with PrometheusApi(url, 300.0) as api:  # a loaded server takes minutes: no pass cut short
        began, cpu = time.perf_counter(), time.process_time()
        events = await c.poll(api, at)
        took, cpu = time.perf_counter() - began, time.process_time() - cpu
    for event in events:  # a query the server refused or did not answer in time
        if isinstance(event, Notice) and event.level == "warning":
            print(f"  the alerting pass: {event.message}", flush=True)
    print(f"  the alerting pass alone: {memory()}", flush=True)
    rows = sum(len(e.gpu) for e in events if isinstance(e, GpuBatch))
    return peak_rss_mb() - before, took, cpu, rows


async def started_with_run(url: str, end: float, passes: int) -> tuple[int, float]:
    """A watch started with the run (``--started``): no backfill, its core fed as the live watch feeds
    it from the run's start, a round every 5 s with one rack on screen, the alerting pass (every node
    and GPU) every 30 s, ``passes`` of them, the last at the instant ``end``. Returns (the events, its
    peak RSS in MB after the last pass into the core and a snapshot)."""
    first = end - (passes - 1) * 30.0
    run_start = first - INTERVAL_S  # the run began a round before the watch's first instant
    run_s = 0.0
    c = PrometheusFleetCollector(fleet_settings(url), now=lambda: run_s)
    found = await c.discover()
    assert found is not None, c._said
    c.focus.show({c.racks[0]})
    core = RackCore()
    meta = {**found.meta, "attached_at_s": 0.0}
    core.ingest(RunStarted(0.0, "fleet", "Offline", found.nodes, GPUS, None, None, "live", run_start, meta))
    events = 0
    async with PrometheusApi(url, 120.0) as api:
        instant = first
        while instant <= end + 1e-6:
            run_s = instant - run_start
            alerting = c.alerting_pass.due(instant)
            polled = await c.poll(api, instant)
            for event in polled:
                if isinstance(event, Notice) and event.level == "warning":
                    print(f"  round at {instant - end:+.0f} s: {event.message}", flush=True)
                core.ingest(event)
            core.snapshot()
            events += len(polled)
            if alerting:
                print(
                    f"  after the alerting pass at {instant - end:+.0f} s into the core: {memory()}",
                    flush=True,
                )
            instant += INTERVAL_S
    return events, peak_rss_mb()


def peak_rss_mb() -> float:
    fields = dict(
        line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines() if ":" in line
    )
    return int(fields["VmHWM"].split()[0]) / 1024


def memory() -> str:
    """The process' resident memory now and its peak so far (``/proc/self/status``)."""
    fields = dict(
        line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines() if ":" in line
    )
    now, peak = (int(fields[k].split()[0]) / 1024 for k in ("VmRSS", "VmHWM"))
    return f"RSS {now:.0f} MB, peak {peak:.0f} MB"


async def rounds(
    url: str, at: float, count: int, recorded_only: bool
) -> list[tuple[str, float, float, int, float]]:
    """(kind, ours median s, floor median s, queries, our CPU median s) per round kind at the instant
    ``at`` (only the live board's round, from the recorded series, with ``recorded_only``)."""
    c = PrometheusFleetCollector(fleet_settings(url), now=lambda: 0.0)
    found = await c.discover()
    assert found is not None
    c.focus.show({c.racks[0]})
    kinds = {
        "rack figures (recorded series) + one rack on screen": ("recorded", False),
        "rack figures (raw queries) + one rack on screen": ("raw", False),
        "alerting pass: rack figures (recorded) + every node and GPU": ("recorded", True),
    }
    if recorded_only:
        kinds = dict(list(kinds.items())[:1])
    out = []
    async with PrometheusApi(url, 120.0) as api:
        for kind, (figures, detail) in kinds.items():
            c.figure_queries.using_recorded = figures == "recorded"
            asked = list(c.figure_queries.queries.values())
            asked += list(c._node_queries(None if detail else c.focus.racks).values())
            ours, floors, cpus = [], [], []
            for _ in range(count):
                c.alerting_pass.counted_from = -math.inf if detail else at
                floors.append(await floor_round(url, asked, at))
                began, cpu = time.perf_counter(), time.process_time()
                await c.poll(api, at)
                ours.append(time.perf_counter() - began)
                cpus.append(time.process_time() - cpu)
            out.append(
                (
                    kind,
                    statistics.median(ours),
                    statistics.median(floors),
                    len(asked),
                    statistics.median(cpus),
                )
            )
    return out


def watch_part(url: str, end: float, begin: float, count: int, recorded_only: bool) -> None:
    """(child process) The backfill, then the rounds; prints one line of figures per part."""
    seconds, batches, kind, core, run_s = asyncio.run(backfill(url, end, begin))
    print(f"BACKFILL {seconds:.3f} {batches} {kind}", flush=True)
    print(f"  after the backfill: {memory()}", flush=True)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"  the watch's peak RSS after the backfill: {peak:.0f} MB", flush=True)
    events, polled, ingested = asyncio.run(alerting_pass_into(core, url, end, run_s))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"  ... after its first alerting pass ({events:,} events) into the core: {peak:.0f} MB", flush=True)
    print(f"ALERTING {peak:.0f} {polled:.3f} {ingested:.3f}", flush=True)
    if count:
        for name, mine, floor, queries, cpu in asyncio.run(rounds(url, end, count, recorded_only)):
            print(f"ROUND {mine:.4f} {floor:.4f} {queries} {cpu:.4f} {name}", flush=True)
    print(f"RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f}", flush=True)


# ------------------------------------------------------------------------------------------------ main
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--racks", type=int, default=1000)
    parser.add_argument("--nodes", type=int, default=18)
    parser.add_argument("--minutes", type=float, default=80.0)
    parser.add_argument("--gpu-minutes", type=float, default=3.0)
    parser.add_argument("--rounds", type=int, default=10, help="each round's repeats (0: no rounds)")
    parser.add_argument(
        "--compare", type=Path, metavar="CHECKOUT", help="also run the watch part with this checkout's code"
    )
    parser.add_argument(
        "--pairs", type=int, default=1, help="with --compare: how many times each (alternately)"
    )
    parser.add_argument(
        "--watch", nargs=3, type=float, metavar=("PORT", "END", "BEGIN"), help=argparse.SUPPRESS
    )
    parser.add_argument("--pass-alone", nargs=2, type=float, metavar=("PORT", "END"), help=argparse.SUPPRESS)
    parser.add_argument(
        "--started",
        action="store_true",
        help="also a watch started with the run: its RSS after two alerting passes",
    )
    parser.add_argument(
        "--recorded-only",
        action="store_true",
        help="of the rounds, only the live board's (the rack figures from the recorded series)",
    )
    parser.add_argument(
        "--started-part", nargs=2, type=float, metavar=("PORT", "END"), help=argparse.SUPPRESS
    )
    add_short_option(parser)
    args = parser.parse_args()
    if args.watch:
        print(f"  tokenwatch from {Path(tokenwatch.__file__).parent}", flush=True)
        port, end, begin = args.watch
        watch_part(f"http://127.0.0.1:{port:.0f}", end, begin, args.rounds, args.recorded_only)
        return
    if args.pass_alone:
        print(f"  tokenwatch from {Path(tokenwatch.__file__).parent}", flush=True)
        port, end = args.pass_alone
        added, took, cpu, rows = asyncio.run(pass_alone(f"http://127.0.0.1:{port:.0f}", end))
        print(f"PASS {added:.0f} {took:.3f} {cpu:.3f} {rows}", flush=True)
        return
    if args.started_part:
        print(f"  tokenwatch from {Path(tokenwatch.__file__).parent}", flush=True)
        port, end = args.started_part
        events, peak = asyncio.run(started_with_run(f"http://127.0.0.1:{port:.0f}", end, 2))
        print(f"STARTED {peak:.0f} {events}", flush=True)
        return
    if args.short:
        args.racks, args.minutes, args.rounds = 20, 10.0, 3
    if shutil.which("victoria-metrics") is None:
        print("victoria-metrics is not installed (apt-get install victoria-metrics): nothing measured")
        target("fleet of 1,000 racks", "not measured", "victoria-metrics installed", False)
        return
    gpus = args.racks * args.nodes * GPUS
    print(
        f"{args.racks} racks x {args.nodes} nodes x {GPUS} GPUs ({gpus:,} GPUs), {args.minutes:g} minutes; "
        f"load average {os.getloadavg()[0]:.2f}",
        flush=True,
    )
    with tempfile.TemporaryDirectory(prefix="bench-fleet-1000-") as name:
        tmp = Path(name)
        vm = Victoria(tmp)
        try:
            # The history ends on the watch's grid, a minute ago (the engine's newest data is settled).
            end = math.floor((time.time() - 60.0) / (RULES_S * 2)) * RULES_S * 2
            points = int(args.minutes * 60 / SCRAPE_S) + 1
            begin = end - (points - 1) * SCRAPE_S
            times = [round((begin + k * SCRAPE_S) * 1000) for k in range(points)]
            t0 = time.perf_counter()
            lines, size = import_lines(vm, node_lines(args.racks, args.nodes, times))
            gpu_points = max(1, int(args.gpu_minutes * 60 / SCRAPE_S) + 1)
            more, more_size = import_lines(vm, gpu_lines(args.racks, args.nodes, times[-gpu_points:]))
            vm.flush()
            print(
                f"history: {lines:,} node and rack series x {points} points ({size / 1e6:.0f} MB) and "
                f"{more:,} GPU series x {gpu_points} points ({more_size / 1e6:.0f} MB) imported in "
                f"{time.perf_counter() - t0:.0f} s",
                flush=True,
            )
            t0 = time.perf_counter()
            written = record(vm, begin, end)
            vm.flush()
            print(
                f"recorded series: {written:,} made and imported in {time.perf_counter() - t0:.0f} s",
                flush=True,
            )
            codes = [REPO] if args.compare is None else [REPO, args.compare.resolve()] * args.pairs
            for code in codes:
                parts = [
                    ["--watch", str(vm.port), f"{end:.3f}", f"{begin:.3f}"],
                    ["--pass-alone", str(vm.port), f"{end:.3f}"],
                ]
                if args.started:
                    parts.append(["--started-part", str(vm.port), f"{end:.3f}"])
                for part in parts:
                    print(
                        f"{part[0][2:]} with the code at {code}; load average {os.getloadavg()[0]:.2f}",
                        flush=True,
                    )
                    child = subprocess.run(
                        [sys.executable, __file__, *part, "--rounds", str(args.rounds),
                         *(["--recorded-only"] if args.recorded_only else [])],
                        cwd=REPO, capture_output=True, text=True, check=False,
                        env={**os.environ, "BENCH_FLEET_CODE": str(code)},
                    )  # fmt: skip
                    print(child.stdout, end="")
                    if child.returncode != 0:
                        print(child.stderr[-3000:])
                        raise SystemExit(f"the watch part failed (exit {child.returncode})")
                    judge(child.stdout, args.racks, args.minutes)
        finally:
            vm.stop()


def judge(out: str, racks: int, minutes: float) -> None:
    for line in out.splitlines():
        word, *rest = line.split(maxsplit=5 if line.startswith("ROUND ") else 4)
        if word == "BACKFILL":
            seconds, batches, kind = float(rest[0]), rest[1], rest[2]
            target(
                f"backfill of {minutes:g} minutes, {racks} racks (find the start, query_range, into a core)",
                f"{seconds:.2f} s ({batches} rack-figure batches, from the {kind} series)",
                "< 10 s",
                seconds < 10,
            )
        elif word == "ROUND":
            mine, floor, queries, cpu, kind = float(rest[0]), float(rest[1]), rest[2], float(rest[3]), rest[4]
            target(
                f"round, {kind} ({queries} queries at once) against the bare-socket floor",
                f"ours {mine * 1000:.1f} ms median ({cpu * 1000:.1f} ms of the watch's CPU), floor "
                f"{floor * 1000:.1f} ms -> {mine / floor:.2f}x",
                "<= 1.2x the floor",
                mine / floor <= 1.2,
            )
        elif word == "ALERTING":
            rss, polled, ingested = float(rest[0]), float(rest[1]), float(rest[2])
            target(
                "the watch's peak RSS after its first alerting pass (every node and GPU) into the core",
                f"{rss:.0f} MB (the pass {polled:.2f} s, into the core {ingested:.2f} s)",
                "< 500 MB",
                rss < 500,
            )
        elif word == "PASS":
            added, took, cpu, rows = float(rest[0]), float(rest[1]), float(rest[2]), int(rest[3])
            print(
                f"        the alerting pass alone ({rows:,} GPU rows): {added:.0f} MB of peak RSS added, "
                f"{took:.2f} s ({cpu:.2f} s of the watch's CPU)",
                flush=True,
            )
        elif word == "STARTED":
            rss, events = float(rest[0]), int(rest[1])
            target(
                "a watch started with the run: its peak RSS after two alerting passes (every node and GPU)",
                f"{rss:.0f} MB ({events:,} events into its core)",
                "< 500 MB",
                rss < 500,
            )
        elif word == "RSS":
            rss = float(rest[0])
            target("the watch's peak RSS (backfill and rounds)", f"{rss:.0f} MB", "< 500 MB", rss < 500)


if __name__ == "__main__":
    main()
