"""A real Prometheus server scrapes tokenwatch's /metrics and real dcgm-exporter / vLLM expositions;
its HTTP API must give back the core's figures, and the query collector must rebuild them."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import wait_until
from tests.frontends.conftest import DATA, SERVER_RUN, PromFleet
from tokenwatch.base.clock import ManualClock
from tokenwatch.base.events import (
    GPU_METRICS,
    LATENCY_METRICS,
    Event,
    GpuBatch,
    LatencyBatch,
    Notice,
    Progress,
    ProgressBatch,
    RunStarted,
)
from tokenwatch.core import RackCore
from tokenwatch.core.latency_buckets import DEFAULT_BOUNDS_S
from tokenwatch.inputs.prometheus.query import PrometheusQueryCollector
from tokenwatch.recording import RecordingReader


def _collector(**settings: Any) -> PrometheusQueryCollector:
    """A collector of this file's fleet: 4 GPUs a node under the label ``node``, polled each second on a
    manual clock; ``settings`` the rest (the server, the nodes, what it reads) and any of those it sets."""
    defaults: dict[str, Any] = {"gpus_per_node": 4, "node_label": "node", "interval_s": 1.0}
    return PrometheusQueryCollector(**{**defaults, "clock": ManualClock(), **settings})


def test_rack_and_node_figures_come_back(prom_fleet: PromFleet) -> None:
    core = prom_fleet.core
    snap = core.snapshot()
    ((_, measured),) = prom_fleet.query("tokenwatch_rack_measured_tokens_per_second")
    assert measured == pytest.approx(snap.aggregate.tokens_per_s_cumulative, rel=1e-12)
    ((_, gpus),) = prom_fleet.query("tokenwatch_rack_gpus")
    assert gpus == 72
    tokens = {lab["node"]: v for lab, v in prom_fleet.query("tokenwatch_node_generated_tokens_total")}
    assert tokens == {n: float(core.state.tokens[i]) for i, n in enumerate(snap.run.nodes)}
    power = prom_fleet.query('tokenwatch_gpu_power_watts{node="node05",gpu="2"}')
    assert power[0][1] == core.state.gpu_values[4, 2, GPU_METRICS.index("power_w")]
    ((_, rack_power),) = prom_fleet.query("sum(tokenwatch_gpu_power_watts)")
    assert rack_power == pytest.approx(float(np.nansum(core.state.gpu_values[:, :, 0])), rel=1e-9)


def _recorded_ttft() -> tuple[np.ndarray, np.ndarray]:
    values, counts = [], []
    for event in RecordingReader(SERVER_RUN).events():
        if isinstance(event, LatencyBatch) and event.metric == "ttft":
            values.append(event.values_s)
            counts.append(np.ones(len(event.values_s), np.int64) if event.counts is None else event.counts)
    return np.concatenate(values), np.concatenate(counts)


def test_latency_histograms_come_back(prom_fleet: PromFleet) -> None:
    values, counts = _recorded_ttft()
    ((_, total),) = prom_fleet.query("sum(tokenwatch_ttft_seconds_count)")
    assert total == counts.sum()
    buckets = {
        float(lab["le"]): v for lab, v in prom_fleet.query("sum by (le) (tokenwatch_ttft_seconds_bucket)")
    }
    assert sorted(buckets) == sorted([*DEFAULT_BOUNDS_S, math.inf])
    for bound in (0.2, 0.5, 1.0):
        # Independent: the recorded observations at or below the bound, within the core's 1 % buckets.
        assert counts[values <= bound * 0.99].sum() <= buckets[bound] <= counts[values <= bound * 1.01].sum()
    ((_, p99),) = prom_fleet.query("histogram_quantile(0.99, sum by (le) (tokenwatch_ttft_seconds_bucket))")
    core_p99 = prom_fleet.core.snapshot().latency["ttft"].p99
    lower = max(b for b in DEFAULT_BOUNDS_S if b < core_p99)
    upper = min(b for b in DEFAULT_BOUNDS_S if b >= core_p99)
    assert lower <= p99 <= upper  # Prometheus interpolates inside the bucket that holds the core's p99


def _collect(collector: PrometheusQueryCollector) -> list[Event]:
    import asyncio

    events: list[Event] = []

    async def emit(event: Event) -> None:
        events.append(event)

    asyncio.run(collector.run(emit))
    return events


def test_collector_rebuilds_the_fleet_from_prometheus(prom_fleet: PromFleet) -> None:
    source = prom_fleet.core
    run = source.run
    assert run is not None
    rebuilt: list[RackCore] = []

    def rebuild() -> bool:
        """One poll into a new core: True when its counters are the source's. A scrape that timed out
        on a loaded machine leaves the series stale at the poll's instant, so a poll is asked again
        until one falls on a good scrape; a collector that reads them wrong never gets there."""
        collector = _collector(
            url=prom_fleet.url,
            nodes=run.nodes,
            gpu=True,
            progress=True,
            now=lambda: 1.0,
            gpu_preset="tokenwatch",
            progress_preset="tokenwatch",
            polls=1,
            baseline=False,  # the fleet's totals as they stand, not the growth since this poll
        )
        events = _collect(collector)
        assert not [e for e in events if isinstance(e, Notice)], events
        core = RackCore()
        core.ingest(RunStarted(0.0, "via prometheus", run.scenario, run.nodes, 4, None, None, "live", 0.0))
        for event in events:
            core.ingest(event)
        rebuilt[:] = [core]
        return bool((core.state.tokens == source.state.tokens).all())

    wait_until(rebuild, "a poll whose counters are the source's", poll_s=1.0)
    core = rebuilt[0]
    assert (core.state.samples == source.state.samples).all()
    for metric in ("power_w", "power_limit_w", "sm_clock_mhz", "hbm_used_mib", "temp_c", "util_pct"):
        k = GPU_METRICS.index(metric)
        np.testing.assert_allclose(
            core.state.gpu_values[:, :, k], source.state.gpu_values[:, :, k], rtol=1e-9
        )
    for metric in LATENCY_METRICS:
        assert core.state.rack_latency[metric].total == source.state.rack_latency[metric].total
        got = core.state.rack_latency[metric].quantiles([0.5])[0]
        want = source.state.rack_latency[metric].quantiles([0.5])[0]
        lower = max([0.0, *(b for b in DEFAULT_BOUNDS_S if b < want)])
        upper = min(b for b in DEFAULT_BOUNDS_S if b >= want)
        assert lower * 0.98 <= got <= upper * 1.02  # the same Prometheus bucket, to the core's 1 %


def _exposition(path: Path) -> dict[tuple[str, str, str], float]:
    out = {}
    for fam in text_string_to_metric_families(path.read_text()):
        for s in fam.samples:
            out[(s.name, s.labels.get("Hostname", ""), s.labels.get("gpu", ""))] = s.value
    return out


def test_collector_reads_real_dcgm_exporter_output(prom_fleet: PromFleet) -> None:
    expected = _exposition(DATA / "dcgm_datadog_fixture.prom")
    hosts = ("424773df46e0", "551bdf382151")
    collector = _collector(
        url=prom_fleet.url,
        nodes=hosts,
        gpus_per_node=1,
        node_label="Hostname",
        gpu=True,
        progress=False,
        now=lambda: 2.0,
        polls=1,
    )
    (batch,) = [e for e in _collect(collector) if isinstance(e, GpuBatch)]
    row = {
        (hosts[i], g): r
        for r, (i, g) in enumerate(zip(batch.node_index.tolist(), batch.gpu.tolist(), strict=True))
    }
    first = batch.values[row[(hosts[0], 0)]]
    assert first[GPU_METRICS.index("sm_clock_mhz")] == expected[("DCGM_FI_DEV_SM_CLOCK", hosts[0], "0")]
    assert first[GPU_METRICS.index("power_w")] == expected[("DCGM_FI_DEV_POWER_USAGE", hosts[0], "0")]
    assert first[GPU_METRICS.index("temp_c")] == expected[("DCGM_FI_DEV_GPU_TEMP", hosts[0], "0")]
    assert first[GPU_METRICS.index("hbm_total_mib")] == (
        expected[("DCGM_FI_DEV_FB_USED", hosts[0], "0")] + expected[("DCGM_FI_DEV_FB_FREE", hosts[0], "0")]
    )
    second = batch.values[row[(hosts[1], 0)]]
    assert (
        second[GPU_METRICS.index("power_limit_w")]
        == expected[("DCGM_FI_DEV_POWER_MGMT_LIMIT", hosts[1], "0")]
    )
    reasons = batch.throttle_reasons[row[(hosts[1], 0)]]
    assert reasons == expected[("DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", hosts[1], "0")]


def test_collector_reads_real_vllm_counters_and_ttft(prom_fleet: PromFleet) -> None:
    collector = _collector(
        url=prom_fleet.url,
        nodes=("vllm-node",),
        gpus_per_node=1,
        gpu=False,
        progress=True,
        now=lambda: 3.0,
        polls=1,
        baseline=False,  # the server's counters as they stand
    )
    events = _collect(collector)
    (progress,) = [e for e in events if isinstance(e, ProgressBatch)]
    assert progress.tokens_done.tolist() == [218152]
    assert progress.prompt_tokens_done is not None
    assert progress.prompt_tokens_done.tolist() == [1196]
    (ttft,) = [e for e in events if isinstance(e, LatencyBatch)]
    # Buckets 0/0/0/112/211/211/213 at le=0.001..0.08:
    # 112 in (0.01, 0.02], 99 in (0.02, 0.04], 2 in (0.06, 0.08].
    assert ttft.counts is not None
    assert ttft.counts.tolist() == [112, 99, 2]
    np.testing.assert_allclose(
        ttft.values_s, [math.sqrt(0.01 * 0.02), math.sqrt(0.02 * 0.04), math.sqrt(0.06 * 0.08)]
    )


def test_a_watch_attaching_to_a_busy_server_takes_its_counters_as_a_baseline(prom_fleet: PromFleet) -> None:
    """Watching: the first poll of a server that has served 218,152 tokens credits the run nothing."""
    collector = PrometheusQueryCollector(
        url=prom_fleet.url,
        nodes=("vllm-node",),
        gpus_per_node=1,
        gpu=False,
        now=lambda: 3.0,
        clock=ManualClock(),
        polls=2,
    )
    events = _collect(collector)
    assert [e.tokens_done.tolist() for e in events if isinstance(e, ProgressBatch)] == [[0], [0]]
    assert not [e for e in events if isinstance(e, LatencyBatch)]


def test_collector_reports_bad_queries_once(prom_fleet: PromFleet) -> None:
    collector = _collector(
        url=prom_fleet.url,
        nodes=("node01",),
        gpu=False,
        progress=True,
        now=lambda: 4.0,
        progress_preset="tokenwatch",
        queries={"tokens": "sum by (node) (", "ttft": "", "tpot": "", "e2e": ""},
        polls=3,
    )
    notices = [e for e in _collect(collector) if isinstance(e, Notice)]
    assert len(notices) == 1
    assert "bad_data" in notices[0].message
    assert "'tokens'" in notices[0].message


def test_grafana_dashboard_queries_run_on_prometheus(prom_fleet: PromFleet) -> None:
    """Every panel query of the shipped dashboard is valid PromQL over metrics tokenwatch serves."""
    import re

    import orjson

    from tests.conftest import REPO_ROOT
    from tokenwatch.frontends.metrics.exposition import render
    from tokenwatch.frontends.metrics.families import take_view

    dashboard = orjson.loads((REPO_ROOT / "grafana" / "tokenwatch-dashboard.json").read_bytes())
    served = set(re.findall(rb"^# TYPE (\w+)", render(take_view(prom_fleet.core)), flags=re.M))
    exprs = [t["expr"] for panel in dashboard["panels"] for t in panel["targets"]]
    assert len(exprs) >= 20
    for expr in exprs:
        promql = expr.replace("$job", ".*").replace("$node", ".*").replace("$__rate_interval", "1m")
        prom_fleet.query(promql)  # raises PromApiError on bad PromQL
        for name in re.findall(r"tokenwatch_\w+", promql):
            family = re.sub(r"_(bucket|count|sum)$", "", name)
            assert family.encode() in served, name


def test_every_preset_query_is_valid_promql(prom_fleet: PromFleet) -> None:
    """The PromQL built from the metric catalogue parses and runs on a real Prometheus, every preset."""
    from tokenwatch.inputs.prometheus.presets import GPU_PRESETS, PROGRESS_PRESETS

    templates = [
        q for presets in (GPU_PRESETS, PROGRESS_PRESETS) for p in presets.values() for q in p.values()
    ]
    assert len(templates) >= 30
    for template in templates:
        prom_fleet.query(template.replace("{node}", "node").replace("{gpu}", "gpu"))  # PromApiError if bad


def test_a_second_family_stands_in_per_node(prom_fleet: PromFleet) -> None:
    """``first_present``: each node reads the first family it has, never a mix of two families' buckets."""
    from tokenwatch.inputs.prometheus.presets import first_present

    promql = first_present(
        "sum by ({node}, le)", ["vllm:time_to_first_token_seconds_bucket", "tokenwatch_ttft_seconds_bucket"]
    ).replace("{node}", "node")
    got: dict[str, set[float]] = {}
    for labels, _ in prom_fleet.query(promql):
        got.setdefault(labels["node"], set()).add(float(labels["le"]))
    vllm = {float(lab["le"]) for lab, _ in prom_fleet.query("vllm:time_to_first_token_seconds_bucket")}
    assert got.pop("vllm-node") == vllm  # the vLLM node: its own family only
    assert len(got) == 18
    assert all(bounds == {*DEFAULT_BOUNDS_S, math.inf} for bounds in got.values())  # the others: tokenwatch's


def test_scrape_and_query_read_tokenwatch_metrics_alike(prom_fleet: PromFleet) -> None:
    """The same catalogue preset read from the /metrics text and through Prometheus gives the same events."""
    from tokenwatch.frontends.metrics.exposition import render
    from tokenwatch.frontends.metrics.families import take_view
    from tokenwatch.sources.prometheus_metrics import MetricsScrapeParser

    run = prom_fleet.core.run
    assert run is not None
    scraped = MetricsScrapeParser("tokenwatch", node_label="node", nodes=run.nodes, baseline=False).parse(
        render(take_view(prom_fleet.core)).decode(), 1.0
    )
    collector = PrometheusQueryCollector(
        url=prom_fleet.url,
        nodes=run.nodes,
        gpus_per_node=4,
        now=lambda: 1.0,
        clock=ManualClock(),
        gpu_preset="tokenwatch",
        progress_preset="tokenwatch",
        polls=1,
        baseline=False,
    )
    queried = _collect(collector)
    (scraped_gpu,) = [e for e in scraped if isinstance(e, GpuBatch)]
    (queried_gpu,) = [e for e in queried if isinstance(e, GpuBatch)]

    def rows(batch: GpuBatch) -> dict[tuple[int, int], list[float]]:
        keys = zip(batch.node_index.tolist(), batch.gpu.tolist(), strict=True)
        return {k: [*batch.values[r].tolist(), int(batch.throttle_reasons[r])] for r, k in enumerate(keys)}

    want, got = rows(queried_gpu), rows(scraped_gpu)
    assert sorted(got) == sorted(want)
    for key, row in want.items():
        np.testing.assert_allclose(got[key], row, rtol=1e-12, equal_nan=True)
    (progress,) = [e for e in queried if isinstance(e, ProgressBatch)]
    tokens = {e.node: e.tokens_done for e in scraped if isinstance(e, Progress)}
    assert tokens == {run.nodes[i]: v for i, v in zip(progress.node_index, progress.tokens_done, strict=True)}

    def latency(events: list[Event]) -> dict[tuple[str, str], list[tuple[float, int]]]:
        out: dict[tuple[str, str], list[tuple[float, int]]] = {}
        for e in events:
            if isinstance(e, LatencyBatch):
                assert e.counts is not None
                out[(e.node, e.metric)] = list(zip(e.values_s.tolist(), e.counts.tolist(), strict=True))
        return out

    assert latency(scraped) == latency(queried)
    assert len(latency(scraped)) == 18 * 3
