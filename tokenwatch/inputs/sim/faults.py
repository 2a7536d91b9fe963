"""Simulated faults: ``node07:down@30m,node03:throttle@10m-20m,node05:powercap=1200@20m-30m``.

``NODE[/gpuN]:KIND[=VALUE]@START[-END]``, comma-separated; ``/gpuN`` puts a GPU fault on one GPU of the
node (without it, on all of them). A node's throughput follows its slowest GPU (tensor parallelism: every
step waits for the last GPU).

down      the node stops (no telemetry, no progress) and is reported down; resumes at the end time
stale     the node keeps working but reports nothing (a hung collector); the core must notice
throttle  SM clocks drop about a third with hw_slowdown + thermal reasons; throughput follows
slow      throughput drops to 80 % with no throttle reason (a software straggler)
powercap  ``=W``: the GPUs' power limit is lowered to W (a power-steering service): their power sits at
          the cap, their clocks drop with the ``sw_power_cap`` reason, throughput follows
hot       a GPU's cooling fails: it heats ~28 °C over its peers within a minute, and above its slowdown
          temperature its clocks drop 15 % with the ``sw_thermal_slowdown`` reason
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Literal

from tokenwatch.base.durations import DurationError, parse_duration

FaultKind = Literal["down", "stale", "throttle", "slow", "powercap", "hot"]
FAULT_KINDS: tuple[FaultKind, ...] = ("down", "stale", "throttle", "slow", "powercap", "hot")
GPU_FAULTS = frozenset({"throttle", "powercap", "hot"})  # may name one GPU
_GPU = re.compile(r"(?:gpu)?(\d{1,4})")


class FaultError(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class Fault:
    node: str
    kind: FaultKind
    start_s: float
    end_s: float = math.inf
    gpu: int | None = None  # None: every GPU of the node
    value: float | None = None  # powercap: the cap in W

    def active(self, t: float) -> bool:
        return self.start_s <= t < self.end_s

    def label(self) -> str:
        """How the run's meta names it (``node05:powercap=1200@1200-1800``)."""
        gpu = f"/gpu{self.gpu}" if self.gpu is not None else ""
        value = f"={self.value:g}" if self.value is not None else ""
        return f"{self.node}{gpu}:{self.kind}{value}@{self.start_s:g}-{self.end_s:g}"


def parse_faults(text: str, nodes: tuple[str, ...], gpus_per_node: int | None = None) -> tuple[Fault, ...]:
    """Parse a comma-separated fault list; every problem is one ``FaultError`` line."""
    faults = []
    for item in filter(None, (part.strip() for part in text.split(","))):
        where, sep, rest = item.partition(":")
        kind_text, at, when = rest.partition("@")
        if not sep or not at or not where or not when:
            raise FaultError(f"bad fault {item!r}: write NODE:KIND@START[-END], e.g. node07:down@30m")
        node, slash, gpu_text = where.partition("/")
        if node not in nodes:
            raise FaultError(f"bad fault {item!r}: no node {node!r} (nodes are {nodes[0]}..{nodes[-1]})")
        kind, eq, value_text = kind_text.partition("=")
        if kind not in FAULT_KINDS:  # narrows kind to FaultKind
            raise FaultError(f"bad fault {item!r}: kind must be one of {', '.join(FAULT_KINDS)}")
        gpu = _gpu(item, kind, gpu_text, gpus_per_node) if slash else None
        value = _value(item, kind, value_text if eq else None)
        start_text, dash, end_text = when.partition("-")
        try:
            start = parse_duration(start_text)
            end = parse_duration(end_text) if dash else math.inf
        except DurationError as exc:
            raise FaultError(f"bad fault {item!r}: {exc}") from None
        if end <= start:
            raise FaultError(f"bad fault {item!r}: the end must come after the start")
        faults.append(Fault(node, kind, start, end, gpu, value))
    return tuple(faults)


def faults_after(faults: tuple[Fault, ...], duration_s: float) -> list[str]:
    """One warning per fault that starts at or after the run's nominal end (``node07:down@90m`` on an
    80-minute run): accepted, since a run may last longer than nominal, but likely a slip of the pen."""
    from tokenwatch.base.durations import format_clock

    return [
        f"fault {f.node}{'' if f.gpu is None else f'/gpu{f.gpu}'}:{f.kind} starts at "
        f"{format_clock(f.start_s)}, after the run's nominal {format_clock(duration_s)}: it happens only "
        "if the run lasts that long"
        for f in faults
        if f.start_s >= duration_s
    ]


def _gpu(item: str, kind: str, text: str, gpus_per_node: int | None) -> int:
    if kind not in GPU_FAULTS:
        raise FaultError(f"bad fault {item!r}: {kind} is a fault of the whole node (no /gpuN)")
    found = _GPU.fullmatch(text)
    if found is None:
        raise FaultError(f"bad fault {item!r}: write the GPU as /gpuN, e.g. node11/gpu2:hot@5m")
    gpu = int(found.group(1))
    if gpus_per_node is not None and gpu >= gpus_per_node:
        raise FaultError(f"bad fault {item!r}: no GPU {gpu} (GPUs are 0..{gpus_per_node - 1})")
    return gpu


def _value(item: str, kind: str, text: str | None) -> float | None:
    if kind != "powercap":
        if text is not None:
            raise FaultError(f"bad fault {item!r}: {kind} takes no value")
        return None
    try:
        value = float(text) if text is not None else math.nan
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise FaultError(f"bad fault {item!r}: powercap needs the cap in W, e.g. node05:powercap=1200@20m")
    return value
