"""Derived views of a snapshot that the dashboard draws, computed here so no front end computes statistics.

Each function takes an immutable :class:`RackSnapshot` (or a part of it) and returns plain numpy
figures: the GPU heatmap grid (aggregated per rack for multi-rack runs), latency histograms re-binned
onto a display axis, and each node's measured mean against the median node.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from tokenwatch.core.nan_math import finite_range, nan_quiet
from tokenwatch.core.run_info import RunInfo
from tokenwatch.core.snapshot import LatencyStats, RackSnapshot
from tokenwatch.events import FloatArray, IntArray

# The GPU metrics a heatmap can show, in the order `m` cycles through them.
HEAT_METRICS: tuple[str, ...] = (
    "power_w",
    "sm_clock_mhz",
    "mem_clock_mhz",
    "hbm_used_mib",
    "hbm_busy_pct",
    "temp_c",
    "util_pct",
)
GPUS_PER_RACK = 72  # an NVL72 domain: what "a rack" means when the run does not say
_MAX_NODE_ROWS = 72


@dataclass(frozen=True, slots=True, eq=False)
class HeatGrid:
    """A (rows, cols) grid of one GPU metric; NaN = not reported.

    ``rows_are_racks`` is False for one row per node and one column per GPU; True for a multi-rack
    run, where each row is a rack and each column a node slot in it, holding that node's GPU mean
    (hottest GPU for temperatures).
    """

    metric: str
    row_labels: tuple[str, ...]
    col_labels: tuple[str, ...]
    values: FloatArray
    low: float  # smallest finite value (NaN when there is none)
    high: float
    rows_are_racks: bool


def nodes_per_rack(run: RunInfo) -> int:
    """``meta["nodes_per_rack"]`` when the source says; otherwise as many nodes as fill 72 GPUs."""
    declared = run.meta.get("nodes_per_rack") if run.meta else None
    if isinstance(declared, int) and declared > 0:
        return declared
    return max(1, GPUS_PER_RACK // max(1, run.gpus_per_node))


def heat_grid(snap: RackSnapshot, metric: str, max_node_rows: int = _MAX_NODE_ROWS) -> HeatGrid:
    """The heatmap of ``metric`` (a name from :data:`HEAT_METRICS`).

    Up to ``max_node_rows`` nodes: nodes x GPUs. Beyond: racks x node slots, so a 64-rack run is a
    64-row grid whatever its GPU count.
    """
    values = snap.gpus.metric(metric) if snap.gpus.values.size else np.zeros((0, 0))
    nodes, gpus = values.shape
    if nodes <= max_node_rows:
        low, high = finite_range(values)
        return HeatGrid(
            metric,
            snap.nodes.names,
            tuple(f"GPU{g}" for g in range(gpus)),
            values.copy(),
            low,
            high,
            rows_are_racks=False,
        )
    per_node = nan_quiet(np.nanmax if metric == "temp_c" else np.nanmean, values, axis=1)
    per_rack = nodes_per_rack(snap.run)
    racks = math.ceil(nodes / per_rack)
    padded = np.full(racks * per_rack, np.nan)
    padded[:nodes] = per_node
    grid = padded.reshape(racks, per_rack)
    width = len(str(racks))
    low, high = finite_range(grid)
    return HeatGrid(
        metric,
        tuple(f"rack{r + 1:0{max(2, width)}d}" for r in range(racks)),
        tuple(f"n{c + 1:02d}" for c in range(per_rack)),
        grid,
        low,
        high,
        rows_are_racks=True,
    )


@dataclass(frozen=True, slots=True, eq=False)
class DisplayHistogram:
    """Latency counts on ``bins`` log-spaced display buckets between ``edges_s[0]`` and ``edges_s[-1]``."""

    edges_s: FloatArray
    counts: IntArray


def display_histogram(stats: LatencyStats, bins: int, include_s: tuple[float, ...] = ()) -> DisplayHistogram:
    """Re-bin the core's fine log buckets onto ``bins`` equal steps of log(latency).

    The axis spans the observed buckets and every finite value in ``include_s`` (e.g. the SLA), padded
    by a step at each end, so markers drawn on it never fall off the edge.
    """
    bins = max(1, bins)
    points = np.concatenate([stats.bucket_values_s, np.asarray(include_s, dtype=np.float64)])
    points = points[np.isfinite(points) & (points > 0)]
    if points.size == 0:
        return DisplayHistogram(np.array([1e-3, 1.0]), np.zeros(1, np.int64))
    lo, hi = math.log10(points.min()), math.log10(points.max())
    if hi - lo < 0.3:  # a narrow spread still gets a readable axis (a factor of two)
        mid = (hi + lo) / 2
        lo, hi = mid - 0.15, mid + 0.15
    pad = (hi - lo) / max(bins - 2, 1)
    edges = np.logspace(lo - pad, hi + pad, bins + 1)
    counts, _ = np.histogram(stats.bucket_values_s, bins=edges, weights=stats.bucket_counts)
    return DisplayHistogram(edges, np.rint(counts).astype(np.int64))


def spread_vs_median_pct(snap: RackSnapshot) -> FloatArray:
    """Each node's measured mean tokens/s against the median node's, in % (positive = faster).

    The median is :attr:`RackSnapshot.node_spread`'s (finite, positive means only); NaN for nodes with
    no mean yet.
    """
    means = snap.nodes.mean_tokens_per_s
    median = snap.node_spread.median
    out = np.full(means.shape, np.nan)
    if not math.isfinite(median) or median <= 0:
        return out
    ok = np.isfinite(means) & (means > 0)
    out[ok] = (means[ok] - median) / median * 100.0
    return out
