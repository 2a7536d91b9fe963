#!/usr/bin/env python3
"""A stand-in for amd-smi on the loopback "nodes" of the live tests.

It answers ``amd-smi metric --json`` with the real RX 6600 capture (tests/data/amd-smi/rx6600-metric.json)
for $FAKE_AMDSMI_GPUS GPUs (default 4), changing only what makes rows tell apart and checkable:
``gpu`` = the GPU number and ``power.socket_power`` = captured 6 W + GPU number + $FAKE_NVSMI_NODE.
Control files in $FAKE_NVSMI_CONTROL: ``fail`` makes it exit with status 3 and amd-smi's message for a
driver that is gone; ``garbage`` prints a document cut short and a line that is no JSON.
Any other command is refused as the real one refuses an unknown one (status 2).
"""

import copy
import json
import os
import sys
from pathlib import Path

CAPTURE = Path(__file__).resolve().parent.parent / "data" / "amd-smi" / "rx6600-metric.json"


def main() -> int:
    if sys.argv[1:] != ["metric", "--json"]:
        print(f"amd-smi: error: unsupported arguments {sys.argv[1:]}", file=sys.stderr)
        return 2
    control = Path(os.environ.get("FAKE_NVSMI_CONTROL", "/nonexistent"))
    if (control / "fail").exists():
        print("AMD SMI Library Error: amdgpu driver not initialized", file=sys.stderr)
        return 3
    if (control / "garbage").exists():
        print('[\n    {\n        "gpu": 0,\n#&%! not json')
        print("not a document at all")
    node = int(os.environ.get("FAKE_NVSMI_NODE", "0"))
    (entry,) = json.loads(CAPTURE.read_text())
    gpus = []
    for g in range(int(os.environ.get("FAKE_AMDSMI_GPUS", "4"))):
        gpu = copy.deepcopy(entry)
        gpu["gpu"] = g
        gpu["power"]["socket_power"]["value"] = entry["power"]["socket_power"]["value"] + g + node
        gpus.append(gpu)
    print(json.dumps(gpus, indent=4))
    return 0


if __name__ == "__main__":
    sys.exit(main())
