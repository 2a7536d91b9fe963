"""Per-node latency histograms at fixed bounds (Prometheus ``le`` buckets), read from the core."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from tokenwatch.core.histogram import N_BUCKETS, bucket_value, cumulative_at
from tokenwatch.events import LATENCY_METRICS, FloatArray, IntArray, LatencyMetric

if TYPE_CHECKING:
    from tokenwatch.core.rack import RackCore

# 1-1.5-2-3-5-7 per decade from 1 ms to 100 s: about 14 % between bounds where TTFT and TPOT sit.
DEFAULT_BOUNDS_S: tuple[float, ...] = (
    *tuple(round(m * 10.0**e, 6) for e in range(-3, 2) for m in (1, 1.5, 2, 3, 5, 7)),
    100.0,
)


@dataclass(frozen=True, slots=True, eq=False)
class NodeLatencyBuckets:
    """One metric for every node: cumulative counts at ``bounds_s`` (nodes, bounds), totals, sums (s)."""

    metric: LatencyMetric
    bounds_s: tuple[float, ...]
    cumulative: IntArray
    count: IntArray
    sum_s: FloatArray


def node_latency_buckets(
    core: RackCore, bounds_s: Sequence[float] = DEFAULT_BOUNDS_S
) -> dict[LatencyMetric, NodeLatencyBuckets]:
    """Metrics with at least one observation, each for every node of the run. Read-only."""
    if core.run is None:
        return {}
    values = bucket_value(np.arange(N_BUCKETS))
    out: dict[LatencyMetric, NodeLatencyBuckets] = {}
    for metric in LATENCY_METRICS:
        if not core.rack_latency[metric].total:
            continue
        counts = np.stack([h.counts for h in core.latency[metric]])
        out[metric] = NodeLatencyBuckets(
            metric,
            tuple(bounds_s),
            cumulative_at(counts, bounds_s),
            counts.sum(axis=1),
            counts @ values,
        )
    return out
