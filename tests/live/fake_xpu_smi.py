#!/usr/bin/env python3
"""A stand-in for xpu-smi on the loopback "nodes" of the live tests.

``xpu-smi dump -d -1 -m IDS -i SECONDS`` prints the real header names for the metrics asked (as the
SMI user guide lists them) and then, every SECONDS, a row per device replayed from a real Max 1550 dump
(tests/data/xpu-smi/max1550-aurora-6gpu.csv, device d's row for d < 6), with one change that makes rows
tell apart and checkable: GPU Power = captured power + $FAKE_NVSMI_NODE (W). Metrics the capture lacks
print N/A, as xpu-smi does for what it cannot read. $FAKE_XPUSMI_GPUS devices (default 4).
"""

import os
import sys
import time
from datetime import datetime
from pathlib import Path

CAPTURE = Path(__file__).resolve().parent.parent / "data" / "xpu-smi" / "max1550-aurora-6gpu.csv"
NAMES = {
    0: "GPU Utilization (%)",
    1: "GPU Power (W)",
    2: "GPU Frequency (MHz)",
    3: "GPU Core Temperature (Celsius Degree)",
    4: "GPU Memory Temperature (Celsius Degree)",
    5: "GPU Memory Utilization (%)",
    17: "GPU Memory Bandwidth Utilization (%)",
    18: "GPU Memory Used (MiB)",
}


def main() -> int:
    args = sys.argv[1:]
    if args[:1] != ["dump"] or "-m" not in args or "-d" not in args:
        print("xpu-smi: only 'dump -d DEVICES -m METRICS [-i SECONDS]' is implemented", file=sys.stderr)
        return 2
    metrics = [int(m) for m in args[args.index("-m") + 1].split(",")]
    unknown = [m for m in metrics if m not in NAMES]
    if unknown:
        print(f"Invalid metrics type: {unknown[0]}", file=sys.stderr)
        return 2
    interval = float(args[args.index("-i") + 1]) if "-i" in args else 1.0
    node = int(os.environ.get("FAKE_NVSMI_NODE", "0"))
    lines = CAPTURE.read_text().splitlines()
    header = [c.strip() for c in lines[0].split(",")]
    rows = [[c.strip() for c in line.split(",")] for line in lines[1:7]]  # the first round: devices 0-5
    print(", ".join(["Timestamp", "DeviceId", *(NAMES[m] for m in metrics)]), flush=True)
    while True:
        stamp = datetime.now().astimezone().strftime("%H:%M:%S.%f")[:12]
        for device in range(int(os.environ.get("FAKE_XPUSMI_GPUS", "4"))):
            row = dict(zip(header, rows[device % len(rows)], strict=True))
            cells = []
            for m in metrics:
                value = row.get(NAMES[m], "N/A")
                if m == 1:
                    value = f"{float(value) + node:.2f}"
                cells.append(value)
            print(", ".join([stamp, f"{device:>4}", *cells]), flush=True)
        time.sleep(interval)


if __name__ == "__main__":
    sys.exit(main())
