"""NVML clocks-event (throttle) reason bits and their names.

The values are NVML's ``nvmlClocksEventReason*`` constants (nvidia-smi prints the same bitmask as
``clocks_event_reasons.active``, older drivers as ``clocks_throttle_reasons.active``).
"""

from __future__ import annotations

GPU_IDLE = 0x1
APPLICATIONS_CLOCKS_SETTING = 0x2
SW_POWER_CAP = 0x4
HW_SLOWDOWN = 0x8
SYNC_BOOST = 0x10
SW_THERMAL_SLOWDOWN = 0x20
HW_THERMAL_SLOWDOWN = 0x40
HW_POWER_BRAKE_SLOWDOWN = 0x80
DISPLAY_CLOCK_SETTING = 0x100

REASON_NAMES: dict[int, str] = {
    GPU_IDLE: "gpu_idle",
    APPLICATIONS_CLOCKS_SETTING: "applications_clocks_setting",
    SW_POWER_CAP: "sw_power_cap",
    HW_SLOWDOWN: "hw_slowdown",
    SYNC_BOOST: "sync_boost",
    SW_THERMAL_SLOWDOWN: "sw_thermal_slowdown",
    HW_THERMAL_SLOWDOWN: "hw_thermal_slowdown",
    HW_POWER_BRAKE_SLOWDOWN: "hw_power_brake_slowdown",
    DISPLAY_CLOCK_SETTING: "display_clock_setting",
}

# Reasons that mean the GPU runs slower than it could because of power or heat.
LIMITING_REASONS = (
    SW_POWER_CAP | HW_SLOWDOWN | SW_THERMAL_SLOWDOWN | HW_THERMAL_SLOWDOWN | HW_POWER_BRAKE_SLOWDOWN
)


def reason_names(mask: int) -> list[str]:
    """Names of the bits set in ``mask``, lowest bit first; unknown bits as ``0x...``."""
    names = [name for bit, name in REASON_NAMES.items() if mask & bit]
    unknown = mask & ~sum(REASON_NAMES)
    if unknown:
        names.append(hex(unknown))
    return names
