"""A watch that reads the rack through Prometheus and attaches 30 minutes into a run fills in the run's
history with ``query_range``. The history is real Prometheus data: two vLLM nodes'
counters, TTFT histograms and dcgm-exporter power over the last 40 minutes, written as OpenMetrics with
timestamps and turned into TSDB blocks by ``promtool tsdb create-blocks-from openmetrics``, then served by
a real ``prometheus``. The expected figures are the rates the samples were made with."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from live_support import LiveRun, attached_at

from tests.conftest import PATIENCE_S, start_prometheus, stop_process
from tokenwatch.base.events import LatencyBatch, ProgressBatch, RunStarted
from tokenwatch.core import RackCore
from tokenwatch.inputs.config import load_watch_config
from tokenwatch.inputs.live.backlog import Backfill
from tokenwatch.inputs.live.history import merged, run_clock
from tokenwatch.inputs.prometheus.query import PrometheusQueryCollector
from tokenwatch.inputs.watch import build_collector

PROMETHEUS, PROMTOOL = shutil.which("prometheus"), shutil.which("promtool")
pytestmark = [
    pytest.mark.skipif(
        PROMETHEUS is None or PROMTOOL is None, reason="prometheus and promtool are not installed"
    ),
    pytest.mark.timeout(120),
]

NODES = ("node01", "node02")
RATES = {"node01": 1000.0, "node02": 1500.0}  # generated tokens/s during the run
LIFETIME = 218_152.0  # what each server had counted before the run (the real bloom scrape's figure)
STEP_S = 5.0
IDLE_S, RUN_S = 600.0, 1800.0  # 10 idle minutes, then a 30-minute run that is still going
TTFT_BOUNDS = (0.1, 0.5, 1.0)
FIRST_TOKENS_PER_STEP = 4  # each node: 4 first tokens a step, in (0.1, 0.5]
POWER_W = {("node01", "0"): 650.0, ("node02", "0"): 700.0}


@dataclass(frozen=True, slots=True)
class History:
    url: str
    run_began: float  # Unix time the counters started to grow
    last_sample: float


def openmetrics(begin: float) -> str:
    """The samples, family by family, each series in time order (as promtool wants them)."""
    steps = int((IDLE_S + RUN_S) / STEP_S) + 1
    times = [begin + k * STEP_S for k in range(steps)]
    run_began = begin + IDLE_S

    def made(t: float) -> float:
        return max(0.0, t - run_began) / STEP_S  # steps of the run so far

    lines = ["# TYPE vllm:generation_tokens counter"]
    for node in NODES:
        for t in times:
            value = LIFETIME + RATES[node] * made(t) * STEP_S
            lines.append(f'vllm:generation_tokens_total{{node="{node}"}} {value} {t:.3f}')
    lines.append("# TYPE vllm:time_to_first_token_seconds histogram")
    for node in NODES:
        for t in times:
            count = 100 + FIRST_TOKENS_PER_STEP * made(t)
            for bound in TTFT_BOUNDS:
                in_bucket = 30 if bound == 0.1 else count  # the new ones all land in (0.1, 0.5]
                labels = f'node="{node}",le="{bound}"'
                lines.append(f"vllm:time_to_first_token_seconds_bucket{{{labels}}} {in_bucket} {t:.3f}")
            lines.append(
                f'vllm:time_to_first_token_seconds_bucket{{node="{node}",le="+Inf"}} {count} {t:.3f}'
            )
            lines.append(f'vllm:time_to_first_token_seconds_count{{node="{node}"}} {count} {t:.3f}')
            lines.append(f'vllm:time_to_first_token_seconds_sum{{node="{node}"}} {count * 0.3} {t:.3f}')
    lines.append("# TYPE DCGM_FI_DEV_POWER_USAGE gauge")
    for (node, gpu), watts in POWER_W.items():
        for t in times:
            lines.append(f'DCGM_FI_DEV_POWER_USAGE{{node="{node}",gpu="{gpu}"}} {watts} {t:.3f}')
    return "\n".join(lines) + "\n# EOF\n"


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> Iterator[History]:
    tmp = tmp_path_factory.mktemp("prometheus-history")
    now = time.time()
    begin = now - IDLE_S - RUN_S - 1.0
    source = tmp / "samples.om"
    source.write_text(openmetrics(begin))
    data = tmp / "data"
    subprocess.run(
        [str(PROMTOOL), "tsdb", "create-blocks-from", "openmetrics", str(source), str(data)],
        check=True,
        capture_output=True,
        timeout=60,
    )
    (tmp / "prometheus.yml").write_text("global:\n  scrape_interval: 1m\n")

    proc, url = start_prometheus(str(PROMETHEUS), tmp / "prometheus.yml", data, tmp / "prometheus.log")
    try:
        deadline = time.monotonic() + PATIENCE_S
        while True:
            with contextlib.suppress(OSError), urllib.request.urlopen(f"{url}/-/ready", timeout=2) as answer:
                if answer.status == 200:
                    break
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"prometheus did not start: {(tmp / 'prometheus.log').read_text()[-500:]}")
            time.sleep(0.2)
        yield History(url, begin + IDLE_S, begin + IDLE_S + RUN_S)
    finally:
        stop_process(proc)


def collector(url: str) -> PrometheusQueryCollector:
    return PrometheusQueryCollector(
        url=url, nodes=NODES, gpus_per_node=1, interval_s=STEP_S, gpu=True, progress=True, now=lambda: 0.0
    )


def test_prometheus_knows_when_the_run_began_and_fills_in_its_history(history: History) -> None:
    source = collector(history.url)
    watch = time.time()
    began = asyncio.run(source.run_start(watch))
    assert began is not None
    assert began == pytest.approx(history.run_began, abs=2 * STEP_S)  # to a step of the range query
    events = asyncio.run(source.history(began, watch))
    clock = run_clock(watch, [("prometheus", began)])
    core = RackCore()
    core.ingest(RunStarted(0.0, "t", "Server", NODES, 1, None, None, "live", clock.start_wall))
    for event in merged([Backfill("prometheus", events)], clock):
        core.ingest(event)
    summary = core.summary()
    for node in summary.nodes:  # the lifetime counters are the baseline; what the run made is credited
        assert node.tokens_per_s == pytest.approx(RATES[node.name], rel=0.01)
    steps = (history.last_sample - began) / STEP_S
    ttft = core.state.rack_latency["ttft"].total
    assert ttft == pytest.approx(
        len(NODES) * FIRST_TOKENS_PER_STEP * steps, abs=len(NODES) * FIRST_TOKENS_PER_STEP
    )
    assert core.snapshot().aggregate.power_w == pytest.approx(sum(POWER_W.values()))
    # a live poll right after the history credits only what grew since its last point: nothing here
    live = asyncio.run(_poll(source))
    (batch,) = [e for e in live if isinstance(e, ProgressBatch)]
    assert batch.tokens_done.tolist() == core.state.tokens.tolist()
    assert not [e for e in live if isinstance(e, LatencyBatch)]


async def _poll(source: PrometheusQueryCollector) -> list:  # type: ignore[type-arg]
    from tokenwatch.inputs.prometheus.api import PrometheusApi

    async with PrometheusApi(source.url) as api:
        return await source.poll(api)


async def test_watch_through_prometheus_attaches_with_the_run_s_history(
    history: History, tmp_path: Path
) -> None:
    cfg = tmp_path / "fleet.yaml"
    cfg.write_text(
        "run: {name: fleet, scenario: Server}\n"
        "nodes: {gpus_per_node: 1, hosts: [node01, node02]}\n"
        f"gpu: {{source: prometheus, url: '{history.url}', interval: 5s}}\n"
        f"progress:\n  - {{kind: prometheus-query, url: '{history.url}', interval: 5s, lookback: 1h}}\n"
    )
    config = load_watch_config(cfg)
    run = LiveRun(config, build_collector(config))
    async with run:
        await run.wait_for("the history", lambda: (a := attached_at(run)) is not None and run.core.now >= a)
    start = next(e for e in run.events if isinstance(e, RunStarted))
    assert start.meta["t0"] == "prometheus"
    assert start.wall_epoch == pytest.approx(history.run_began, abs=2 * STEP_S)
    summary = run.core.summary()
    for node in summary.nodes:
        assert node.tokens_per_s == pytest.approx(RATES[node.name], rel=0.01)
