"""Each node's latency quantile (its e2e median, its TTFT / TPOT p99) for the forecast, all nodes at once.

The forecast reads one quantile per node per metric at every verdict tick, and a fleet's 64 per-rack
forecasts read the same nodes' again: one :meth:`LogHistogram.quantiles` call per node was most of a
fleet's verdict tick. Here every node's histogram is read in one numpy pass (the same integer arithmetic
as :func:`tokenwatch.core.histogram.quantiles_of`, so each figure is identical), and the figures are kept
in the verdict state for the state's version: a rack's view (:mod:`tokenwatch.core.fleet._rack_view`)
slices them with its rows instead of reading its nodes' histograms again.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from tokenwatch.base.events import FloatArray, LatencyMetric
from tokenwatch.core.histogram import N_BUCKETS, LogHistogram, bucket_value


@dataclass(slots=True, eq=False)
class NodeQuantileMemo:
    """Per (metric, q): every node's quantile (s; NaN for a node with no observation), as of the state's
    ``version``. Indexed by node, so a rack's view of the state gets its rows'."""

    version: int = -1
    values: dict[tuple[str, float], FloatArray] = field(default_factory=dict)


def quantile_per_node(hists: list[LogHistogram], q: float) -> FloatArray:
    """Quantile ``q`` of each histogram (s; NaN where it is empty): what ``hist.quantiles([q])[0]`` gives."""
    out = np.full(len(hists), math.nan)
    filled = [i for i, h in enumerate(hists) if h.total]
    if not filled:
        return out
    # Only the buckets some node has counts in (a range holding them, from each histogram's ``used``):
    # below them every cumulative count is 0 (under any rank, which is at least 1), above them it is the
    # node's total (at or over its rank), so a wider range than the counts' gives the same figures.
    lo = min(hists[i].used[0] for i in filled)
    hi = max(hists[i].used[1] for i in filled)
    cumulative = np.cumsum(np.stack([hists[i].counts[lo:hi] for i in filled]), axis=1)
    totals = cumulative[:, -1]
    ranks = np.maximum(np.ceil(q * totals.astype(np.float64)), 1)
    # The first bucket whose cumulative count reaches the rank (searchsorted, side "left"), row by row.
    idx = lo + (cumulative < ranks[:, None]).sum(axis=1)
    out[filled] = bucket_value(np.minimum(idx, N_BUCKETS - 1))
    return out


def node_quantile(
    memo: NodeQuantileMemo,
    version: int,
    latency: dict[LatencyMetric, list[LogHistogram]],
    metric: str,
    q: float,
) -> FloatArray:
    """Every node's quantile ``q`` of ``metric`` at state ``version``, read once per version."""
    if memo.version != version:
        memo.version, memo.values = version, {}
    key = (metric, q)
    found = memo.values.get(key)
    if found is None:
        found = memo.values[key] = quantile_per_node(latency[metric], q)  # type: ignore[index]
    return found
