"""Figures computed straight from a recording's events, independently of the core, to check the contracts.

The rules are the docs', re-implemented here in plain Python and numpy: a node's tokens/s now is its
generated-token counter over the last 10 s of run time (sampled on 1-s ticks); its measured mean is its
tokens over its own first-to-last-change span; a node is down / finished as its source last said, and
stale when it has sent nothing for 5 s; node power and HBM are sums over its GPUs' latest values, SM clock
their mean, temperature the hottest. None of this reads the core or its snapshots.
"""

from __future__ import annotations

import bisect
import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from tokenwatch.base.events import (
    GPU_METRICS,
    GpuBatch,
    GpuSample,
    LatencyBatch,
    NodeStatus,
    Progress,
    ProgressBatch,
    RunEnded,
    RunStarted,
)
from tokenwatch.recording import read_events

WINDOW_S = 10.0  # docs: "tokens_per_s is over the last 10 s of run time"
TICK_S = 1.0  # the core samples counters once per second of run time
STALE_AFTER_S = 5.0  # docs: "stale when a node has sent nothing for stale_after (5 s)"
_POWER, _SM, _HBM, _TEMP = (
    GPU_METRICS.index(m) for m in ("power_w", "sm_clock_mhz", "hbm_used_mib", "temp_c")
)
_ENERGY = GPU_METRICS.index("energy_j")


@dataclass(slots=True)
class NodeFacts:
    progress_t: list[float] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)
    samples: list[int] = field(default_factory=list)
    seen_t: list[float] = field(default_factory=list)  # any data from the node (progress, GPU, up/finished)
    status: list[tuple[float, str, str]] = field(default_factory=list)  # (t, state, reason)
    grew_t: list[float] = field(default_factory=list)  # times its token counter grew
    status_t: list[float] = field(default_factory=list)

    def __repr__(self) -> str:
        return f"NodeFacts({len(self.progress_t)} progress reports, status {self.status[-1:]})"

    def finish(self) -> None:
        self.seen_t.sort()
        self.status_t = [t for t, _, _ in self.status]
        self.grew_t = [
            t for j, t in enumerate(self.progress_t) if self.tokens[j] > (self.tokens[j - 1] if j else 0)
        ]

    def counter_at(self, t: float, which: str = "tokens") -> int:
        k = bisect.bisect_right(self.progress_t, t) - 1
        return int(getattr(self, which)[k]) if k >= 0 else 0

    def reported_state(self, t: float) -> tuple[str, float, str]:
        """(state, since, reason): what the source last said at or before ``t`` (up if it said nothing)."""
        k = bisect.bisect_right(self.status_t, t) - 1
        if k < 0:
            return "up", 0.0, ""
        _, state, reason = self.status[k]
        while k > 0 and self.status[k - 1][1] == state:
            k -= 1
        return state, self.status[k][0], reason

    def state(self, t: float) -> str:
        reported = self.reported_state(t)[0]
        if reported != "up":
            return reported
        k = bisect.bisect_right(self.seen_t, t) - 1
        silent = t - self.seen_t[k] > STALE_AFTER_S if k >= 0 else t > STALE_AFTER_S
        return "stale" if silent else "up"

    def last_seen(self, t: float) -> float:
        """The time of the node's latest data at or before ``t`` (NaN: none)."""
        k = bisect.bisect_right(self.seen_t, t) - 1
        return self.seen_t[k] if k >= 0 else math.nan

    def read_at(self, t: float) -> float:
        """The time of the node's latest progress report at or before ``t`` (NaN: none)."""
        k = bisect.bisect_right(self.progress_t, t) - 1
        return self.progress_t[k] if k >= 0 else math.nan

    def window_rate(self, t: float) -> float:
        """The counter's growth between the reports that bound the window (the last at or before the 1-s
        tick at or before t - 10 s, or the first one after it; the one before the newest where the window
        holds no newer one) and the newest report (``t`` itself once the node's reports stopped for longer
        than the staleness limit), over the time between them."""
        tick = math.floor((t - WINDOW_S) / TICK_S) * TICK_S  # the last 1-s tick at or before t - 10 s
        newest = self.read_at(t)
        if math.isnan(newest):
            return math.nan
        base = self.read_at(tick)
        if math.isnan(base) or tick - base > STALE_AFTER_S:  # first reported (again) inside the window
            k = bisect.bisect_right(self.progress_t, base) if not math.isnan(base) else 0
            base = self.progress_t[k] if self.progress_t[k] < newest else math.nan
        elif base >= newest:  # no report since the window began: the one before the newest
            k = bisect.bisect_left(self.progress_t, newest) - 1
            base = self.progress_t[k] if k >= 0 and newest - self.progress_t[k] <= STALE_AFTER_S else math.nan
        end = newest if t - newest <= STALE_AFTER_S else t
        if not end > base:
            return math.nan
        return (self.counter_at(end) - self.counter_at(base)) / (end - base)

    def measured_mean(self, t: float, which: str = "tokens") -> float:
        """Counter over the node's own span, from its first report to its token counter's last growth."""
        if not self.progress_t or self.progress_t[0] > t:
            return math.nan
        g = bisect.bisect_right(self.grew_t, t)
        span = (self.grew_t[g - 1] if g else self.progress_t[0]) - self.progress_t[0]
        return self.counter_at(t, which) / span if span > 0 else math.nan


@dataclass(slots=True)
class RecordingFacts:
    run: RunStarted
    end: RunEnded | None
    last_t: float
    nodes: list[NodeFacts]
    gpu_events: list[tuple[float, np.ndarray, np.ndarray, np.ndarray]]  # (t, node index, gpu, values)
    latency: dict[str, tuple[np.ndarray, np.ndarray]]  # metric -> (values_s, counts)
    warnings: list[str]

    def __repr__(self) -> str:  # short: assertion messages would otherwise print every event
        return f"RecordingFacts({self.run.name!r}, {len(self.names)} nodes, until t={self.last_t:g})"

    @property
    def names(self) -> tuple[str, ...]:
        return self.run.nodes

    def gpu_tables_at(self, times: Sequence[float]) -> list[np.ndarray]:
        """The fresh telemetry per (node, GPU, metric) at each of ``times`` (ascending): a GPU's latest
        reading if it is at most STALE_AFTER_S old, else NaN (docs: a value older than the staleness
        limit is shown as missing)."""
        shape = (len(self.names), self.run.gpus_per_node, len(GPU_METRICS))
        table = np.full(shape, np.nan)
        seen = np.full(shape[:2], -np.inf)
        out: list[np.ndarray] = []
        k = 0
        for t in times:
            while k < len(self.gpu_events) and self.gpu_events[k][0] <= t:
                at, ni, gi, values = self.gpu_events[k]
                table[ni, gi] = values
                seen[ni, gi] = at
                k += 1
            out.append(np.where((t - seen <= STALE_AFTER_S)[:, :, None], table, np.nan))
        return out

    def mean_rack_power_w(self) -> float:
        """The run's GPU energy (:meth:`run_energy_j`) over the time it covers: the run's end, or for a
        stream with no end its last whole tick before the last event."""
        energy, covered = self.run_energy_j()
        return energy / covered

    def run_energy_j(self) -> tuple[float, float]:
        """(energy J, seconds covered). Per node (docs, energy): from its GPUs' energy counters when every
        GPU of it that reported has one (each counter's growth from its first reading; a reading below the
        last one restarted from zero), else its power integrated on 1-s ticks: every GPU with a reading at
        most STALE_AFTER_S old, on a node that is neither down nor reported stale (a finished node idling
        still draws); the run's end is a last tick."""
        shape = (len(self.names), self.run.gpus_per_node)
        power, seen = np.full(shape, np.nan), np.full(shape, -np.inf)
        integrated = np.zeros(shape[0])
        previous = 0.0
        k = 0
        ticks = [*np.arange(TICK_S, self.last_t, TICK_S).tolist()] + ([self.last_t] if self.end else [])
        for t in ticks:
            while k < len(self.gpu_events) and self.gpu_events[k][0] <= t:
                at, ni, gi, values = self.gpu_events[k]
                power[ni, gi] = values[:, _POWER]
                seen[ni, gi] = at
                k += 1
            live = np.array([node.reported_state(t)[0] not in ("down", "stale") for node in self.nodes])
            fresh = live[:, None] & (t - seen <= STALE_AFTER_S)
            integrated += np.nansum(np.where(fresh, power, np.nan), axis=1) * (t - previous)
            previous = t
        counted: dict[tuple[int, int], float] = {}
        last: dict[tuple[int, int], float] = {}
        reported: set[tuple[int, int]] = set()
        for _, ni, gi, values in self.gpu_events:
            for node, gpu, reading in zip(ni.tolist(), gi.tolist(), values[:, _ENERGY].tolist(), strict=True):
                reported.add((node, gpu))
                if not math.isfinite(reading):
                    continue
                before = last.get((node, gpu))
                if before is None:
                    counted[(node, gpu)] = 0.0
                else:
                    counted[(node, gpu)] += reading - before if reading >= before else reading
                last[(node, gpu)] = reading
        energy = 0.0
        for i in range(len(self.names)):
            gpus = [key for key in reported if key[0] == i]
            if gpus and all(key in counted for key in gpus):
                energy += sum(counted[key] for key in gpus)
            else:
                energy += float(integrated[i])
        return energy, previous

    def means_at(self, t: float, which: str = "tokens") -> np.ndarray:
        return np.array([node.measured_mean(t, which) for node in self.nodes])

    def total_tokens(self) -> int:
        return sum(node.counter_at(self.last_t) for node in self.nodes)


def node_figures(table: np.ndarray, i: int) -> dict[str, float | None]:
    """A node's power (sum over GPUs), SM clock (mean), HBM (sum), temperature (max); None: no GPU said."""

    def reduce(column: int, fn: str) -> float | None:
        values = table[i, :, column]
        values = values[np.isfinite(values)]
        return float(getattr(np, fn)(values)) if values.size else None

    return {
        "power_w": reduce(_POWER, "sum"),
        "sm_clock_mhz": reduce(_SM, "mean"),
        "hbm_used_mib": reduce(_HBM, "sum"),
        "temp_c": reduce(_TEMP, "max"),
    }


def weighted_quantile(values: np.ndarray, counts: np.ndarray, q: float) -> float:
    order = np.argsort(values)
    cumulative = np.cumsum(counts[order])
    return float(values[order][np.searchsorted(cumulative, q * cumulative[-1])])


@functools.cache
def recording_facts(path: Path) -> RecordingFacts:
    events, warnings = read_events(path)
    run = events[0]
    assert isinstance(run, RunStarted), "a recording starts with its run"
    index = {name: i for i, name in enumerate(run.nodes)}
    nodes = [NodeFacts() for _ in run.nodes]
    gpu_events: list[tuple[float, np.ndarray, np.ndarray, np.ndarray]] = []
    latency_parts: dict[str, list[tuple[np.ndarray, np.ndarray]]] = {}
    end: RunEnded | None = None
    for ev in events[1:]:
        if isinstance(ev, ProgressBatch):
            for i, tokens, samples in zip(
                ev.node_index.tolist(), ev.tokens_done.tolist(), ev.samples_done.tolist(), strict=True
            ):
                node = nodes[i]
                node.progress_t.append(ev.t)
                node.tokens.append(tokens)
                node.samples.append(samples)
                node.seen_t.append(ev.t)
        elif isinstance(ev, Progress):
            node = nodes[index[ev.node]]
            node.progress_t.append(ev.t)
            node.tokens.append(ev.tokens_done if ev.tokens_done is not None else node.counter_at(ev.t))
            node.samples.append(
                ev.samples_done if ev.samples_done is not None else node.counter_at(ev.t, "samples")
            )
            node.seen_t.append(ev.t)
        elif isinstance(ev, GpuBatch):
            gpu_events.append((ev.t, ev.node_index, ev.gpu, ev.values))
            for i in set(ev.node_index.tolist()):
                nodes[i].seen_t.append(ev.t)
        elif isinstance(ev, GpuSample):
            values = np.array([[getattr(ev, m) for m in GPU_METRICS]])
            gpu_events.append((ev.t, np.array([index[ev.node]]), np.array([ev.gpu]), values))
            nodes[index[ev.node]].seen_t.append(ev.t)
        elif isinstance(ev, NodeStatus):
            node = nodes[index[ev.node]]
            node.status.append((ev.t, ev.state, ev.reason))
            if ev.state in ("up", "finished"):
                node.seen_t.append(ev.t)
        elif isinstance(ev, LatencyBatch):
            counts = ev.counts if ev.counts is not None else np.ones(len(ev.values_s), np.int64)
            latency_parts.setdefault(ev.metric, []).append((ev.values_s, counts))
        elif isinstance(ev, RunEnded):
            end = ev
    for node in nodes:
        node.finish()
    latency = {
        metric: (np.concatenate([v for v, _ in parts]), np.concatenate([c for _, c in parts]))
        for metric, parts in latency_parts.items()
    }
    last_t = max(ev.t for ev in events)
    return RecordingFacts(run, end, last_t, nodes, gpu_events, latency, warnings)
