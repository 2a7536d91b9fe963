"""What a run is: its name, scenario, source, nodes and nominal size, as its ``RunStarted`` said."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tokenwatch.base.events import Scenario, SourceKind


@dataclass(frozen=True, slots=True)
class RunInfo:
    name: str
    scenario: Scenario
    source: SourceKind
    nodes: tuple[str, ...]
    gpus_per_node: int
    nominal_duration_s: float | None
    total_samples: int | None
    wall_epoch: float
    meta: Mapping[str, Any] = field(default_factory=dict)

    @property
    def gpus(self) -> int:
        return len(self.nodes) * self.gpus_per_node
