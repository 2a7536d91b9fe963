"""Simulated GPU telemetry for a whole rack, one vectorised step per tick.

Power sits just under the limit with noise; when demand exceeds the limit the GPU is power-capped:
the SM clock dips a few percent and ``sw_power_cap`` is set. A throttle fault drops SM clocks by
about a third with ``hw_slowdown`` and thermal reasons. A lowered power limit (the ``powercap`` fault)
holds the GPU's power at the cap and its clock down by the cap's share of its demand to the power 0.7
(a lower clock runs at a lower voltage, so power falls faster than clock). A ``hot`` GPU heats towards
28 °C over its peers with a fast time constant, and above its slowdown temperature its clock drops 15 %
with ``sw_thermal_slowdown``. HBM use is steady; temperature drifts towards a load-dependent target with
a time constant of a few minutes. Each GPU's energy counter (J) counts the power it drew, from an
arbitrary start (a counter counts since the driver loaded, not since the run began).
"""

from __future__ import annotations

import numpy as np

from tokenwatch.base import throttle
from tokenwatch.base.events import GPU_METRICS, FloatArray
from tokenwatch.inputs.sim.profile import GpuProfile

_IDLE_CLOCK_FRACTION = 0.17
_TEMP_TIME_CONSTANT_S = 180.0
THROTTLE_CLOCK_FACTOR = 0.64
HOT_EXCESS_C = 28.0
_HOT_TIME_CONSTANT_S = 15.0
HOT_SLOWDOWN_ABOVE_C = 15.0  # over the profile's load temperature
HOT_CLOCK_FACTOR = 0.85
CAP_CLOCK_EXPONENT = 0.7
_ENERGY_START_J = 4.0e8  # ~5 days at 1 kW: where the counters stand when the run begins


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
        for unmodelled in ("hbm_temp_c", "xid", "nvlink_errors"):
            self.template[:, _COL[unmodelled]] = np.nan
        self.template[:, _COL["power_limit_w"]] = gpu.power_limit_w
        self.template[:, _COL["mem_clock_mhz"]] = gpu.mem_clock_mhz
        self.template[:, _COL["hbm_used_mib"]] = np.minimum(hbm_used, gpu.hbm_total_mib)
        self.template[:, _COL["hbm_total_mib"]] = gpu.hbm_total_mib
        # Deterministic (no draw from the seeded stream: a seed's other figures stay what they were).
        self.energy_j = _ENERGY_START_J * (1.0 + 0.01 * np.arange(size) / max(1, size))
        self._full_limit = np.full(size, gpu.power_limit_w)

    def full_load_demand_w(self) -> FloatArray:
        """What each GPU would draw at full load with no limit (W)."""
        p = self.p
        return (p.idle_power_w + (p.power_limit_w * (p.load_power_fraction + 0.06) - p.idle_power_w)) * (
            self.power_factor
        )

    def cap_factor(self, cap_w: FloatArray) -> FloatArray:
        """Per GPU: the clock (and throughput) factor of a lowered power limit ``cap_w`` (NaN: none)."""
        with np.errstate(invalid="ignore"):
            share = np.minimum(1.0, cap_w / self.full_load_demand_w())
        return np.where(np.isnan(cap_w), 1.0, share**CAP_CLOCK_EXPONENT)

    def hot_slowed(self, hot: np.ndarray) -> np.ndarray:
        """Hot GPUs above their slowdown temperature (they clock down)."""
        return hot & (self.temp > self.p.temp_load_c + HOT_SLOWDOWN_ABOVE_C)

    def step(
        self,
        load: FloatArray,
        throttled: np.ndarray,
        dt: float,
        hot: np.ndarray | None = None,
        cap_w: FloatArray | None = None,
    ) -> tuple[FloatArray, np.ndarray]:
        """Telemetry for one tick. ``load`` (nodes,) is work rate / steady rate; ``throttled`` and ``hot``
        (nodes*gpus,) the GPUs under those faults, ``cap_w`` (nodes*gpus,) a lowered power limit (NaN:
        none); returns (values, reasons).

        ``values`` has shape (nodes*gpus, len(GPU_METRICS)), rows node-major.
        """
        p, size = self.p, self.size
        load2 = np.repeat(np.minimum(np.maximum(load, 0.0), 1.1), self.gpus_per_node)
        thr = throttled
        # A rack without GPU faults (the usual tick) skips the masks' work: every mask is all False, and
        # what it would change adds zero or multiplies by one, so the figures are the same to the bit.
        faults = bool(thr.any()) or (hot is not None and bool(hot.any())) or cap_w is not None
        hot = np.zeros(size, bool) if hot is None else hot
        slowed = self.hot_slowed(hot) if faults else hot
        capping = np.zeros(size, bool) if cap_w is None else np.isfinite(cap_w)
        limit = np.where(capping, cap_w, p.power_limit_w) if cap_w is not None else self._full_limit
        busy = load2 > 0.02
        z = self.rng.standard_normal((5, size))
        u = self.rng.random(size)

        demand = p.idle_power_w + (p.power_limit_w * (p.load_power_fraction + 0.06) - p.idle_power_w) * load2
        demand *= self.power_factor
        capped = busy & (demand > limit * 0.985)
        power = np.minimum(demand, limit * 0.995) - np.abs(z[0]) * (0.006 * limit)
        if faults:
            power[thr] *= 0.82
            power[slowed] *= 0.9
        np.maximum(power, p.idle_power_w * 0.8, out=power)

        clock = p.sm_clock_max_mhz * (0.985 + 0.003 * z[1])
        clock[capped] = p.sm_clock_max_mhz * (0.93 + 0.05 * u[capped])
        if faults:
            if capping.any():  # a lowered limit: the clock falls with the cap's share of the demand
                clock[capping & busy] *= self.cap_factor(cap_w if cap_w is not None else limit)[
                    capping & busy
                ]
            clock[slowed] *= HOT_CLOCK_FACTOR
            clock[thr] = p.sm_clock_max_mhz * (THROTTLE_CLOCK_FACTOR + 0.01 * z[2][thr])
        idle = ~busy
        clock[idle] = p.sm_clock_max_mhz * _IDLE_CLOCK_FRACTION

        reasons = np.where(busy, _NO_REASON, _IDLE_REASON)
        reasons[capped] |= _POWER_CAP_REASON
        if faults:
            reasons[thr & busy] |= np.uint64(throttle.HW_SLOWDOWN | throttle.SW_THERMAL_SLOWDOWN)
            reasons[slowed & busy] |= np.uint64(throttle.SW_THERMAL_SLOWDOWN)

        hbm_busy = np.where(busy, np.minimum(np.maximum(35 + 50 * load2 + 2.0 * z[3], 0), 100), 0.0)
        util = np.where(busy, np.minimum(np.maximum(97.5 + 1.2 * z[4], 0), 100), 0.0)
        target = p.temp_idle_c + (p.temp_load_c - p.temp_idle_c) * load2**0.8 + self.temp_offset
        if faults:
            target = target + 12.0 * thr
            rate = np.where(hot, min(1.0, dt / _HOT_TIME_CONSTANT_S), min(1.0, dt / _TEMP_TIME_CONSTANT_S))
            self.temp += (target + HOT_EXCESS_C * hot - self.temp) * rate + 0.15 * z[2]
        else:
            self.temp += (target - self.temp) * min(1.0, dt / _TEMP_TIME_CONSTANT_S) + 0.15 * z[2]

        values = self.template.copy()
        if capping.any():
            values[:, _COL["power_limit_w"]] = limit
        # A power reading stands for the tick before it (NVML's power on Hopper is the last second's
        # average), so the counter read now has counted this tick's power.
        power_read = power.round(1)
        self.energy_j = self.energy_j + power_read * dt
        values[:, _COL["energy_j"]] = self.energy_j.round(3)
        values[:, _COL["power_w"]] = power_read
        values[:, _COL["sm_clock_mhz"]] = clock.round()
        values[:, _COL["hbm_busy_pct"]] = hbm_busy.round(1)
        values[:, _COL["util_pct"]] = util.round(1)
        values[:, _COL["temp_c"]] = self.temp.round(1)
        return values, reasons


_COL = {name: i for i, name in enumerate(GPU_METRICS)}
_NO_REASON = np.uint64(0)
_IDLE_REASON = np.uint64(throttle.GPU_IDLE)
_POWER_CAP_REASON = np.uint64(throttle.SW_POWER_CAP)
