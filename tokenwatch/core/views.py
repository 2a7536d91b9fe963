"""Derived views of a snapshot that the dashboard draws, computed here so no front end computes statistics.

Each function takes an immutable :class:`RackSnapshot` (or a part of it) and returns plain numpy
figures: the GPU heatmap grid (aggregated per rack for multi-rack runs) and the value scale its colours
(and the node screen's per-GPU bars) stretch over, latency histograms re-binned onto a display axis,
and each node's measured mean against the median node.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from tokenwatch.base.events import FloatArray
from tokenwatch.core.fleet.rack_groups import nodes_per_rack, rack_label
from tokenwatch.core.histogram import GAMMA, MIN_VALUE_S, bucket_index
from tokenwatch.core.nan_math import finite_range, nan_quiet
from tokenwatch.core.snapshot import LatencyStats, RackSnapshot

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
_MAX_NODE_ROWS = 72
NO_NODE = -1  # a heatmap cell with no node behind it (the padding of a multi-rack grid's last rack)


@dataclass(frozen=True, slots=True)
class MinSpan:
    """The smallest span a colour or bar scale of one metric stretches over.

    ``fraction`` of the highest value the rack reports now of the ``reference`` metric (a limit, a
    capacity, or the metric itself: the rack's top clock; when none is reported, or ``reference`` is
    None, of the highest value shown), or ``absolute`` in the metric's own unit. ``basis`` says which,
    for the legend.
    """

    fraction: float
    reference: str | None = None
    absolute: float = 0.0
    basis: str = ""


# A difference inside these is noise on a healthy rack, not news: 1,371-1,393 W near a 1,400 W limit is
# one colour, not a rainbow. Clocks: a power-cap dip is a few %, throttling a third.
MIN_SPANS: dict[str, MinSpan] = {
    "power_w": MinSpan(0.10, "power_limit_w", basis="10 % of the power limit"),
    "sm_clock_mhz": MinSpan(0.10, "sm_clock_mhz", basis="10 % of the rack's top clock"),
    "mem_clock_mhz": MinSpan(0.10, "mem_clock_mhz", basis="10 % of the rack's top clock"),
    "hbm_used_mib": MinSpan(0.05, "hbm_total_mib", basis="5 % of HBM capacity"),
    "hbm_busy_pct": MinSpan(0.0, absolute=10.0, basis="10 points"),
    "temp_c": MinSpan(0.0, absolute=10.0, basis="10 °C"),
    "util_pct": MinSpan(0.0, absolute=10.0, basis="10 points"),
}
_PERCENT_METRICS = frozenset({"hbm_busy_pct", "util_pct"})


@dataclass(frozen=True, slots=True)
class ValueScale:
    """What the lowest and highest colour (or an empty and a full bar) stand for, in the metric's unit.

    ``low``..``high`` spans the values shown, widened about their middle to at least ``min_span`` (and
    kept inside 0..100 for percentages, above 0 otherwise); ``data_low``..``data_high`` is the finite
    values' own range. All NaN when no value is finite.
    """

    low: float
    high: float
    data_low: float
    data_high: float
    min_span: float

    @property
    def widened(self) -> bool:
        """Whether the values spread less than the minimum span (the scale is wider than the data)."""
        return self.data_high - self.data_low < self.min_span

    def fraction(self, values: FloatArray) -> FloatArray:
        """Where each value sits on the scale, 0..1 (NaN for NaN; the middle when the scale is a point)."""
        v = np.asarray(values, np.float64)
        span = self.high - self.low
        if math.isnan(span):
            return np.full(v.shape, np.nan)
        if span <= 0:
            return np.where(np.isnan(v), np.nan, 0.5)
        return (v - self.low) / span


def min_span(metric: str, reference: float, top: float) -> float:
    """The smallest scale span for ``metric``: ``reference`` is the limit or capacity the span is a
    fraction of (NaN when unknown), ``top`` the highest value shown."""
    rule = MIN_SPANS.get(metric, MinSpan(0.0))
    if rule.absolute > 0:
        return rule.absolute
    base = reference if rule.reference is not None and math.isfinite(reference) and reference > 0 else top
    return rule.fraction * abs(base) if math.isfinite(base) else 0.0


def value_scale(metric: str, values: FloatArray, reference: float = math.nan) -> ValueScale:
    """The scale of ``values`` of ``metric`` (see :class:`ValueScale`)."""
    data_low, data_high = finite_range(np.asarray(values, np.float64))
    if not math.isfinite(data_low):
        nan = math.nan
        return ValueScale(nan, nan, nan, nan, nan)
    span = min_span(metric, reference, data_high)
    low, high = data_low, data_high
    if high - low < span:
        middle = (low + high) / 2
        low, high = middle - span / 2, middle + span / 2
        ceiling = 100.0 if metric in _PERCENT_METRICS else math.inf
        shift = max(0.0, -low) if low < 0 else min(0.0, ceiling - high)
        low, high = low + shift, high + shift
    return ValueScale(low, high, data_low, data_high, span)


def scale_reference(snap: RackSnapshot, metric: str) -> float:
    """What ``metric``'s minimum span is a fraction of: the highest value of its reference metric the
    rack reports now (the power limit, the HBM capacity, the top clock); NaN when the metric has none
    or no GPU reports it now."""
    rule = MIN_SPANS.get(metric)
    if rule is None or rule.reference is None or not snap.gpus.values.size:
        return math.nan
    return finite_range(snap.gpus.metric(rule.reference))[1]


@dataclass(frozen=True, slots=True, eq=False)
class HeatGrid:
    """A (rows, cols) grid of one GPU metric; NaN = no fresh value, and ``freshness`` says why.

    ``rows_are_racks`` is False for one row per node and one column per GPU; True for a multi-rack
    run, where each row is a rack and each column a node slot in it, holding that node's mean over its
    fresh GPUs (hottest GPU for temperatures). ``freshness`` holds ``GpuTable.freshness`` codes (0 fresh,
    1 stale, 2 down, 3 never reported; for a node slot its freshest GPU's) and :data:`NO_NODE` where a
    slot has no node. Colours stretch over ``scale``.
    """

    metric: str
    row_labels: tuple[str, ...]
    col_labels: tuple[str, ...]
    values: FloatArray
    freshness: np.ndarray  # (rows, cols) int8
    scale: ValueScale
    rows_are_racks: bool

    @property
    def low(self) -> float:
        return self.scale.low

    @property
    def high(self) -> float:
        return self.scale.high


def heat_grid(snap: RackSnapshot, metric: str, max_node_rows: int = _MAX_NODE_ROWS) -> HeatGrid:
    """The heatmap of ``metric`` (a name from :data:`HEAT_METRICS`).

    Up to ``max_node_rows`` nodes: nodes x GPUs. Beyond: racks x node slots, so a 64-rack run is a
    64-row grid whatever its GPU count.
    """
    values = snap.gpus.metric(metric) if snap.gpus.values.size else np.zeros((0, 0))
    freshness = snap.gpus.freshness if snap.gpus.values.size else np.zeros((0, 0), np.int8)
    reference = scale_reference(snap, metric)
    nodes, gpus = values.shape
    if nodes <= max_node_rows:
        return HeatGrid(
            metric,
            snap.nodes.names,
            tuple(f"GPU{g}" for g in range(gpus)),
            values.copy(),
            freshness.astype(np.int8, copy=True),
            value_scale(metric, values, reference),
            rows_are_racks=False,
        )
    per_node = nan_quiet(np.nanmax if metric == "temp_c" else np.nanmean, values, axis=1)
    per_rack = nodes_per_rack(snap.run)
    racks = math.ceil(nodes / per_rack)
    padded = np.full(racks * per_rack, np.nan)
    padded[:nodes] = per_node
    codes = np.full(racks * per_rack, NO_NODE, np.int8)
    codes[:nodes] = freshness.min(axis=1) if gpus else 3
    grid = padded.reshape(racks, per_rack)
    return HeatGrid(
        metric,
        tuple(rack_label(r, racks) for r in range(racks)),
        tuple(f"n{c + 1:02d}" for c in range(per_rack)),
        grid,
        codes.reshape(racks, per_rack),
        value_scale(metric, grid, reference),
        rows_are_racks=True,
    )


@dataclass(frozen=True, slots=True, eq=False)
class DisplayHistogram:
    """Latency counts on ``bins`` log-spaced display buckets between ``edges_s[0]`` and ``edges_s[-1]``.

    Counts are fractional: a fine bucket that straddles two display buckets is shared between them.
    """

    edges_s: FloatArray
    counts: FloatArray


_LOG10_GAMMA = math.log10(GAMMA)


def display_histogram(stats: LatencyStats, bins: int, include_s: tuple[float, ...] = ()) -> DisplayHistogram:
    """Re-bin the core's fine log buckets onto ``bins`` equal steps of log(latency).

    Each fine bucket's count is spread over the display buckets its extent overlaps, in proportion to
    the overlap in log(latency): fine buckets (2 % wide) do not line up with display columns, and
    putting each one whole into the column that holds its middle gives columns of one and two buckets
    side by side, a comb where the data is smooth. The axis spans the observed buckets' extents and
    every finite value in ``include_s`` (e.g. the SLA), padded by a step at each end, so markers drawn
    on it never fall off the edge and every count lands on it.
    """
    bins = max(1, bins)
    values = np.asarray(stats.bucket_values_s, np.float64)
    weights = np.asarray(stats.bucket_counts, np.float64)
    keep = np.isfinite(values) & (values > 0) & (weights > 0)
    values, weights = values[keep], weights[keep]
    # Bucket i holds (GAMMA**(i-1), GAMMA**i] * MIN_VALUE_S: its extent in log10 seconds.
    upper = math.log10(MIN_VALUE_S) + bucket_index(values) * _LOG10_GAMMA
    lower = upper - _LOG10_GAMMA
    extras = np.asarray(include_s, dtype=np.float64)
    extras = np.log10(extras[np.isfinite(extras) & (extras > 0)])
    points = np.concatenate([lower, upper, extras])
    if points.size == 0:
        return DisplayHistogram(np.array([1e-3, 1.0]), np.zeros(1))
    lo, hi = float(points.min()), float(points.max())
    if hi - lo < 0.3:  # a narrow spread still gets a readable axis (a factor of two)
        mid = (hi + lo) / 2
        lo, hi = mid - 0.15, mid + 0.15
    pad = (hi - lo) / max(bins - 2, 1)
    log_edges = np.linspace(lo - pad, hi + pad, bins + 1)
    # Share of each fine bucket below each display edge (buckets x edges), then the counts between edges.
    below = np.clip((log_edges[None, :] - lower[:, None]) / _LOG10_GAMMA, 0.0, 1.0)
    cumulative = weights @ below
    return DisplayHistogram(np.power(10.0, log_edges), np.diff(cumulative))


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
