"""Small multi-rack simulations for the fleet tests, and one rack's events cut out of a fleet's stream.

A fleet of ``racks`` racks of ``per_rack`` gb300 nodes (the simulator's ``--racks``, with fewer nodes per
rack so a test takes a fraction of a second), and the events a run of rack ``r``'s nodes alone would
have received: the fleet's events with the other racks' rows and nodes cut out. And a rack's row of
the fleet table worked out from the events themselves (:func:`facts_at`, :func:`expected_rack`), without
the core, for the tests to hold the core's figures against.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Iterator
from typing import Any

import numpy as np

from tokenwatch.base.events import (
    GPU_METRICS,
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
from tokenwatch.inputs.sim.faults import parse_faults
from tokenwatch.inputs.sim.profile import load_profile
from tokenwatch.inputs.sim.rack_sim import RackSimulation, SimSettings

GPUS = 4  # gb300: GPUs per node
WINDOW_S = 10.0  # the core's window for tokens/s now
STALE_S = 5.0  # the core's staleness limit (the simulator reports every second)


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


@dataclasses.dataclass
class NodeFacts:
    """What the events said about one node up to a time (worked out without the core)."""

    tokens: list[tuple[float, int]] = dataclasses.field(default_factory=list)  # (t, cumulative)
    down: bool = False
    power: dict[int, tuple[float, float]] = dataclasses.field(default_factory=dict)  # gpu -> (t, W)


def facts_at(events: list[Event], t: float) -> list[NodeFacts]:
    start = events[0]
    assert isinstance(start, RunStarted)
    facts = [NodeFacts() for _ in start.nodes]
    power = GPU_METRICS.index("power_w")
    for ev in events:
        if ev.t > t:
            break
        if isinstance(ev, ProgressBatch):
            for i, tokens in zip(ev.node_index.tolist(), ev.tokens_done.tolist(), strict=True):
                facts[i].tokens.append((ev.t, tokens))
        elif isinstance(ev, GpuBatch):
            for i, g, row in zip(ev.node_index.tolist(), ev.gpu.tolist(), ev.values, strict=True):
                facts[i].power[g] = (ev.t, float(row[power]))
        elif isinstance(ev, NodeStatus):
            facts[start.nodes.index(ev.node)].down = ev.state == "down"
    return facts


def tokens_at(node: NodeFacts, t: float) -> int:
    return max((c for s, c in node.tokens if s <= t), default=0)


def expected_rack(facts: list[NodeFacts], t: float) -> dict[str, Any]:
    """One rack's row: window rate, power, spread of measured means, nodes up, worst node."""
    up = [not f.down and f.tokens and t - f.tokens[-1][0] <= STALE_S for f in facts]
    rates = [(tokens_at(f, t) - tokens_at(f, t - WINDOW_S)) / WINDOW_S for f in facts]
    rate = sum(r for r, u in zip(rates, up, strict=True) if u)
    power = sum(
        w for f, u in zip(facts, up, strict=True) if u for s, w in f.power.values() if t - s <= STALE_S
    )
    means = []
    for f, u in zip(facts, up, strict=True):
        grew = [s for (s, c), (_, before) in zip(f.tokens[1:], f.tokens, strict=False) if c > before]
        first = f.tokens[0][0] if f.tokens else math.nan
        if u and grew and grew[-1] > first:
            means.append(f.tokens[-1][1] / (grew[-1] - first))
    running = [
        (r, k) for k, (r, u) in enumerate(zip(rates, up, strict=True)) if u and tokens_at(facts[k], t) > 0
    ]
    median = statistics.median(r for r, _ in running)
    slowest, worst = min(running)
    return {
        "tokens_per_s": rate,
        "per_gpu": rate / (len(facts) * GPUS),
        "power_w": power,
        "tokens_per_joule": rate / power,
        "spread_pct": (max(means) - min(means)) / min(means) * 100.0,
        "nodes_up": sum(up),
        "worst": worst,
        "worst_delta_pct": (slowest - median) / median * 100.0,
    }


def prometheus_fleet_started(
    racks: tuple[str, ...], nodes_per_rack: int, nominal_s: float, total_samples: int | None
) -> RunStarted:
    """The run start a fleet watched through Prometheus begins with: its racks' nodes in rack order, 4 GPUs
    each, the racks laid out as the fleet collector says them."""
    nodes = tuple(f"{rack}/node{n:02d}" for rack in racks for n in range(1, nodes_per_rack + 1))
    layout = [[rack, r * nodes_per_rack, nodes_per_rack] for r, rack in enumerate(racks)]
    meta = {
        "racks": [r for r in racks for _ in range(nodes_per_rack)],
        "fleet": {"source": "prometheus", "racks": layout},
    }
    return RunStarted(0.0, "fleet", "Offline", nodes, 4, nominal_s, total_samples, "live", 0.0, meta)
