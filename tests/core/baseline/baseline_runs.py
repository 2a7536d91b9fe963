"""Seeded simulator recordings for the baseline tests, and the measured means computed from raw events.

The reference computation here reads progress events only (no core): a node's measured mean at run time t
is its tokens at t over (its last growth at or before t - its first report), the published per-node
figure read at t; the rack's is the sum over nodes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

from tokenwatch.base.events import Event, NodeStatus, Progress, ProgressBatch, RunStarted
from tokenwatch.inputs.sim.faults import parse_faults
from tokenwatch.inputs.sim.profile import load_profile
from tokenwatch.inputs.sim.rack_sim import RackSimulation, SimSettings
from tokenwatch.recording import RecordingWriter

RUN_SEED, RUN_FAULTS, BASE_SEED = 2, "node03:slow@1m-5m,node07:down@6m-7m", 1


def record(path: Path, seed: int, duration_s: float, faults: str = "") -> Path:
    profile = load_profile("gb300-nvl72")
    settings = SimSettings(
        profile, seed=seed, duration_s=duration_s, faults=parse_faults(faults, profile.node_names())
    )
    with RecordingWriter(path, meta={"created": "2025-09-09T00:00:00+00:00"}) as writer:
        for event in RackSimulation(settings).events():
            writer.write(event)
    return path


def measured_means(events: list[Event], t: float) -> dict[str, float]:
    """Each node's tokens at ``t`` / (its last growth at or before ``t`` - its first report), from the
    raw progress events (the published per-node figure, read at ``t``)."""
    start = next(e for e in events if isinstance(e, RunStarted))
    tokens = dict.fromkeys(start.nodes, 0)
    first: dict[str, float] = {}
    grew: dict[str, float] = {}
    for event in events:
        if event.t > t:
            continue
        rows: list[tuple[str, int | None]] = []
        if isinstance(event, ProgressBatch):
            rows = [
                (start.nodes[i], int(k)) for i, k in zip(event.node_index, event.tokens_done, strict=True)
            ]
        elif isinstance(event, Progress):
            rows = [(event.node, event.tokens_done)]
        for name, done in rows:
            first.setdefault(name, event.t)
            if done is not None and done > tokens[name]:
                tokens[name], grew[name] = done, event.t
    out = {}
    for name in start.nodes:
        span = grew.get(name, math.nan) - first.get(name, math.nan)
        out[name] = tokens[name] / span if span > 0 else math.nan
    return out


def pct(value: float, reference: float) -> float:
    return (value / reference - 1.0) * 100.0


def finite_sum(values: dict[str, float]) -> float:
    return sum(v for v in values.values() if math.isfinite(v))


def down_and_share(events: Sequence[Event], node: str) -> tuple[float, float]:
    """(when ``node`` was last reported down, the share of the samples it was given that it completed),
    from the raw events: its status events and progress, the run's total split evenly over its nodes."""
    start = next(e for e in events if isinstance(e, RunStarted))
    assert start.total_samples
    index = start.nodes.index(node)
    down_at, samples = math.nan, 0
    for event in events:
        if isinstance(event, NodeStatus) and event.node == node and event.state == "down":
            down_at = event.t
        elif isinstance(event, ProgressBatch):
            for i, done in zip(event.node_index.tolist(), event.samples_done.tolist(), strict=True):
                if i == index:
                    samples = max(samples, int(done))
        elif isinstance(event, Progress) and event.node == node and event.samples_done is not None:
            samples = max(samples, event.samples_done)
    return down_at, samples / (start.total_samples / len(start.nodes))
