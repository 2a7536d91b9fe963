"""Small multi-rack simulations for the fleet tests, and one rack's events cut out of a fleet's stream.

A fleet of ``racks`` racks of ``per_rack`` gb300 nodes (the simulator's ``--racks``, with fewer nodes per
rack so a test takes a fraction of a second), and the events a run of rack ``r``'s nodes alone would
have received: the fleet's events with the other racks' rows and nodes cut out.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import numpy as np

from tokenwatch.events import (
    Event,
    GpuBatch,
    LatencyBatch,
    LatencyLimitCounts,
    LoadGenDetail,
    LogLine,
    NodeStatus,
    Notice,
    ProgressBatch,
    RunStarted,
)
from tokenwatch.sim.faults import parse_faults
from tokenwatch.sim.profile import load_profile
from tokenwatch.sim.rack_sim import RackSimulation, SimSettings


def fleet_events(
    racks: int, per_rack: int, *, scenario: str = "Offline", duration_s: float = 120.0, faults: str = ""
) -> list[Event]:
    profile = load_profile("gb300-nvl72")
    profile = dataclasses.replace(
        profile,
        name=f"{profile.name} x{racks}",
        nodes=per_rack * racks,
        total_samples=profile.total_samples * per_rack * racks // profile.nodes,
    )
    settings = SimSettings(
        profile,
        scenario=scenario,  # type: ignore[arg-type]
        seed=3,
        duration_s=duration_s,
        faults=parse_faults(faults, profile.node_names()),
        extra_meta={"nodes_per_rack": per_rack},
    )
    return list(RackSimulation(settings).events())


def rack_events(events: list[Event], first: int, count: int, rack: str) -> Iterator[Event]:
    """The events of nodes ``first .. first + count - 1`` only, as a run of those nodes would see them."""
    start = events[0]
    assert isinstance(start, RunStarted)
    nodes = start.nodes[first : first + count]
    mine = set(nodes)
    total = start.total_samples
    meta = {**start.meta, "nodes_per_rack": count}
    yield dataclasses.replace(
        start,
        name=f"{start.name} · {rack}",
        nodes=nodes,
        total_samples=round(total * count / len(start.nodes)) if total else total,
        meta=meta,
    )
    for ev in events[1:]:
        if isinstance(ev, GpuBatch | ProgressBatch | LatencyLimitCounts):
            keep = (ev.node_index >= first) & (ev.node_index < first + count)
            if not keep.any():
                continue
            changes: dict[str, Any] = {"node_index": ev.node_index[keep] - first}
            for f in dataclasses.fields(ev):
                value = getattr(ev, f.name)
                if f.name != "node_index" and isinstance(value, np.ndarray) and len(value) == len(keep):
                    changes[f.name] = value[keep]
            yield dataclasses.replace(ev, **changes)
        elif isinstance(ev, LatencyBatch | LoadGenDetail | LogLine | NodeStatus):
            if ev.node in mine:
                yield ev
        elif isinstance(ev, Notice):
            if ev.node is None or ev.node in mine:
                yield ev
        else:
            yield ev
