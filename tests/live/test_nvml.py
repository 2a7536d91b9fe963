"""The NVML collector, fed through a pynvml-like object that answers with values recorded on real
H100 and H200 GPUs (no GPU is lent to this machine), checked against the nvidia-smi -q captures."""

from __future__ import annotations

import asyncio
import itertools
import json
import math
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pynvml
import pytest
from live_support import DATA, gpu_rows

from tests.conftest import wait_until_async
from tokenwatch.base.clock import MonotonicClock
from tokenwatch.base.events import GPU_METRICS, Event, GpuBatch
from tokenwatch.inputs.live.node_health import NodeHealth
from tokenwatch.inputs.live.node_sources import NodeContext, SourceEnded
from tokenwatch.inputs.live.nvml_source import NvmlReader, NvmlSource, count_gpus
from tokenwatch.inputs.live.transport import LocalTransport

RECORDED = json.loads((DATA / "nvml-recorded.json").read_text())["gpus"]


class RecordedNvml:
    """pynvml's functions and constants, answering from recorded values; the real error classes."""

    NVMLError = pynvml.NVMLError
    NVML_CLOCK_SM = pynvml.NVML_CLOCK_SM
    NVML_CLOCK_MEM = pynvml.NVML_CLOCK_MEM
    NVML_TEMPERATURE_GPU = pynvml.NVML_TEMPERATURE_GPU

    def __init__(self, gpus: list[str], unsupported: frozenset[str] = frozenset(), init_error: Any = None):
        self.gpus: list[dict[str, Any]] = [RECORDED[g] for g in gpus]
        self.unsupported = unsupported
        self.init_error = init_error
        self.calls: list[str] = []

    def _answer(self, fn: str, handle: int) -> dict[str, Any]:
        self.calls.append(fn)
        if fn in self.unsupported:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return self.gpus[handle]

    def nvmlInit(self) -> None:
        if self.init_error is not None:
            raise pynvml.NVMLError(self.init_error)

    def nvmlShutdown(self) -> None:
        self.calls.append("nvmlShutdown")

    def nvmlDeviceGetCount(self) -> int:
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        return index

    def nvmlDeviceGetPowerUsage(self, h: int) -> int:
        return int(self._answer("nvmlDeviceGetPowerUsage", h)["nvmlDeviceGetPowerUsage"])

    def nvmlDeviceGetEnforcedPowerLimit(self, h: int) -> int:
        return int(self._answer("nvmlDeviceGetEnforcedPowerLimit", h)["nvmlDeviceGetEnforcedPowerLimit"])

    def nvmlDeviceGetClockInfo(self, h: int, clock: int) -> int:
        gpu = self._answer("nvmlDeviceGetClockInfo", h)
        return int(gpu["clock_sm"] if clock == pynvml.NVML_CLOCK_SM else gpu["clock_mem"])

    def nvmlDeviceGetMemoryInfo(self, h: int) -> SimpleNamespace:
        gpu = self._answer("nvmlDeviceGetMemoryInfo", h)
        return SimpleNamespace(total=gpu["memory_total"], used=gpu["memory_used"])

    def nvmlDeviceGetUtilizationRates(self, h: int) -> SimpleNamespace:
        gpu = self._answer("nvmlDeviceGetUtilizationRates", h)
        return SimpleNamespace(gpu=gpu["util_gpu"], memory=gpu["util_memory"])

    def nvmlDeviceGetTemperature(self, h: int, _sensor: int) -> int:
        return int(self._answer("nvmlDeviceGetTemperature", h)["temperature_gpu"])

    def nvmlDeviceGetCurrentClocksEventReasons(self, h: int) -> int:
        return int(self._answer("nvmlDeviceGetCurrentClocksEventReasons", h)["clocks_event_reasons"])


def from_q(capture: str) -> dict[str, float]:
    """Independent expectation: the figures nvidia-smi -q printed, in the event model's units."""
    text = (DATA / f"{capture}.q.txt").read_text()

    def value(block: str, key: str) -> float:
        section = re.search(rf"^    {block}\n((?:        .*\n)+)", text, re.M)
        assert section, block
        found = re.search(rf"^\s+{key}\s+: ([0-9.]+)", section.group(1), re.M)
        assert found, key
        return float(found.group(1))

    return {
        "power_w": value("GPU Power Readings", "Average Power Draw"),
        "power_limit_w": value("GPU Power Readings", "Current Power Limit"),
        "sm_clock_mhz": value("Clocks", "SM"),
        "mem_clock_mhz": value("Clocks", "Memory"),
        "hbm_used_mib": value("FB Memory Usage", "Used"),
        "hbm_total_mib": value("FB Memory Usage", "Total"),
        "util_pct": value("Utilization", "GPU"),
        "hbm_busy_pct": value("Utilization", "Memory"),
        "temp_c": value("Temperature", "GPU Current Temp"),
    }


@pytest.mark.parametrize("capture", ["h100-load", "h100-idle", "h200-load"])
def test_reader_converts_recorded_nvml_answers(capture: str) -> None:
    reader = NvmlReader(RecordedNvml([capture, capture]), node_index=5)
    assert reader.open() == 2
    batch = reader.read(12.5)
    assert batch.gpu.tolist() == [0, 1]
    assert batch.node_index.tolist() == [5, 5]
    assert batch.t == 12.5
    expected = from_q(capture)
    for row in batch.values:
        for attribute, figure in expected.items():
            assert row[GPU_METRICS.index(attribute)] == pytest.approx(figure), attribute
    idle = (
        "Idle                                           : Active" in (DATA / f"{capture}.q.txt").read_text()
    )
    assert batch.throttle_reasons.tolist() == [1 if idle else 0] * 2  # nvmlClocksEventReasonGpuIdle


def test_unsupported_metrics_are_nan_not_errors() -> None:
    nvml = RecordedNvml(
        ["h200-load"], unsupported=frozenset({"nvmlDeviceGetPowerUsage", "nvmlDeviceGetMemoryInfo"})
    )
    reader = NvmlReader(nvml)
    reader.open()
    (row,) = reader.read(1.0).values
    assert math.isnan(row[GPU_METRICS.index("power_w")])
    assert math.isnan(row[GPU_METRICS.index("hbm_used_mib")])
    assert row[GPU_METRICS.index("sm_clock_mhz")] == 1980.0
    assert row[GPU_METRICS.index("power_limit_w")] == 700.0


async def run_source(nvml: Any, polls: int, index: int = 0) -> list[Event]:
    """The NVML source's events until it has sent ``polls`` batches (then it is stopped) or it ended."""
    events: list[Event] = []

    async def emit(event: Event) -> None:
        events.append(event)

    clock = MonotonicClock()
    t0 = clock.time()
    health = NodeHealth("box", emit, lambda: clock.time() - t0)
    ctx = NodeContext("box", emit, clock, t0, health, index)
    task = asyncio.create_task(NvmlSource(0.05, nvml).run(LocalTransport(), ctx))
    await wait_until_async(
        lambda: task.done() or sum(isinstance(e, GpuBatch) for e in events) >= polls,
        f"{polls} polls or the end",
    )
    if task.done():
        task.result()
    else:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    return events


async def test_source_samples_every_interval_in_a_thread_and_shuts_nvml_down() -> None:
    nvml = RecordedNvml(["h100-load"] * 4)
    events = await run_source(nvml, 3)
    samples = gpu_rows(events, ("box",))
    assert len(samples) >= 8
    assert len(samples) % 4 == 0
    assert {s.gpu for s in samples} == {0, 1, 2, 3}
    times = sorted({s.t for s in samples})
    assert all(b > a for a, b in itertools.pairwise(times))
    assert nvml.calls[-1] == "nvmlShutdown"


async def test_one_batch_per_poll_with_the_recorded_h100_and_h200_figures() -> None:
    """A node with two H100s and two H200s: every poll is one GpuBatch of the node's four GPUs, in
    order, with the figures nvidia-smi -q printed for each GPU."""
    captures = ["h100-load", "h200-load", "h100-idle", "h200-load"]
    nvml = RecordedNvml(captures)
    events = await run_source(nvml, 3, index=3)
    polls = nvml.calls.count("nvmlDeviceGetPowerUsage") // len(captures)
    assert polls >= 2
    batches = [e for e in events if isinstance(e, GpuBatch)]
    assert len(batches) == polls  # one event per poll, never one per GPU
    assert all(type(e) is GpuBatch for e in events)
    # The captures recorded no energy counter (nor HBM temperature, XID, NVLink): those read as missing.
    expected = [[from_q(c).get(m, math.nan) for m in GPU_METRICS] for c in captures]
    for batch in batches:
        assert batch.gpu.tolist() == [0, 1, 2, 3]
        assert batch.node_index.tolist() == [3, 3, 3, 3]
        assert batch.values == pytest.approx(np.array(expected), nan_ok=True)
        assert batch.throttle_reasons.tolist() == [0, 0, 1, 0]  # h100-idle: nvmlClocksEventReasonGpuIdle
        assert not batch.values.flags.writeable
    assert batches[1].gpu is batches[0].gpu  # the same index arrays every poll (the core's fast path)
    assert [b.t for b in batches] == sorted({b.t for b in batches})


async def test_no_driver_ends_the_source_with_a_clear_message() -> None:
    with pytest.raises(SourceEnded, match=r"NVML: .*Driver Not Loaded"):
        await run_source(RecordedNvml(["h100-load"], init_error=pynvml.NVML_ERROR_DRIVER_NOT_LOADED), 1)


async def test_the_real_pynvml_on_this_machine() -> None:
    """The real library, unmocked: with a driver it reads the GPUs; without one it says so."""
    count = count_gpus(pynvml)
    if count is None:
        with pytest.raises(SourceEnded, match=r"^NVML: "):
            await run_source(pynvml, 1)
    else:
        events = await run_source(pynvml, 1)
        assert {r.gpu for r in gpu_rows(events, ("box",))} == set(range(count))


def test_recorded_values_come_from_the_captures() -> None:
    for capture, gpu in RECORDED.items():
        text = (DATA / f"{capture}.q.txt").read_text()
        assert gpu["name"] in text
    assert Path(DATA / "nvml-recorded.json").stat().st_size < 10_000
