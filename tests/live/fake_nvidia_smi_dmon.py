#!/usr/bin/env python3
"""A stand-in for ``nvidia-smi dmon`` (and ``-L``): replays a real L40S dmon capture under load
(tests/data/sources/nvidia-smi/dmon/nvidia-l40s__595.80.load.dmon.L2107-L2113.txt) for $FAKE_NVSMI_GPUS
GPUs (default 2), its header first, then its rows in turn every ``-d`` seconds, with one change that
makes rows tell apart and checkable: pwr = captured power + GPU number.
"""

import os
import sys
import time
from pathlib import Path

CAPTURE = (
    Path(__file__).resolve().parent.parent
    / "data/sources/nvidia-smi/dmon/nvidia-l40s__595.80.load.dmon.L2107-L2113.txt"
)


def main() -> int:
    gpus = int(os.environ.get("FAKE_NVSMI_GPUS", "2"))
    args = sys.argv[1:]
    if args == ["-L"]:
        for g in range(gpus):
            print(f"GPU {g}: NVIDIA L40S (UUID: GPU-0000000{g}-0000-0000-0000-000000000000)")
        return 0
    if args[:1] != ["dmon"]:
        print("fake nvidia-smi: only dmon and -L are implemented", file=sys.stderr)
        return 2
    delay = float(args[args.index("-d") + 1]) if "-d" in args else 1.0
    lines = CAPTURE.read_text().splitlines()
    print("\n".join(lines[:2]), flush=True)
    rows = [line.split() for line in lines[2:]]
    k = 0
    while True:
        row = rows[k % len(rows)]
        for g in range(gpus):
            cells = [str(g), str(int(row[1]) + g), *row[2:]]
            print("  ".join(f"{c:>5}" for c in cells), flush=True)
        k += 1
        time.sleep(delay)


if __name__ == "__main__":
    sys.exit(main())
