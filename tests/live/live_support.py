"""Helpers for the live tests: watch configs for loopback nodes, an in-process live session, figures
computed independently of the code under test."""

from __future__ import annotations

import asyncio
import http.server
import re
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from sshd_cluster import LoopbackCluster, missing_binaries

from tests.conftest import PATIENCE_S
from tokenwatch.base.events import (
    GPU_METRICS,
    Event,
    GpuBatch,
    GpuSample,
    NodeStatus,
    Notice,
    Progress,
    RunStarted,
)
from tokenwatch.core import RackCore, RackSnapshot
from tokenwatch.inputs.config import WatchConfig, load_watch_config
from tokenwatch.inputs.live.supervisor import LiveCollector, LiveOptions
from tokenwatch.inputs.watch import build_collector, core_config
from tokenwatch.session import Session

DATA = Path(__file__).resolve().parent.parent / "data" / "live"
H100_CSV = DATA / "h100-load.query-gpu.csv"
N_NODES = 8
VLLM = DATA / "vllm-bloom-560m.excerpt.prom"  # a real, non-idle vLLM scrape
DCGM = DATA / "dcgm-v100x4.excerpt.prom"  # a real 4 x V100 dcgm-exporter scrape

needs_sshd: pytest.MarkDecorator = pytest.mark.skipif(
    missing_binaries() is not None, reason=str(missing_binaries())
)


def captured_h100() -> dict[str, str]:
    """The real H100 --query-gpu row the fake nvidia-smi serves: field name (no unit) -> value text."""
    header, row = H100_CSV.read_text().splitlines()[:2]
    names = [cell.split(" [")[0] for cell in header.split(", ")]
    return dict(zip(names, row.split(", "), strict=True))


def expected_node_power_w(index: int, gpus: int = 4) -> float:
    """Independent figure: the fake reports captured power.draw + GPU number + node number per GPU."""
    base = float(captured_h100()["power.draw"].removesuffix(" W"))
    return sum(base + g + index for g in range(gpus))


def write_config(
    path: Path,
    cluster: LoopbackCluster,
    *,
    extra: str = "",
    known_hosts: Path | None = None,
    stale_after: str = "5s",
) -> Path:
    path.write_text(
        f"""run:
  name: loopback-rack
  scenario: Offline
nodes:
  gpus_per_node: 4
  hosts:
{cluster.hosts_yaml()}ssh:
  known_hosts: {known_hosts or cluster.known_hosts}
  client_keys: [{cluster.client_key}]
  connect_timeout: 5s
gpu:
  source: nvidia-smi
  interval: 200ms
alerts:
  stale_after: {stale_after}
{extra}"""
    )
    return path


class LiveRun:
    """A live session in this event loop: the real collector, session and core, events kept."""

    def __init__(self, config: WatchConfig, collector: LiveCollector) -> None:
        self.config = config
        self.collector = collector
        self.core = RackCore(core_config(config))
        self.session = Session(self.core, [collector])
        self.events: list[Event] = []
        self.session.on_event(self.events.append)
        self.task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> LiveRun:
        self.task = asyncio.create_task(self.session.run())
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def stop(self) -> None:
        if self.task is not None and not self.task.done():
            self.session.stop()
            await asyncio.wait_for(self.task, PATIENCE_S)

    def snapshot(self) -> RackSnapshot:
        return self.core.snapshot()

    def state(self, node: str) -> str:
        snap = self.snapshot()
        return snap.nodes.state[snap.nodes.index(node)]

    def statuses(self, node: str) -> list[NodeStatus]:
        return [e for e in self.events if isinstance(e, NodeStatus) and e.node == node]

    def notices(self, node: str | None = None) -> list[Notice]:
        return [e for e in self.events if isinstance(e, Notice) and (node is None or e.node == node)]

    async def wait_for(self, what: str, predicate: Callable[[], bool], within_s: float = PATIENCE_S) -> None:
        deadline = time.monotonic() + within_s
        while not predicate():
            if self.task is not None and self.task.done():
                self.task.result()
                raise AssertionError(f"the session ended while waiting for {what}")
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {within_s:g} s waiting for {what}")
            await asyncio.sleep(0.05)  # the poll interval


def live_run(
    config_path: Path,
    *,
    accept_new_host_keys: bool = False,
    backoff_cap_s: float = 1.0,
    stop_after_s: float | None = None,
) -> LiveRun:
    config = load_watch_config(config_path)
    options = LiveOptions(stop_after_s=stop_after_s, backoff_base_s=0.2, backoff_cap_s=backoff_cap_s)
    collector = build_collector(config, accept_new_host_keys=accept_new_host_keys, options=options)
    return LiveRun(config, collector)


@dataclass(frozen=True, slots=True)
class GpuRow:
    t: float
    node: str
    gpu: int
    power_w: float
    power_limit_w: float


def gpu_rows(events: Sequence[Event], nodes: tuple[str, ...] = ()) -> list[GpuRow]:
    """Every GPU reading in an event stream, whether it came as a GpuSample or inside a GpuBatch
    (``nodes``: RunStarted.nodes when the stream has no run start)."""
    power, limit = GPU_METRICS.index("power_w"), GPU_METRICS.index("power_limit_w")
    rows = []
    for e in events:
        if isinstance(e, RunStarted):
            nodes = e.nodes
        elif isinstance(e, GpuSample):
            rows.append(GpuRow(e.t, e.node, e.gpu, e.power_w, e.power_limit_w))
        elif isinstance(e, GpuBatch):
            for i in range(len(e.gpu)):
                v = e.values[i]
                rows.append(
                    GpuRow(e.t, nodes[e.node_index[i]], int(e.gpu[i]), float(v[power]), float(v[limit]))
                )
    return rows


VLLM_STEP = 865  # generated tokens each scrape of /<node>/vllm adds to the real scrape's lifetime count


def vllm_scrape(k: int) -> bytes:
    """The real vLLM scrape as a busy server serves it the k-th time (k = 0, 1, ...): its lifetime
    generation counter grown by ``k * VLLM_STEP``."""
    lifetime = expected_vllm_tokens()
    text = VLLM.read_text()
    line = re.search(r"^vllm:generation_tokens_total\{[^}]*\} \S+$", text, re.M)
    assert line is not None
    grown = line.group(0).rsplit(" ", 1)[0] + f" {lifetime + k * VLLM_STEP}.0"
    return text.replace(line.group(0), grown).encode()


def scraped_tokens(events: Sequence[Event], node: str) -> list[int | None]:
    """The generated tokens each Progress of ``node`` credits the run."""
    return [e.tokens_done for e in events if isinstance(e, Progress) and e.node == node]


class ScrapeServer:
    """Serves on 127.0.0.1 what ``body_for(path)`` returns for a GET (None: 404), as a /metrics page."""

    def __init__(self, body_for: Callable[[str], bytes | None]) -> None:
        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body = body_for(self.path)
                if body is None:
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class MetricsServer(ScrapeServer):
    """Serves ``/<node>/vllm`` (a busy server: see :func:`vllm_scrape`) and ``/<node>/dcgm`` on 127.0.0.1
    and counts requests per path."""

    def __init__(self) -> None:
        self.hits: Counter[str] = Counter()
        bodies = {"dcgm": DCGM.read_bytes()}

        def body_for(path: str) -> bytes | None:
            kind = path.rsplit("/", 1)[-1]
            body = vllm_scrape(self.hits[path]) if kind == "vllm" else bodies.get(kind)
            self.hits[path] += 1
            return body

        super().__init__(body_for)


def expected_vllm_tokens() -> int:
    """The real scrape's lifetime generation counter (what a first scrape must not credit)."""
    text = VLLM.read_text()
    total = re.search(r"^vllm:generation_tokens_total\{[^}]*\} (\S+)$", text, re.M)
    assert total is not None
    return round(float(total.group(1)))


# ---------------------------------------------------------------- a vLLM server's growing log
@dataclass(slots=True)
class VllmLog:
    """A vLLM V1 server's log as it writes it (``vllm/v1/metrics/loggers.py``: one stats line per engine
    per interval, stamped ``MM-DD hh:mm:ss`` in the server's local time); remembers every line's stamp
    and generation rate, for the figures the lines themselves state."""

    path: Path
    lines: list[tuple[datetime, float]] = field(default_factory=list)

    def write(self, stamp: datetime, generation: float, *, engine: int = 0, pid: int = 4242) -> None:
        stamp = stamp.replace(microsecond=0)
        with open(self.path, "a") as fh:
            fh.write(
                f"(APIServer pid={pid}) INFO {stamp:%m-%d %H:%M:%S} [loggers.py:123] Engine {engine:03d}: "
                f"Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: {generation:.1f} tokens/s, "
                "Running: 8 reqs, Waiting: 0 reqs, GPU KV cache usage: 20.4%, Prefix cache hit rate: 0.0%\n"
            )
        if (engine, pid) == (0, 4242):
            self.lines.append((stamp, generation))

    def write_raw(self, text: str) -> None:
        with open(self.path, "a") as fh:
            fh.write(text)

    def backlog(self, minutes: float, interval_s: float, rates: Callable[[int], float]) -> None:
        """``minutes`` of lines every ``interval_s``, the last one written now (at the start of a second,
        as a writer whose stamps are true to the second)."""
        count = int(minutes * 60 / interval_s)
        time.sleep(1.0 - time.time() % 1.0 + 0.01)
        now = datetime.now().astimezone()  # the server's local time, as vLLM stamps its lines
        for k in range(count + 1):
            self.write(now - timedelta(seconds=(count - k) * interval_s), rates(k))

    def own_rate(self) -> float:
        """What the lines say over the run: each rate held since the previous line, by the stamps."""
        tokens = sum(
            rate * (stamp - before).total_seconds()
            for (before, _), (stamp, rate) in zip(self.lines, self.lines[1:], strict=False)
        )
        return tokens / (self.lines[-1][0] - self.lines[0][0]).total_seconds()


async def next_second(after_s: float) -> datetime:
    """Sleep ``after_s`` and on to the start of the next second: a line stamped then is true to the second."""
    await asyncio.sleep(after_s)
    await asyncio.sleep(1.0 - time.time() % 1.0 + 0.01)
    return datetime.now().astimezone()


def attached_at(run: LiveRun) -> float | None:
    """How far into the run the watch joined it (RunStarted.meta), once the run has started."""
    start = next((e for e in run.events if isinstance(e, RunStarted)), None)
    return None if start is None else float(start.meta["attached_at_s"])
