"""Simulated faults: ``node07:down@30m,node03:throttle@10m-20m,node11:slow@5m-15m``.

down      the node stops (no telemetry, no progress) and is reported down; resumes at the end time
stale     the node keeps working but reports nothing (a hung collector); the core must notice
throttle  SM clocks drop about a third with hw_slowdown + thermal reasons; throughput follows
slow      throughput drops to 80 % with no throttle reason (a software straggler)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from tokenwatch.durations import DurationError, parse_duration

FaultKind = Literal["down", "stale", "throttle", "slow"]
FAULT_KINDS: tuple[FaultKind, ...] = ("down", "stale", "throttle", "slow")


class FaultError(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class Fault:
    node: str
    kind: FaultKind
    start_s: float
    end_s: float = math.inf

    def active(self, t: float) -> bool:
        return self.start_s <= t < self.end_s


def parse_faults(text: str, nodes: tuple[str, ...]) -> tuple[Fault, ...]:
    """Parse a comma-separated fault list; every problem is one ``FaultError`` line."""
    faults = []
    for item in filter(None, (part.strip() for part in text.split(","))):
        node, sep, rest = item.partition(":")
        kind, at, when = rest.partition("@")
        if not sep or not at or not node or not when:
            raise FaultError(f"bad fault {item!r}: write NODE:KIND@START[-END], e.g. node07:down@30m")
        if node not in nodes:
            raise FaultError(f"bad fault {item!r}: no node {node!r} (nodes are {nodes[0]}..{nodes[-1]})")
        if kind not in FAULT_KINDS:  # narrows kind to FaultKind
            raise FaultError(f"bad fault {item!r}: kind must be one of {', '.join(FAULT_KINDS)}")
        start_text, dash, end_text = when.partition("-")
        try:
            start = parse_duration(start_text)
            end = parse_duration(end_text) if dash else math.inf
        except DurationError as exc:
            raise FaultError(f"bad fault {item!r}: {exc}") from None
        if end <= start:
            raise FaultError(f"bad fault {item!r}: the end must come after the start")
        faults.append(Fault(node, kind, start, end))
    return tuple(faults)
