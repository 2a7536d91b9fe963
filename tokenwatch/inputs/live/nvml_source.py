"""Local GPUs through NVML (``pynvml`` from nvidia-ml-py), read in a worker thread.

NVML calls block (a busy driver can take tens of milliseconds, a lost GPU much longer), so a
whole sampling round runs in one ``asyncio.to_thread`` call. The ``nvml`` module is injected:
tests hand in an object with the same functions, answering with values recorded on real GPUs.
Units follow NVML: power in milliwatts, memory in bytes, clocks in MHz, the cumulative energy counter
(``nvmlDeviceGetTotalEnergyConsumption``, Volta and later) in millijoules; they are converted to the
event model's W, MiB and J here. A metric the GPU does not support is ``nan``, not an error.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from typing import Any

import numpy as np

from tokenwatch.base.events import GPU_METRICS, GpuBatch
from tokenwatch.inputs.live.node_sources import NodeContext, SourceEnded
from tokenwatch.inputs.live.transport import Transport
from tokenwatch.sources.node_gpu_index import NodeGpuIndex

MIB = 1024 * 1024


def load_pynvml() -> Any:
    import pynvml

    return pynvml


class NvmlReader:
    """Blocking NVML access: :meth:`open` once, then :meth:`read` each round (call both in a thread).

    ``node_index`` is the node's place in ``RunStarted.nodes``, which the batches carry."""

    def __init__(self, nvml: Any, node_index: int = 0) -> None:
        self.nvml = nvml
        self.handles: list[Any] = []
        self._index = NodeGpuIndex(node_index)
        self._reasons_fn = getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None) or getattr(
            nvml, "nvmlDeviceGetCurrentClocksThrottleReasons", None
        )

    def open(self) -> int:
        """Initialise NVML; the number of GPUs. Raises the library's NVMLError when there is no driver."""
        nvml = self.nvml
        nvml.nvmlInit()
        count = int(nvml.nvmlDeviceGetCount())
        self.handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
        return count

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.nvml.nvmlShutdown()

    def _get(self, fn: str, *args: Any) -> Any:
        call = getattr(self.nvml, fn, None)  # an older nvidia-ml-py may lack a function: not supported
        if call is None:
            return None
        try:
            return call(*args)
        except self.nvml.NVMLError:
            return None

    def read(self, t: float) -> GpuBatch:
        """One sampling round: every GPU's readings at run time ``t`` as one batch."""
        nvml = self.nvml
        rows: list[list[float]] = []
        masks: list[int] = []
        for handle in self.handles:
            memory = self._get("nvmlDeviceGetMemoryInfo", handle)
            util = self._get("nvmlDeviceGetUtilizationRates", handle)
            readings = {
                "power_w": _scaled(self._get("nvmlDeviceGetPowerUsage", handle), 1e-3),
                "power_limit_w": _scaled(self._get("nvmlDeviceGetEnforcedPowerLimit", handle), 1e-3),
                "sm_clock_mhz": _scaled(self._get("nvmlDeviceGetClockInfo", handle, nvml.NVML_CLOCK_SM), 1),
                "mem_clock_mhz": _scaled(self._get("nvmlDeviceGetClockInfo", handle, nvml.NVML_CLOCK_MEM), 1),
                "hbm_used_mib": _scaled(getattr(memory, "used", None), 1 / MIB),
                "hbm_total_mib": _scaled(getattr(memory, "total", None), 1 / MIB),
                "hbm_busy_pct": _scaled(getattr(util, "memory", None), 1),
                "util_pct": _scaled(getattr(util, "gpu", None), 1),
                "temp_c": _scaled(
                    self._get("nvmlDeviceGetTemperature", handle, nvml.NVML_TEMPERATURE_GPU), 1
                ),
                "energy_j": _scaled(self._get("nvmlDeviceGetTotalEnergyConsumption", handle), 1e-3),
            }
            rows.append([readings.get(m, math.nan) for m in GPU_METRICS])
            reasons = None
            if self._reasons_fn is not None:
                try:
                    reasons = self._reasons_fn(handle)
                except nvml.NVMLError:
                    reasons = None
            masks.append(int(reasons) if reasons is not None else 0)
        nodes, gpu = self._index.columns(range(len(self.handles)))
        values = np.array(rows, dtype=np.float64).reshape(len(rows), len(GPU_METRICS))
        return GpuBatch(t, nodes, gpu, values, np.array(masks, dtype=np.uint64))


def _scaled(value: Any, factor: float) -> float:
    if value is None:
        return math.nan
    try:
        return float(value) * factor
    except (TypeError, ValueError):
        return math.nan


def count_gpus(nvml: Any) -> int | None:
    """How many GPUs NVML sees here, or None when it cannot start (no driver, no library)."""
    reader = NvmlReader(nvml)
    try:
        return reader.open()
    except Exception:
        return None
    finally:
        reader.close()


class NvmlSource:
    """The node's GPUs every ``interval_s`` (local mode only: NVML reads the machine it runs on)."""

    name = "nvml"

    def __init__(self, interval_s: float, nvml: Any = None) -> None:
        self.periodic_s: float | None = interval_s
        self.nvml = nvml

    async def run(self, _transport: Transport, ctx: NodeContext) -> None:
        nvml = self.nvml if self.nvml is not None else await asyncio.to_thread(load_pynvml)
        reader = NvmlReader(nvml, ctx.index)
        try:
            await asyncio.to_thread(reader.open)
        except Exception as exc:
            raise SourceEnded(f"NVML: {exc}") from None
        interval = self.periodic_s or 1.0
        try:
            while True:
                began = ctx.clock.time()
                batch = await asyncio.to_thread(reader.read, ctx.now())
                if len(batch.gpu):  # one event per poll: the node's GPUs at one instant
                    ctx.saw(self.name)  # a poll in which every GPU failed is no sign of life
                    await ctx.emit(batch)
                await ctx.clock.sleep(max(0.0, interval - (ctx.clock.time() - began)))
        finally:
            await asyncio.to_thread(reader.close)
