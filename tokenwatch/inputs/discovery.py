"""Nodes a source finds for itself: a fleet watched through Prometheus has no host list, its racks and
nodes are what the server knows. The live collector asks such a source before the run starts, so the
run's node list (and the racks' node ranges in its ``meta``) holds them from the first event."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable


@dataclass(frozen=True, slots=True)
class Discovered:
    """The run's nodes in order, their GPU count where known, and what the run's ``meta`` should say."""

    nodes: tuple[str, ...]
    gpus_per_node: int | None = None
    meta: Mapping[str, Any] = field(default_factory=dict)


@runtime_checkable
class NodeDiscovery(Protocol):
    """A rack-wide collector that knows the run's nodes before it starts (a fleet's Prometheus)."""

    async def discover(self) -> Discovered | None:
        """The nodes, or None when the source cannot tell (it has said why in its notices)."""
        ...
