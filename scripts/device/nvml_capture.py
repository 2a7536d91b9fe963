"""Record what NVML answers on this machine's GPUs, and what tokenwatch's NVML reader makes of it.

Run on a machine with an NVIDIA GPU (``scripts/device/run_checks.sh``). Every ``--every`` seconds for
``--seconds``, each GPU's raw answers (NVML units: mW, mJ, bytes, MHz, %, C, the clocks-event bitmask)
are written beside the ``GpuBatch`` row that ``tokenwatch.inputs.live.nvml_source.NvmlReader`` built from
the same moment, as one JSON document on stdout. The raw answers use the keys of
``tests/data/live/nvml-recorded.json`` so they can be replayed by the tests' recorded NVML.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

import pynvml

from tokenwatch.base.events import GPU_METRICS
from tokenwatch.inputs.live.nvml_source import NvmlReader


def _call(fn: str, *args: Any) -> Any:
    try:
        return getattr(pynvml, fn)(*args)
    except (pynvml.NVMLError, AttributeError) as exc:
        return f"error: {exc}"


def raw_answers(handle: Any) -> dict[str, Any]:
    memory = _call("nvmlDeviceGetMemoryInfo", handle)
    util = _call("nvmlDeviceGetUtilizationRates", handle)
    reasons = _call("nvmlDeviceGetCurrentClocksEventReasons", handle)
    if isinstance(reasons, str):
        reasons = _call("nvmlDeviceGetCurrentClocksThrottleReasons", handle)
    name = _call("nvmlDeviceGetName", handle)
    return {
        "name": name.decode() if isinstance(name, bytes) else name,
        "nvmlDeviceGetPowerUsage": _call("nvmlDeviceGetPowerUsage", handle),
        "nvmlDeviceGetEnforcedPowerLimit": _call("nvmlDeviceGetEnforcedPowerLimit", handle),
        "nvmlDeviceGetPowerManagementLimit": _call("nvmlDeviceGetPowerManagementLimit", handle),
        "nvmlDeviceGetTotalEnergyConsumption": _call("nvmlDeviceGetTotalEnergyConsumption", handle),
        "clock_sm": _call("nvmlDeviceGetClockInfo", handle, pynvml.NVML_CLOCK_SM),
        "clock_mem": _call("nvmlDeviceGetClockInfo", handle, pynvml.NVML_CLOCK_MEM),
        "memory_total": getattr(memory, "total", memory),
        "memory_used": getattr(memory, "used", memory),
        "util_gpu": getattr(util, "gpu", util),
        "util_memory": getattr(util, "memory", util),
        "temperature_gpu": _call("nvmlDeviceGetTemperature", handle, pynvml.NVML_TEMPERATURE_GPU),
        "clocks_event_reasons": reasons,
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=5.0)
    p.add_argument("--every", type=float, default=1.0)
    p.add_argument("--label", default="capture")
    args = p.parse_args()
    pynvml.nvmlInit()
    driver = pynvml.nvmlSystemGetDriverVersion()
    handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]
    reader = NvmlReader(pynvml)
    reader.open()
    began = time.monotonic()
    rounds = []
    while True:
        t = time.monotonic() - began
        raw = [raw_answers(h) for h in handles]
        batch = reader.read(t)
        rows = [dict(zip(GPU_METRICS, map(float, row), strict=True)) for row in batch.values]
        rounds.append(
            {
                "t": round(t, 3),
                "raw": raw,
                "reader": rows,
                "reasons": [int(m) for m in batch.throttle_reasons],
            }
        )
        if t + args.every > args.seconds:
            break
        time.sleep(args.every)
    reader.close()
    pynvml.nvmlShutdown()
    json.dump(
        {
            "label": args.label,
            "driver": driver.decode() if isinstance(driver, bytes) else driver,
            "nvml_py": getattr(pynvml, "__version__", "?"),
            "rounds": rounds,
        },
        sys.stdout,
        indent=1,
        default=str,
    )
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
