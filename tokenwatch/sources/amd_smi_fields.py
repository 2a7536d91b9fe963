"""One GPU's entry of ``amd-smi metric --json`` -> the readings of :data:`GPU_METRICS`.

amd-smi has printed three shapes of the same facts, and this reads all of them:

- ROCm 6.0: bare numbers (``"socket_power": 132``);
- ROCm 6.1 on: a value with its unit (``"socket_power": {"value": 132, "unit": "W"}``), per the amdsmi
  CHANGELOG's "Added units of measure to JSON output" (6.1.0);
- any version: ``"N/A"`` (or a whole group as ``"N/A"``) where the GPU does not report a figure.

A figure that is absent or ``N/A`` is unknown (NaN), never zero. One that is there but unreadable (text
that is no number, NaN, infinity, a unit this module does not know, a value out of any plausible range)
is unknown too, and named in a problem line for the caller to report.

Where each figure comes from, and why:

- ``power_w``: ``power.socket_power`` (the package power MI300X-class GPUs measure), else
  ``power.average_socket_power`` (the name older MI200-era output used);
- ``sm_clock_mhz``: the mean of the ``clock.gfx_N.clk`` that report (an MI300X has one per XCD, eight
  of them; a Radeon has ``gfx_0`` only), or ``clock.gfx.clk``;
- ``mem_clock_mhz``: ``clock.mem_0.clk`` (or ``clock.mem.clk``);
- ``hbm_used_mib`` / ``hbm_total_mib``: ``mem_usage.used_vram`` / ``total_vram``. amd-smi labels them
  "MB" but divides bytes by 1024*1024 (an MI300X's 192 GiB reads 196592), so they are MiB;
- ``util_pct`` / ``hbm_busy_pct``: ``usage.gfx_activity`` / ``usage.umc_activity`` (the memory
  controller's busy share, the nearest to nvidia-smi's ``utilization.memory``);
- ``temp_c``: ``temperature.hotspot`` (the junction: an MI300X reports no edge), else ``edge``;
  ``hbm_temp_c``: ``temperature.mem``;
- ``energy_j``: ``energy.total_energy_consumption`` (J since the driver started counting). A counter
  that reads exactly 0 is a GPU that does not count (consumer Radeons print 0.0 J while drawing power):
  it is unknown, so the node's energy comes from its integrated power instead of a flat zero;
- throttle reasons: the ``throttle`` group's ``*_violation_status`` (MI300 and later): package power
  (PPT) -> ``sw_power_cap``, socket/VR/HBM thermal -> ``sw_thermal_slowdown``, PROCHOT ->
  ``hw_slowdown``. ``power.throttle_status`` says only THROTTLED or not, not why, so it sets no reason.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from tokenwatch.base import throttle
from tokenwatch.base.events import GPU_METRICS

# Unit -> factor to the metric's unit. "MB" is MiB (see above).
_UNITS: dict[str, dict[str, float]] = {
    "power": {"W": 1.0, "mW": 1e-3, "kW": 1e3},
    "clock": {"MHz": 1.0, "GHz": 1e3, "kHz": 1e-3},
    "memory": {"MB": 1.0, "MiB": 1.0, "GB": 1024.0, "GiB": 1024.0, "KB": 1 / 1024, "B": 1 / 1048576},
    "percent": {"%": 1.0},
    "temperature": {"C": 1.0, "°C": 1.0},
    "energy": {"J": 1.0, "kJ": 1e3, "mJ": 1e-3, "uJ": 1e-6, "μJ": 1e-6, "µJ": 1e-6},
}
_METRIC_KIND: dict[str, str] = {
    "power_w": "power",
    "power_limit_w": "power",
    "sm_clock_mhz": "clock",
    "mem_clock_mhz": "clock",
    "hbm_used_mib": "memory",
    "hbm_total_mib": "memory",
    "hbm_busy_pct": "percent",
    "util_pct": "percent",
    "temp_c": "temperature",
    "hbm_temp_c": "temperature",
    "energy_j": "energy",
}
# Plausible ranges in the metric's unit; a value outside is a corrupt reading, not a figure.
_RANGES: dict[str, tuple[float, float]] = {
    "power": (0.0, 100_000.0),
    "clock": (0.0, 100_000.0),
    "memory": (0.0, 1e9),
    "percent": (0.0, 100.0),
    "temperature": (-100.0, 300.0),
    "energy": (0.0, 1e15),
}
# Where each metric is read, first path that reports wins.
_PATHS: dict[str, tuple[tuple[str, ...], ...]] = {
    "power_w": (("power", "socket_power"), ("power", "average_socket_power")),
    "mem_clock_mhz": (("clock", "mem_0", "clk"), ("clock", "mem", "clk")),
    "hbm_used_mib": (("mem_usage", "used_vram"),),
    "hbm_total_mib": (("mem_usage", "total_vram"),),
    "hbm_busy_pct": (("usage", "umc_activity"),),
    "util_pct": (("usage", "gfx_activity"),),
    "temp_c": (("temperature", "hotspot"), ("temperature", "edge")),
    "hbm_temp_c": (("temperature", "mem"),),
    "energy_j": (("energy", "total_energy_consumption"),),
}
_VIOLATIONS: dict[str, int] = {
    "ppt_violation_status": throttle.SW_POWER_CAP,
    "socket_thermal_violation_status": throttle.SW_THERMAL_SLOWDOWN,
    "vr_thermal_violation_status": throttle.SW_THERMAL_SLOWDOWN,
    "hbm_thermal_violation_status": throttle.SW_THERMAL_SLOWDOWN,
    "prochot_violation_status": throttle.HW_SLOWDOWN,
}
# Words amd-smi prints for "not reported".
_MISSING_WORDS = frozenset({"n/a", "na", "not supported", "unknown", ""})


class FieldError(ValueError):
    """A figure that is present but unreadable."""


def _lookup(entry: Mapping[str, Any], path: tuple[str, ...]) -> Any:
    node: Any = entry
    for key in path:
        if not isinstance(node, Mapping):
            return None
        node = node.get(key)
    return node


def reading(raw: Any, kind: str) -> float:
    """One figure in the metric's unit; NaN where it is not reported. Raises FieldError when present but
    unreadable."""
    unit: str | None = None
    if isinstance(raw, Mapping):
        if "value" not in raw:
            raise FieldError("an object without a value")
        unit_raw = raw.get("unit")
        unit = unit_raw if isinstance(unit_raw, str) else None
        raw = raw["value"]
    if raw is None:
        return math.nan
    if isinstance(raw, bool):
        raise FieldError(f"{raw!r} is not a number")
    if isinstance(raw, int | float):
        number = float(raw)
    elif isinstance(raw, str):
        text = raw.strip()
        if text.lower() in _MISSING_WORDS:
            return math.nan
        head, _, tail = text.partition(" ")
        try:
            number = float(head.rstrip("%"))
        except ValueError:
            raise FieldError(f"{text[:30]!r} is not a number") from None
        if unit is None:
            unit = tail.strip() or ("%" if head.endswith("%") else None)
    else:
        raise FieldError(f"a {type(raw).__name__} where a number belongs")
    if not math.isfinite(number):
        raise FieldError(f"{number} is not a finite number")
    if unit is not None:
        factor = _UNITS[kind].get(unit)
        if factor is None:
            raise FieldError(f"unknown unit {unit[:12]!r}")
        number *= factor
    low, high = _RANGES[kind]
    if not low <= number <= high:
        raise FieldError(f"{number:g} is out of range")
    return number


def _gfx_clock(entry: Mapping[str, Any], problems: list[str]) -> float:
    clocks = entry.get("clock")
    if not isinstance(clocks, Mapping):
        return math.nan
    names = [k for k in clocks if isinstance(k, str) and k.startswith("gfx_") and k[4:].isdigit()]
    if not names and "gfx" in clocks:
        names = ["gfx"]
    values = []
    for name in names:
        try:
            value = reading(_lookup(clocks, (name, "clk")), "clock")
        except FieldError as exc:
            problems.append(f"clock.{name}.clk: {exc}")
            continue
        if not math.isnan(value):
            values.append(value)
    return sum(values) / len(values) if values else math.nan


def throttle_mask(entry: Mapping[str, Any]) -> int:
    """The NVML-style reason bits of the violations the GPU reports as active now."""
    group = entry.get("throttle")
    if not isinstance(group, Mapping):
        return 0
    mask = 0
    for key, bit in _VIOLATIONS.items():
        status = group.get(key)
        if status is True or (isinstance(status, str) and status.strip().upper() in ("ACTIVE", "TRUE")):
            mask |= bit
    return mask


def gpu_readings(entry: Mapping[str, Any]) -> tuple[list[float], int, list[str]]:
    """(values in GPU_METRICS order, throttle mask, problems) for one GPU's entry."""
    values = dict.fromkeys(GPU_METRICS, math.nan)
    problems: list[str] = []
    for metric, paths in _PATHS.items():
        for path in paths:
            try:
                value = reading(_lookup(entry, path), _METRIC_KIND[metric])
            except FieldError as exc:
                problems.append(f"{'.'.join(path)}: {exc}")
                continue
            if not math.isnan(value):
                values[metric] = value
                break
    values["sm_clock_mhz"] = _gfx_clock(entry, problems)
    if values["energy_j"] == 0.0:
        values["energy_j"] = math.nan
    return [values[m] for m in GPU_METRICS], throttle_mask(entry), problems
