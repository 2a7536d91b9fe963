"""A straggler's cause hint as the snapshot carries it (judged in :mod:`tokenwatch.core.causes._judge`)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from tokenwatch.base.durations import format_clock

CAUSE_KINDS: tuple[str, ...] = (
    "power_limit",
    "xid",
    "nvlink",
    "throttle",
    "thermal",
    "power_cap",
    "clock",
    "hbm",
    "util",
    "engine",
    "unknown",
)


@dataclass(frozen=True, slots=True)
class Cause:
    """A hint: ``kind`` (one of :data:`CAUSE_KINDS`), the evidence in words with its figures, the GPU it
    is on (None: the node as a whole, all its GPUs or its engine), when it began (run time, s; NaN
    unknown), the GPU series that shows it (``metric``; "" none) for the node screen's chart, and the
    next piece of evidence as a short figure (``extra``)."""

    kind: str
    evidence: str
    gpu: int | None
    since_t: float
    metric: str = ""
    extra: str = ""

    @property
    def text(self) -> str:
        """The one line: ``GPU2 SM clock -18 % vs rack typical (HW slowdown) since 14:05; GPU2 87 °C``."""
        line = self.evidence
        if math.isfinite(self.since_t) and self.kind not in _DATED:
            line += (
                f"; slow since {format_clock(self.since_t)}"
                if self.kind in _NODE_WIDE
                else (f" since {format_clock(self.since_t)}")
            )
        return f"{line}; {self.extra}" if self.extra else line

    def short(self) -> str:
        """The node table's cell: the kind in a word or two and the GPU."""
        word = {
            "power_limit": "power limit",
            "power_cap": "power cap",
            "engine": "engine?",
            "unknown": "no telemetry",
        }.get(self.kind, self.kind)
        return f"{word} GPU{self.gpu}" if self.gpu is not None else word


_DATED = frozenset({"power_limit", "xid", "nvlink"})  # their words say when
_NODE_WIDE = frozenset({"engine", "unknown"})


@dataclass(slots=True, eq=False)
class CauseMemory:
    """The current hint of each node (None: nothing to explain) and when hints are next judged."""

    causes: list[Cause | None]
    next_due_t: float = 0.0

    @classmethod
    def for_nodes(cls, nodes: int) -> CauseMemory:
        return cls([None] * nodes)
