"""Simulated GPU telemetry for a whole rack, one vectorised step per tick.

Power sits just under the limit with noise; when demand exceeds the limit the GPU is power-capped:
the SM clock dips a few percent and ``sw_power_cap`` is set. A throttle fault drops SM clocks by
about a third with ``hw_slowdown`` and thermal reasons. HBM use is steady; temperature drifts
towards a load-dependent target with a time constant of a few minutes.
"""

from __future__ import annotations

import numpy as np

from tokenwatch import throttle
from tokenwatch.events import GPU_METRICS, FloatArray
from tokenwatch.sim.profile import GpuProfile

_IDLE_CLOCK_FRACTION = 0.17
_TEMP_TIME_CONSTANT_S = 180.0
THROTTLE_CLOCK_FACTOR = 0.64


class RackGpuModel:
    """Per-GPU state as flat node-major arrays (row = node * gpus_per_node + gpu)."""

    def __init__(self, gpu: GpuProfile, nodes: int, gpus_per_node: int, rng: np.random.Generator) -> None:
        self.p = gpu
        self.rng = rng
        self.gpus_per_node = gpus_per_node
        size = nodes * gpus_per_node
        self.size = size
        self.power_factor = 1.0 + rng.normal(0.0, 0.015, size)
        hbm_used = np.round(gpu.hbm_total_mib * gpu.hbm_used_fraction * (1 + rng.normal(0, 0.002, size)))
        self.temp_offset = rng.normal(0.0, 1.5, size)
        self.temp = np.full(size, gpu.temp_idle_c) + self.temp_offset
        self.node_index = np.repeat(np.arange(nodes), gpus_per_node)
        self.gpu_index = np.tile(np.arange(gpus_per_node), nodes)
        # Columns that never change are filled once; step() writes the others in place.
        self.template = np.zeros((size, len(GPU_METRICS)))
        self.template[:, _COL["power_limit_w"]] = gpu.power_limit_w
        self.template[:, _COL["mem_clock_mhz"]] = gpu.mem_clock_mhz
        self.template[:, _COL["hbm_used_mib"]] = np.minimum(hbm_used, gpu.hbm_total_mib)
        self.template[:, _COL["hbm_total_mib"]] = gpu.hbm_total_mib

    def step(self, load: FloatArray, throttled: np.ndarray, dt: float) -> tuple[FloatArray, np.ndarray]:
        """Telemetry for one tick. ``load`` (nodes,) is work rate / steady rate; returns (values, reasons).

        ``values`` has shape (nodes*gpus, len(GPU_METRICS)), rows node-major.
        """
        p, size = self.p, self.size
        load2 = np.repeat(np.clip(load, 0.0, 1.1), self.gpus_per_node)
        thr = np.repeat(throttled, self.gpus_per_node)
        busy = load2 > 0.02
        z = self.rng.standard_normal((5, size))
        u = self.rng.random(size)

        demand = p.idle_power_w + (p.power_limit_w * (p.load_power_fraction + 0.06) - p.idle_power_w) * load2
        demand *= self.power_factor
        capped = busy & (demand > p.power_limit_w * 0.985)
        power = np.minimum(demand, p.power_limit_w * 0.995) - np.abs(z[0]) * (0.006 * p.power_limit_w)
        power[thr] *= 0.82
        np.maximum(power, p.idle_power_w * 0.8, out=power)

        clock = p.sm_clock_max_mhz * (0.985 + 0.003 * z[1])
        clock[capped] = p.sm_clock_max_mhz * (0.93 + 0.05 * u[capped])
        clock[thr] = p.sm_clock_max_mhz * (THROTTLE_CLOCK_FACTOR + 0.01 * z[2][thr])
        clock[~busy] = p.sm_clock_max_mhz * _IDLE_CLOCK_FRACTION

        reasons = np.where(busy, 0, throttle.GPU_IDLE).astype(np.uint64)
        reasons[capped] |= np.uint64(throttle.SW_POWER_CAP)
        reasons[thr & busy] |= np.uint64(throttle.HW_SLOWDOWN | throttle.SW_THERMAL_SLOWDOWN)

        hbm_busy = np.where(busy, np.clip(35 + 50 * load2 + 2.0 * z[3], 0, 100), 0.0)
        util = np.where(busy, np.clip(97.5 + 1.2 * z[4], 0, 100), 0.0)
        target = p.temp_idle_c + (p.temp_load_c - p.temp_idle_c) * load2**0.8 + self.temp_offset + 12.0 * thr
        self.temp += (target - self.temp) * min(1.0, dt / _TEMP_TIME_CONSTANT_S) + 0.15 * z[2]

        values = self.template.copy()
        values[:, _COL["power_w"]] = np.round(power, 1)
        values[:, _COL["sm_clock_mhz"]] = np.round(clock)
        values[:, _COL["hbm_busy_pct"]] = np.round(hbm_busy, 1)
        values[:, _COL["util_pct"]] = np.round(util, 1)
        values[:, _COL["temp_c"]] = np.round(self.temp, 1)
        return values, reasons


_COL = {name: i for i, name in enumerate(GPU_METRICS)}
