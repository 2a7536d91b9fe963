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
    out: dict[LatencyMetric, NodeLatencyBuckets] = {}
    bounds = tuple(bounds_s)
    for metric in LATENCY_METRICS:
        if not core.rack_latency[metric].total:
            continue
        hists = core.latency[metric]
        totals = np.array([h.total for h in hists], np.int64)
        cached = _CACHE.get((id(hists), bounds))
        if cached is not None and cached[0] is hists and len(cached[1]) == len(hists):
            _, old_totals, cumulative, count, sums = cached
            # A histogram only grows, so an unchanged total means unchanged counts: redo only the rest.
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
        _CACHE[(id(hists), bounds)] = (hists, totals, cumulative, count, sums)
        while len(_CACHE) > _CACHE_ENTRIES:  # a replay's seeks make new cores: forget the oldest
            del _CACHE[next(iter(_CACHE))]
        out[metric] = NodeLatencyBuckets(metric, bounds, cumulative, count, sums)
    return out


_VALUES = bucket_value(np.arange(N_BUCKETS))
# (histogram list, bounds) -> the last result. Keyed by id() but the list itself is kept and checked,
# so an id reused by a new core's list is never mistaken for the old one. Bounded (insertion order):
# a scrape server reads one core at a time, three metrics each.
_CACHE_ENTRIES = 6
_CACHE: dict[tuple[int, tuple[float, ...]], tuple[list, np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = {}
