"""One pair of TTFT/TPOT limits on every surface: the latency panel's SLA line, the SLA alert and the
verdict's rules use the limits the verdict counts against (LoadGen's own, else the benchmark's), not the
default alert SLA. On the Interactive benchmark the latency panel said "SLA 2.00 s ✓ p99 under" beside a
verdict "✗ TTFT p99 918 ms, limit 450 ms"."""

from __future__ import annotations

import dataclasses

import pytest

from tokenwatch.base.events import Event, LoadGenDetail, RunStarted
from tokenwatch.core import CoreConfig, RackCore
from tokenwatch.inputs.sim.profile import load_profile
from tokenwatch.inputs.sim.rack_sim import RackSimulation, SimSettings
from tokenwatch.mlperf.rules import latency_limits, normalize_benchmark


def server_run(benchmark: str) -> tuple[RackCore, list[Event]]:
    # as `sim --benchmark` does: the simulated LoadGen runs the benchmark asked for
    profile = dataclasses.replace(load_profile("gb300-nvl72"), benchmark=benchmark)
    events = list(RackSimulation(SimSettings(profile, scenario="Server", seed=3, duration_s=180.0)).events())
    core = RackCore(CoreConfig(benchmark=benchmark))
    for event in events:
        core.ingest(event)
    return core, events


@pytest.mark.parametrize("benchmark", ["llama2-70b-interactive", "llama2-70b"])
def test_the_latency_panel_and_the_verdict_show_the_same_limits(benchmark: str) -> None:
    core, _ = server_run(benchmark)
    ref = normalize_benchmark(benchmark)
    assert ref is not None
    expected = latency_limits(ref, "Server")
    assert expected is not None
    snap = core.snapshot()
    assert snap.sla_s["ttft"] == pytest.approx(expected.ttft_s)
    assert snap.sla_s["tpot"] == pytest.approx(expected.tpot_s)
    assert snap.verdict is not None
    rules = {r.name: r for r in snap.verdict.forecast.rules}
    for metric in ("ttft", "tpot"):
        rule = rules.get(f"{metric}_p99")
        if rule is not None and rule.limit is not None:
            assert rule.limit == pytest.approx(snap.sla_s[metric])
    for alert in snap.alerts:  # an SLA breach names the limit the verdict judges by
        if alert.kind == "sla_ttft":
            assert f"> {expected.ttft_s:g} s" in alert.message


def test_loadgens_own_limits_replace_the_benchmarks_on_every_panel() -> None:
    core = RackCore(CoreConfig(benchmark="llama2-70b"))
    core.ingest(RunStarted(0.0, "r", "Server", ("n1",), 1, None, None, "live", 0.0))
    settings = {
        "effective_scenario": "Server",
        "requested_use_token_latencies": True,
        "requested_server_ttft_latency": 300_000_000,
        "requested_server_tpot_latency": 50_000_000,
        "effective_min_duration_ms": 600_000,
        "effective_min_query_count": 100,
        "effective_min_sample_count": 100,
        "effective_target_latency_percentile": 0.99,
        "effective_samples_per_query": 1,
        "effective_target_qps": 10,
    }
    core.ingest(LoadGenDetail(0.5, "n1", settings))
    snap = core.snapshot(1.0)
    assert snap.sla_s["ttft"] == pytest.approx(0.3)
    assert snap.sla_s["tpot"] == pytest.approx(0.05)
