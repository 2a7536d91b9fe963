"""Energy from the GPUs' own counters against integrated power, on the real captures: NVML answering with
the power an H100 and an H200 recorded (nvml-recorded.json, from their nvidia-smi -q captures) and real
dcgm-exporter scrapes of T4s (dcgm-1.4.6-t4x2.prom, datadog-dcgm-t4-a10g.txt). The captures are single
readings, so the run around them is made here: the H100 switches between its recorded load and idle power
at times off the polling grid, and its counter counts the energy of that trace exactly, from where a real
counter stood. The counter path must give that energy to the millijoule; integrated power may miss only
what the polling cannot see, and both are checked against that bound. Cost: well under a second."""

from __future__ import annotations

import itertools
import json
import math
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pynvml
import pytest
from live_support import DATA

from tokenwatch.base.events import GPU_METRICS, GpuBatch, NodeStatus, ProgressBatch, RunStarted
from tokenwatch.core import RackCore
from tokenwatch.inputs.live.nvml_source import NvmlReader
from tokenwatch.sources.prometheus_metrics import MetricsScrapeParser

SOURCES = Path(__file__).resolve().parents[1] / "data" / "sources" / "prometheus"
T4X2 = DATA / "dcgm-1.4.6-t4x2.prom"  # dcgm-exporter 1.4.6, two T4s (tests/data/live/README.md)
COUNTER_START_MJ = 15_347_724_978  # where T4X2's GPU0 counter stood: a counter counts since boot
POLL_S = 2.0  # NVML read every 2 s; its power is the last second's average, so every other second is unseen
SWITCH_S = 2.6  # the H100 switches between its load and idle power this often, off the polling grid


RECORDED: dict[str, dict[str, Any]] = json.loads((DATA / "nvml-recorded.json").read_text())["gpus"]


class TracedNvml:
    """pynvml's functions that NvmlReader calls, for an H100 (alternating between its recorded load and
    idle power) and an H200 (its recorded load power), with a cumulative energy counter. The functions
    it leaves out read as not supported."""

    NVMLError = pynvml.NVMLError
    NVML_CLOCK_SM = pynvml.NVML_CLOCK_SM
    NVML_CLOCK_MEM = pynvml.NVML_CLOCK_MEM
    NVML_TEMPERATURE_GPU = pynvml.NVML_TEMPERATURE_GPU
    counter = True

    def __init__(self) -> None:
        self.now = 0.0

    def nvmlInit(self) -> None:
        pass

    def nvmlShutdown(self) -> None:
        pass

    def nvmlDeviceGetCount(self) -> int:
        return 2

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        return index

    def watts(self, h: int, t: float) -> float:
        """The true power of GPU ``h`` at ``t`` (W): the recorded figures, switched on a schedule."""
        capture = "h200-load" if h == 1 else ("h100-load" if int(t // SWITCH_S) % 2 == 0 else "h100-idle")
        return float(RECORDED[capture]["nvmlDeviceGetPowerUsage"]) / 1000

    def energy_j(self, h: int, t0: float, t1: float) -> float:
        """The true energy of GPU ``h`` from t0 to t1 (J), integrated piecewise over the schedule."""
        inner = [k * SWITCH_S for k in range(math.floor(t0 / SWITCH_S) + 1, math.ceil(t1 / SWITCH_S))]
        edges = [t0, *inner, t1]
        return sum(self.watts(h, (a + b) / 2) * (b - a) for a, b in itertools.pairwise(edges))

    def nvmlDeviceGetPowerUsage(self, h: int) -> int:  # the last second's average, in mW, as on Hopper
        return round(self.energy_j(h, self.now - 1.0, self.now) * 1000)

    def nvmlDeviceGetEnforcedPowerLimit(self, h: int) -> int:
        return int(RECORDED["h200-load" if h else "h100-load"]["nvmlDeviceGetEnforcedPowerLimit"])

    def nvmlDeviceGetTotalEnergyConsumption(self, h: int) -> int:  # mJ since "boot"
        if not self.counter:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return COUNTER_START_MJ + math.floor(self.energy_j(h, -3600.0, self.now) * 1000)


def _run(nvml: TracedNvml, until_s: float) -> RackCore:
    core = RackCore()
    core.ingest(RunStarted(0.0, "energy", "Offline", ("node00",), 2, None, None, "live", 0.0))
    core.ingest(NodeStatus(0.0, "node00", "up"))
    reader = NvmlReader(nvml)
    reader.open()
    t = POLL_S
    while t <= until_s:
        nvml.now = t
        core.ingest(reader.read(t))
        tokens = np.array([int(t * 3000)])
        core.ingest(ProgressBatch(t, np.array([0]), tokens // 300, tokens))
        t += POLL_S
    return core


def test_counter_energy_is_the_true_energy_and_integrated_power_is_off_by_what_polling_misses() -> None:
    nvml = TracedNvml()
    core = _run(nvml, 600.0)
    snap = core.snapshot()
    first, last = POLL_S, core.now
    true = nvml.energy_j(0, first, last) + nvml.energy_j(1, first, last)
    assert snap.aggregate.energy_source == "counter"
    assert snap.nodes.energy_source == ("counter",)
    assert snap.aggregate.energy_j == pytest.approx(true, abs=2e-3)  # to the counters' millijoule
    # Integrated power holds each poll's reading (the last second's average) for the whole 2-s poll: it
    # misses the H100's switches in the unseen first second of each poll, at most the load-idle step.
    step_w = nvml.watts(0, 0.0) - nvml.watts(0, SWITCH_S)
    unseen = [
        t
        for t in np.arange(first + POLL_S, last + 1e-9, POLL_S)
        if nvml.watts(0, t - 1.5) != nvml.watts(0, t - 0.5)
    ]
    bound = len(unseen) * step_w * 1.0 + 2 * POLL_S * (step_w + nvml.watts(1, 0.0))  # + the first / last poll
    integrated = core.state.energy_j
    assert abs(integrated - true) <= bound
    assert abs(integrated - true) > 0  # the trace was made so that polling does miss something
    # tokens per joule: the counter's, and integrated power's within the same share.
    tokens = float(core.state.tokens.sum())
    assert snap.aggregate.run_tokens_per_joule == pytest.approx(tokens / true, rel=1e-6)
    assert tokens / integrated == pytest.approx(tokens / true, rel=bound / true)
    summary = core.summary()
    assert summary.energy_source == "counter"


def test_a_node_without_counters_integrates_its_power() -> None:
    """The same trace from a GPU whose NVML does not support the energy counter (before Volta): energy is
    integrated power, and says so."""

    nvml = TracedNvml()
    nvml.counter = False
    core = _run(nvml, 120.0)
    snap = core.snapshot()
    assert snap.aggregate.energy_source == "power"
    assert snap.aggregate.energy_j == pytest.approx(core.state.energy_j)


def _scrape(text: str, power_w: list[float], counter_mj: list[float]) -> str:
    """The capture with its GPUs' power and energy counter set to the given values (in file order)."""
    for family, values in (("POWER_USAGE", power_w), ("TOTAL_ENERGY_CONSUMPTION", counter_mj)):
        found = iter(values)

        def put(match: re.Match[str], found: Iterator[float] = found) -> str:
            return f"{match.group(1)} {next(found)!r}"

        text = re.sub(rf"^(DCGM_FI_DEV_{family}\{{[^}}]*\}}) \S+$", put, text, flags=re.MULTILINE)
    return text


@pytest.mark.parametrize("restart_at", [None, 61])
def test_dcgm_counters_of_two_real_t4s_with_and_without_a_driver_reload(restart_at: int | None) -> None:
    """Two T4s at their captured power (7.544 and 4.818 W) scraped every 2 s for 4 minutes, their counters
    starting where the capture's stood and growing by exactly that power; with a driver reload at scrape
    61 the counters restart from zero: energy goes on, nothing is lost or counted twice."""
    capture = T4X2.read_text()
    starts = [
        float(v) for v in re.findall(r"^DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION\{[^}]*\} (\S+)$", capture, re.M)
    ]
    power = [float(v) for v in re.findall(r"^DCGM_FI_DEV_POWER_USAGE\{[^}]*\} (\S+)$", capture, re.M)]
    assert starts == [15_347_724_978, 9_937_726_316]
    assert power == [7.544, 4.818]
    parser = MetricsScrapeParser("dcgm", node="node00", node_index=0)
    core = RackCore()
    core.ingest(RunStarted(0.0, "t4", "Offline", ("node00",), 2, None, None, "live", 0.0))
    counters = list(starts)
    for k in range(1, 121):
        t = 2.0 * k
        if k == restart_at:
            counters = [0.0, 0.0]  # the driver reloaded: its counters start over
        counters = [c + p * 2.0 * 1000 for c, p in zip(counters, power, strict=True)]
        for ev in parser.parse(_scrape(capture, power, counters), t):
            core.ingest(ev)
    snap = core.snapshot()
    expected = sum(power) * (240.0 - 2.0)  # from the first scrape (the baseline) to the last
    assert snap.aggregate.energy_source == "counter"
    assert snap.aggregate.energy_j == pytest.approx(expected, abs=1e-6 * expected)
    # Constant power: integrated power agrees, up to the held last reading.
    assert core.state.energy_j == pytest.approx(expected, abs=sum(power) * 2.0)
    assert np.isfinite(core.state.gpu_values[0, :, GPU_METRICS.index("energy_j")]).all()


def test_the_datadog_t4_capture_reads_its_counter() -> None:
    """The DataDog fixture's T4 (real scrape): TOTAL_ENERGY_CONSUMPTION 128996013 mJ reads as 128996.013 J."""
    text = (SOURCES / "datadog-dcgm-t4-a10g.txt").read_text()
    parser = MetricsScrapeParser("dcgm", node_label="Hostname", nodes=("424773df46e0",))
    (batch,) = [e for e in parser.parse(text, 1.0) if isinstance(e, GpuBatch)]
    assert batch.values[0, GPU_METRICS.index("energy_j")] == pytest.approx(128996.013)
    assert batch.values[0, GPU_METRICS.index("xid")] == 0.0
