"""A fleet of simulated racks behind a real Prometheus: each rack a core fed by the seeded simulator and
served by tokenwatch's own exporter (what one headless ``tokenwatch watch --prometheus-port`` per rack
serves), scraped every second by the Debian ``prometheus`` binary, or by VictoriaMetrics (the Debian
``victoria-metrics`` binary, which scrapes with the same config and answers the same HTTP API):
:func:`tsdb` makes either by name, for fixtures parametrized over the engines big fleets run."""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import math
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import orjson
import pytest

from tests.conftest import PATIENCE_S, prometheus_argv, start_listening, stop_process, wait_until
from tests.machine_share import paused_while_others_time
from tokenwatch.base.events import Event
from tokenwatch.core import RackCore
from tokenwatch.frontends.metrics import MetricsServer
from tokenwatch.inputs.sim.faults import parse_faults
from tokenwatch.inputs.sim.profile import load_profile
from tokenwatch.inputs.sim.rack_sim import RackSimulation, SimSettings

PROMETHEUS = shutil.which("prometheus")
VICTORIA_METRICS = shutil.which("victoria-metrics")
ENGINES = ("prometheus", "victoria-metrics")
# VictoriaMetrics hides the newest 30 s from queries by default (-search.latencyOffset), for samples still
# arriving; a fleet scraped every second here needs only a second of it.
VM_LATENCY_OFFSET_S = 1.0
# ... but a series new to VictoriaMetrics (a rack's per-node rates, first served when its nodes start work)
# answers queries of the last hour only after VictoriaMetrics' next update of its recent series, every 10 s
# (measured on 1.79.5: series first scraped 2.3 to 9.3 s into a run all answered from 10.4 s, the next ones
# from 20.5 s). A fleet whose live board must equal its later backfill waits that out as its latency offset;
# VictoriaMetrics' default -search.latencyOffset of 30 s covers it.
VM_NEW_SERIES_OFFSET_S = 12.0  # its 10 s, a second for its buffers, a second to spare


def rack_name(r: int) -> str:
    return f"rack{r + 1:02d}"


def rack_events(
    r: int, nodes: int, faults: str = "", duration_s: float = 600.0, until_s: float = float("inf")
) -> list[Event]:
    """Rack ``r``'s simulated run (its own seed) up to run time ``until_s``, named as a watch with
    ``nodes.rack`` names it."""
    profile = dataclasses.replace(load_profile("gb300-nvl72"), nodes=nodes)
    name = rack_name(r)
    settings = SimSettings(
        profile,
        seed=100 + r,
        duration_s=duration_s,
        faults=parse_faults(faults, profile.node_names()) if faults else (),
        name=name,
        extra_meta={"rack": name},
    )
    return list(itertools.takewhile(lambda e: e.t <= until_s, RackSimulation(settings).events()))


@dataclass(frozen=True)
class Own:
    """A rack's figures as its own node-level core has them."""

    nodes_total: int
    nodes_up: int
    gpus: int
    tokens_per_s: float
    per_gpu: float
    power_w: float
    tokens_per_joule: float
    spread_pct: float
    worst_node: str
    worst_delta_pct: float
    throttling: bool


def expected(core: RackCore) -> Own:
    snap = core.snapshot()
    nodes, agg = snap.nodes, snap.aggregate
    delta = nodes.delta_vs_median_pct
    judged = np.isfinite(delta)
    worst = int(np.nanargmin(np.where(judged, nodes.tokens_per_s, np.nan))) if judged.any() else -1
    return Own(
        nodes_total=agg.nodes,
        nodes_up=agg.nodes_up,
        gpus=agg.gpus,
        tokens_per_s=agg.tokens_per_s,
        per_gpu=agg.per_gpu_tokens_per_s,
        power_w=agg.power_w,
        tokens_per_joule=agg.tokens_per_joule,
        spread_pct=snap.node_spread.spread_pct,
        worst_node=nodes.names[worst] if worst >= 0 else "",
        worst_delta_pct=float(delta[worst]) if worst >= 0 else math.nan,
        throttling=bool(nodes.throttling[worst]) if worst >= 0 else False,
    )


def rack_core(events: Sequence[Event], until_s: float) -> RackCore:
    core = RackCore()
    for event in events:
        if event.t > until_s:
            break
        core.ingest(event)
    return core


class Prometheus:
    """A real Prometheus on loopback scraping ``targets`` (host:port) every second as job ``racks``."""

    def __init__(self, tmp: Path, targets: Sequence[str]) -> None:
        self.tmp = tmp
        self.port = 0  # chosen by start(), where its own process listens on it
        listed = ", ".join(f"'{t}'" for t in targets)
        (tmp / "prometheus.yml").write_text(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 900ms\n"
            f"scrape_configs:\n  - job_name: racks\n    static_configs:\n      - targets: [{listed}]\n"
        )
        self.targets = len(targets)
        self.proc: subprocess.Popen[bytes] | None = None

    def command(self) -> list[str]:
        assert PROMETHEUS is not None
        return prometheus_argv(PROMETHEUS, self.tmp / "prometheus.yml", self.tmp / "data", self.port)

    @property
    def url(self) -> str:
        assert self.port, "the server's address is known once it started"
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        """Start the server on a free port; return once its own process listens there."""

        def launch(port: int) -> subprocess.Popen[bytes]:
            self.port = port
            return subprocess.Popen(
                self.command(),
                stdout=subprocess.DEVNULL,
                stderr=open(self.tmp / "prometheus.log", "wb"),
            )

        self.proc, self.port = start_listening(launch, type(self).__name__, self.tmp / "prometheus.log")

    def wait_until_scraped(self, timeout_s: float = PATIENCE_S) -> None:
        """Every target up and scraped at least twice."""
        deadline = time.monotonic() + timeout_s
        seen = ""
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise RuntimeError(f"prometheus exited: {(self.tmp / 'prometheus.log').read_text()[-400:]}")
            targets = self._targets()
            up = [t for t in targets if t["health"] == "up"]
            seen = f"{len(up)} of {len(targets)} up"
            if len(up) == self.targets:
                self._wait_for_next_scrapes({t["scrapeUrl"]: t["lastScrape"] for t in up})
                self._wait_until_queryable()
                return
            time.sleep(0.25)  # the poll interval
        raise RuntimeError(f"prometheus targets not up in {timeout_s:g} s: {seen}")

    def _wait_for_next_scrapes(self, scraped: dict[str, str]) -> None:
        """Until every target was scraped again after the ``lastScrape`` times in ``scraped``."""
        wait_until(
            lambda: all(t["lastScrape"] != scraped.get(t["scrapeUrl"]) for t in self._targets()),
            "a second scrape of every target, so every series has a fresh sample",
            poll_s=0.25,
        )

    def _wait_until_queryable(self) -> None:
        """Prometheus answers a sample as soon as it is scraped."""

    def _targets(self) -> list[dict[str, str]]:
        """Prometheus's active targets, each with its ``health`` and ``lastScrape`` (none if it is down)."""
        url = f"{self.url}/api/v1/targets"
        with (
            contextlib.suppress(OSError, KeyError, ValueError),
            urllib.request.urlopen(url, timeout=10) as answer,
        ):
            return list(orjson.loads(answer.read())["data"]["activeTargets"])
        return []

    def stop(self) -> None:
        if self.proc is None:
            return
        stop_process(self.proc)


class VictoriaMetrics(Prometheus):
    """A real VictoriaMetrics (single node) on loopback scraping the same targets with the same config,
    queried through its Prometheus API, newest data hidden for :data:`VM_LATENCY_OFFSET_S`."""

    def command(self) -> list[str]:
        assert VICTORIA_METRICS is not None
        return [
            VICTORIA_METRICS,
            f"-promscrape.config={self.tmp / 'prometheus.yml'}",
            f"-storageDataPath={self.tmp / 'data'}",
            f"-httpListenAddr=127.0.0.1:{self.port}",
            f"-search.latencyOffset={VM_LATENCY_OFFSET_S:g}s",
            "-search.disableCache",  # a cached answer would outlive an exporter's death in the tests
            "-loggerLevel=ERROR",
        ]

    def _wait_until_queryable(self) -> None:
        """VictoriaMetrics makes scraped samples searchable after a buffer flush and its latency
        offset, and a new series only at its next update of recent series (every 10 s): until every
        target's ``up`` is 1 and every target has series of its own that answer a query (a target whose
        first scrapes failed had an ``up`` long before the series its first good scrape made)."""

        def count(promql: str) -> int:
            url = f"{self.url}/api/v1/query?{urllib.parse.urlencode({'query': promql})}"
            with (
                contextlib.suppress(OSError, KeyError, ValueError, IndexError),
                urllib.request.urlopen(url, timeout=10) as answer,
            ):
                result = orjson.loads(answer.read())["data"]["result"]
                return int(result[0]["value"][1]) if result else 0
            return -1

        def every_target() -> bool:
            own = 'count(count by (instance) ({job="racks", __name__!~"up|scrape_.+"}))'
            return count("count(up == 1)") == self.targets and count(own) == self.targets

        wait_until(every_target, "every target's samples searchable in VictoriaMetrics", poll_s=0.25)


def missing_engine(engine: str) -> str | None:
    """Why a fleet test on ``engine`` cannot run here (None: it can)."""
    if engine == "prometheus" and PROMETHEUS is None:
        return "prometheus is not installed (apt-get install prometheus)"
    if engine == "victoria-metrics" and VICTORIA_METRICS is None:
        return "victoria-metrics is not installed (apt-get install victoria-metrics)"
    return None


def tsdb(engine: str, tmp: Path, targets: Sequence[str]) -> Prometheus:
    """The engine named (one of :data:`ENGINES`) scraping ``targets`` every second, not started yet."""
    return VictoriaMetrics(tmp, targets) if engine == "victoria-metrics" else Prometheus(tmp, targets)


def serve(core: RackCore, port: int = 0) -> MetricsServer:
    return MetricsServer(core, port)


def close_all(servers: Sequence[MetricsServer]) -> None:
    """Close the exporters side by side (each waits up to half a second for its serving thread)."""
    with ThreadPoolExecutor(max_workers=16) as pool:
        list(pool.map(MetricsServer.close, servers))


@dataclass
class HeldFleet:
    """Racks held at one instant, each served by its exporter, scraped by a real TSDB at ``url``."""

    url: str
    cores: list[RackCore]
    servers: list[MetricsServer]


@contextlib.contextmanager
def held_fleet(
    engine: str, tmp: Path, racks: int, nodes: int, faults: Mapping[int, str], held_at_s: float
) -> Iterator[HeldFleet]:
    """``racks`` simulated racks of ``nodes`` (rack index -> its faults), held at ``held_at_s``, served and
    scraped by ``engine`` until the block ends; skips the test with the reason where the engine is missing."""
    reason = missing_engine(engine)
    if reason is not None:
        pytest.skip(reason)
    cores = [
        rack_core(rack_events(r, nodes, faults.get(r, ""), until_s=held_at_s), held_at_s)
        for r in range(racks)
    ]
    servers = [serve(core) for core in cores]
    prom = tsdb(engine, tmp, [f"127.0.0.1:{s.port}" for s in servers])
    prom.start()
    try:
        prom.wait_until_scraped()
        assert prom.proc is not None
        # The racks are held still: a pause while another worker times an engine changes no answer.
        with paused_while_others_time(prom.proc):
            yield HeldFleet(prom.url, cores, servers)
    finally:
        prom.stop()
        close_all(servers)
