"""Immutable snapshots of the core: what every front end reads. Front ends compute no statistics.

Arrays inside a snapshot are private copies (or read-only views of data that is never mutated
afterwards), so a snapshot stays valid while the core keeps ingesting.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tokenwatch.core.node_spread import NodeSpread
from tokenwatch.events import FloatArray, IntArray, LatencyMetric, NodeState, Scenario, SourceKind


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


@dataclass(frozen=True, slots=True)
class Aggregate:
    """Rack-wide figures at the snapshot time.

    ``tokens_per_s`` is over the last window; ``tokens_per_s_cumulative`` is the sum of the
    nodes' measured means (generated tokens / own duration), the published rack figure's method.
    """

    tokens_per_s: float
    tokens_per_s_cumulative: float
    per_gpu_tokens_per_s: float
    samples_per_s: float
    nodes: int
    nodes_up: int  # healthy: running or finished (not down, not stale)
    gpus: int
    gpus_reporting: int
    power_w: float
    power_limit_w: float
    tokens_per_joule: float
    energy_j: float
    tokens_done: int
    samples_done: int
    prompt_tokens_done: int


@dataclass(frozen=True, slots=True, eq=False)
class NodeTable:
    """One row per node, columnar. Throughput in tokens/s, power in W, clocks in MHz."""

    names: tuple[str, ...]
    state: tuple[NodeState, ...]
    reason: tuple[str, ...]
    tokens_per_s: FloatArray  # over the window
    mean_tokens_per_s: FloatArray  # generated tokens / own measured duration
    mean_samples_per_s: FloatArray
    delta_vs_median_pct: FloatArray  # windowed rate vs the median of running nodes (negative = slower)
    progress_pct: FloatArray
    samples_done: IntArray
    tokens_done: IntArray
    power_w: FloatArray  # sum over the node's GPUs
    sm_clock_mhz: FloatArray  # mean over GPUs
    hbm_used_mib: FloatArray  # sum over GPUs
    temp_c: FloatArray  # hottest GPU
    straggler: np.ndarray  # bool
    throttling: np.ndarray  # bool
    sparkline_tokens_per_s: FloatArray  # (nodes, points) recent per-tick rates, oldest first

    def index(self, name: str) -> int:
        return self.names.index(name)


@dataclass(frozen=True, slots=True, eq=False)
class GpuTable:
    """Latest telemetry as (nodes, gpus_per_node, len(GPU_METRICS)); NaN = never reported."""

    values: FloatArray
    throttle_reasons: np.ndarray  # (nodes, gpus) uint64

    def metric(self, name: str) -> FloatArray:
        from tokenwatch.events import GPU_METRICS

        return self.values[:, :, GPU_METRICS.index(name)]


@dataclass(frozen=True, slots=True, eq=False)
class LatencyStats:
    """One latency metric over the run so far (rack-wide), in seconds."""

    metric: LatencyMetric
    count: int
    p50: float
    p90: float
    p99: float
    mean: float
    max: float
    bucket_values_s: FloatArray  # non-empty log buckets' representative values
    bucket_counts: IntArray


@dataclass(frozen=True, slots=True)
class Alert:
    """Something the engineer should see, stamped with run time ``t`` (s)."""

    t: float
    node: str | None
    kind: str  # down, stale, up, finished, throttle, straggler, sla_ttft, sla_tpot, warning, error
    message: str
    severity: str = "warning"  # info | warning | critical
    active: bool = True


@dataclass(frozen=True, slots=True, eq=False)
class Timeline:
    """Aggregate tokens/s over the whole run (downsampled points) and its steady-state mean."""

    times: FloatArray
    tokens_per_s: FloatArray
    power_w: FloatArray
    steady_mean_tokens_per_s: float


@dataclass(frozen=True, slots=True, eq=False)
class RackSnapshot:
    t: float
    run: RunInfo
    ended: bool
    end_reason: str
    progress_pct: float | None
    eta_s: float | None
    aggregate: Aggregate
    node_spread: NodeSpread
    stragglers: tuple[str, ...]
    nodes: NodeTable
    gpus: GpuTable
    latency: Mapping[LatencyMetric, LatencyStats]
    timeline: Timeline
    alerts: tuple[Alert, ...]  # newest first, bounded
    active_alerts: tuple[Alert, ...]
    sla_s: Mapping[LatencyMetric, float]
