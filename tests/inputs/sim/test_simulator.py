"""The simulator: deterministic, pacing-independent, and its output behaves as its inputs say."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

import numpy as np
import pytest

from tokenwatch.base import throttle
from tokenwatch.base.clock import ManualClock
from tokenwatch.base.events import (
    GPU_METRICS,
    Event,
    GpuBatch,
    LatencyBatch,
    NodeStatus,
    ProgressBatch,
    RunEnded,
    RunStarted,
)
from tokenwatch.base.yaml_schema import SchemaError
from tokenwatch.core import RackCore
from tokenwatch.inputs.sim.collector import SimulatorCollector
from tokenwatch.inputs.sim.faults import FaultError, parse_faults
from tokenwatch.inputs.sim.profile import load_profile
from tokenwatch.inputs.sim.rack_sim import SLOW_FACTOR, RackSimulation, SimSettings
from tokenwatch.recording.codec import dumps

GB300 = load_profile("gb300-nvl72")
NODES = GB300.node_names()
POWER = GPU_METRICS.index("power_w")
CLOCK = GPU_METRICS.index("sm_clock_mhz")


def short(**kw) -> SimSettings:
    return SimSettings(GB300, duration_s=kw.pop("duration_s", 600.0), **kw)


def encoded(events: list[Event]) -> list[bytes]:
    return [dumps(e) for e in events]


def test_same_seed_same_stream_different_seed_different_stream() -> None:
    a = encoded(list(RackSimulation(short(seed=4)).events()))
    b = encoded(list(RackSimulation(short(seed=4)).events()))
    c = encoded(list(RackSimulation(short(seed=5)).events()))
    assert a == b
    assert a != c


@pytest.mark.parametrize("speed", [1.0, 60.0, 1000.0])
def test_stream_is_identical_for_every_speed(speed: float) -> None:
    settings = short(seed=9, duration_s=120.0)
    unpaced = encoded(list(RackSimulation(settings).events()))
    got: list[Event] = []

    async def emit(event: Event) -> None:
        got.append(event)

    clock = ManualClock()
    asyncio.run(SimulatorCollector(settings, speed=speed, clock=clock).run(emit))
    assert encoded(got) == unpaced
    # Paced: the run took its run time divided by the speed on the injected clock.
    assert clock.time() == pytest.approx(got[-1].t / speed, rel=0.01)


def node_finals(events: list[Event]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Independent of the core: each node's final tokens, samples and last-change time from raw batches."""
    tokens = np.zeros(len(NODES))
    samples = np.zeros(len(NODES))
    last_change = np.zeros(len(NODES))
    for e in events:
        if isinstance(e, ProgressBatch):
            grew = e.tokens_done > tokens[e.node_index]
            last_change[e.node_index[grew]] = e.t
            tokens[e.node_index] = e.tokens_done
            samples[e.node_index] = e.samples_done
    return tokens, samples, last_change


def test_offline_run_does_all_samples_and_nodes_finish_at_their_own_time() -> None:
    settings = short(seed=1, duration_s=1200.0)
    events = list(RackSimulation(settings).events())
    start = events[0]
    assert isinstance(start, RunStarted)
    tokens, samples, last_change = node_finals(events)
    assert samples.sum() == start.total_samples
    measured = tokens / last_change  # each node's tokens over its own duration (it starts at 0)
    spec = GB300.node_tokens_per_s
    assert spec.min is not None
    assert spec.max is not None
    assert (measured > spec.min * 0.98).all()
    assert (measured < spec.max * 1.02).all()
    assert len(np.unique(last_change)) > 1  # a tail: nodes finish at different times
    finished = [e.node for e in events if isinstance(e, NodeStatus) and e.state == "finished"]
    assert sorted(finished) == sorted(NODES)
    assert isinstance(events[-1], RunEnded)
    assert events[-1].t == last_change.max()


def test_core_reads_the_simulated_throughput_as_raw_counters_say() -> None:
    events = list(RackSimulation(short(seed=2, duration_s=900.0)).events())
    core = RackCore()
    for e in events:
        core.ingest(e)
    tokens, _, last_change = node_finals(events)
    means, _ = core.state.measured_means()
    assert means == pytest.approx(tokens / last_change)


def test_gpu_telemetry_stays_physical() -> None:
    events = list(RackSimulation(short(seed=3)).events())
    batches = [e for e in events if isinstance(e, GpuBatch)]
    values = np.concatenate([b.values for b in batches])
    reasons = np.concatenate([b.throttle_reasons for b in batches])
    assert (values[:, POWER] <= GB300.gpu.power_limit_w).all()
    assert (values[:, POWER] > 0).all()
    capped = (reasons & throttle.SW_POWER_CAP) != 0
    busy = values[:, GPU_METRICS.index("util_pct")] > 50
    assert capped.any()
    # Power-capped GPUs run their SM clock lower than uncapped busy ones.
    assert values[capped, CLOCK].mean() < values[busy & ~capped, CLOCK].mean()
    hbm = values[:, GPU_METRICS.index("hbm_used_mib")].reshape(len(batches), -1)
    assert (hbm == hbm[0]).all()  # steady
    assert (values[:, GPU_METRICS.index("hbm_used_mib")] <= GB300.gpu.hbm_total_mib).all()
    temp = values[:, GPU_METRICS.index("temp_c")].reshape(len(batches), -1)
    assert temp[300].mean() > temp[1].mean() + 5  # warms up under load


def per_node_rate(events: list[Event], node: int, t0: float, t1: float) -> float:
    cum = {
        e.t: int(e.tokens_done[list(e.node_index).index(node)])
        for e in events
        if isinstance(e, ProgressBatch) and node in e.node_index
    }
    return (cum[t1] - cum[t0]) / (t1 - t0)


def test_faults_shape_the_stream() -> None:
    faults = parse_faults(
        "node07:down@300s,node03:throttle@200s-400s,node11:slow@200s-500s,node05:stale@120s-140s", NODES
    )
    events = list(RackSimulation(short(seed=6, faults=faults, duration_s=900.0)).events())
    statuses = [(e.t, e.node, e.state) for e in events if isinstance(e, NodeStatus) and e.state != "up"]
    assert (300.0, "node07", "down") in statuses
    after_down = [e for e in events if isinstance(e, GpuBatch | ProgressBatch) and e.t >= 300]
    assert all(6 not in e.node_index for e in after_down)
    silent = [e for e in events if isinstance(e, GpuBatch) and 120 <= e.t < 140]
    assert silent
    assert all(4 not in e.node_index for e in silent)
    # slow: node11 runs at SLOW_FACTOR of its own pace inside the window.
    before, during = per_node_rate(events, 10, 100, 190), per_node_rate(events, 10, 250, 340)
    assert during / before == pytest.approx(SLOW_FACTOR, rel=0.03)
    throttled = [e for e in events if isinstance(e, GpuBatch) and 250 <= e.t < 260]
    for b in throttled:
        rows = b.node_index == 2
        assert ((b.throttle_reasons[rows] & throttle.HW_SLOWDOWN) != 0).all()
        assert b.values[rows, CLOCK].mean() < 0.75 * b.values[~rows, CLOCK].mean()
    assert isinstance(events[-1], RunEnded)
    assert "node07" not in [e.node for e in events if isinstance(e, NodeStatus) and e.state == "finished"]


def test_server_scenario_makes_poisson_arrivals_and_latencies() -> None:
    settings = dataclasses.replace(short(seed=8, duration_s=300.0), scenario="Server")
    events = list(RackSimulation(settings).events())
    assert isinstance(events[0], RunStarted)
    assert events[0].total_samples is None
    latency = [e for e in events if isinstance(e, LatencyBatch)]
    assert {e.metric for e in latency} == {"ttft", "tpot", "e2e"}
    ttft = np.repeat(
        np.concatenate([e.values_s for e in latency if e.metric == "ttft"]),
        np.concatenate([e.counts for e in latency if e.metric == "ttft"]),
    )
    _, samples, _ = node_finals(events)
    assert ttft.size == samples.sum()  # one TTFT per completed sample
    assert np.median(ttft) == pytest.approx(GB300.server.ttft_median_s, rel=0.1)
    # Arrivals: after the warm-up each node completes about its Poisson rate per second.
    steady = samples.sum() / (300 - 15)
    assert steady == pytest.approx(GB300.server.samples_per_s_per_node * len(NODES), rel=0.1)


@pytest.mark.parametrize(
    ("spec", "problem"),
    [
        ("node07", "NODE:KIND@START"),
        ("node99:down@1m", "no node 'node99'"),
        ("node01:explode@1m", "kind must be one of"),
        ("node01:down@soon", "bad duration"),
        ("node01:slow@10m-5m", "end must come after"),
    ],
)
def test_bad_faults_are_one_clear_line(spec: str, problem: str) -> None:
    with pytest.raises(FaultError, match=problem) as info:
        parse_faults(spec, NODES)
    assert "\n" not in str(info.value)


def test_user_profile_file_and_its_errors(tmp_path: Path) -> None:
    text = Path(str(load_profile.__globals__["builtin_profiles"]()["h100-dgx"])).read_text()
    good = tmp_path / "mine.yaml"
    good.write_text(text.replace("name: h100-dgx", "name: my-rack").replace("nodes: 1", "nodes: 2"))
    profile = load_profile(str(good))
    assert profile.name == "my-rack"
    assert profile.node_names() == ("node01", "node02")
    bad = tmp_path / "bad.yaml"
    bad.write_text(text.replace("  power_limit_w: 700", "  power_limit_w: lots"))
    with pytest.raises(SchemaError, match=r"bad.yaml:\d+: gpu.power_limit_w: expected a number"):
        load_profile(str(bad))
    typo = tmp_path / "typo.yaml"
    typo.write_text(text + "colour: blue\n")
    with pytest.raises(SchemaError, match="colour: unknown key"):
        load_profile(str(typo))
    with pytest.raises(SchemaError, match="unknown profile"):
        load_profile("no-such-profile")
