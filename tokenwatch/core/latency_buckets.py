"""Per-node latency histograms at fixed bounds (Prometheus ``le`` buckets), read from the core."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tokenwatch.base.events import LATENCY_METRICS, FloatArray, IntArray, LatencyMetric
from tokenwatch.core._state import RackState
from tokenwatch.core.histogram import N_BUCKETS, bucket_value, cumulative_at

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
    state: RackState, bounds_s: Sequence[float] = DEFAULT_BOUNDS_S
) -> dict[LatencyMetric, NodeLatencyBuckets]:
    """Metrics with at least one observation, each for every node of the run.

    Only the memo in ``state.bucket_memo`` changes: nodes whose totals did not move since the last call
    keep their buckets (a histogram only grows), so a scrape of a big Server run redoes only what moved.
    """
    out: dict[LatencyMetric, NodeLatencyBuckets] = {}
    bounds = tuple(bounds_s)
    memo = state.bucket_memo.entries
    for metric in LATENCY_METRICS:
        if not state.rack_latency[metric].total:
            continue
        hists = state.latency[metric]
        totals = np.array([h.total for h in hists], np.int64)
        cached = memo.get((metric, bounds))
        if cached is not None:
            old_totals, cumulative, count, sums = cached
            changed = np.flatnonzero(totals != old_totals)
            cumulative, count, sums = cumulative.copy(), count.copy(), sums.copy()
        else:
            changed = np.arange(len(hists))
            cumulative = np.zeros((len(hists), len(bounds)), np.int64)
            count, sums = np.zeros(len(hists), np.int64), np.zeros(len(hists))
        if changed.size:
            counts = np.stack([hists[i].counts for i in changed.tolist()])
            cumulative[changed] = cumulative_at(counts, bounds)
            count[changed] = counts.sum(axis=1)
            sums[changed] = counts @ _VALUES
        memo[(metric, bounds)] = (totals, cumulative, count, sums)
        out[metric] = NodeLatencyBuckets(metric, bounds, cumulative, count, sums)
    return out


_VALUES = bucket_value(np.arange(N_BUCKETS))
