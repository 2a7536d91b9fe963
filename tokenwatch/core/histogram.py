"""Mergeable log-bucketed latency histograms with a bounded relative error (1 %), counted in the buckets
of :mod:`tokenwatch.base.log_buckets` (the simulator's latency batches use the same ones).
Two histograms merge by adding their count arrays, so per-node histograms sum to the rack's and
deltas from any source (raw observations, simulator ticks, Prometheus buckets) add the same way.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from tokenwatch.base.events import FloatArray, IntArray
from tokenwatch.base.log_buckets import (
    GAMMA,
    MAX_VALUE_S,
    MIN_VALUE_S,
    N_BUCKETS,
    RELATIVE_ACCURACY,
    bucket_index,
    bucket_upper,
    bucket_value,
    compress,
)

__all__ = [  # the bucket scheme comes from base.log_buckets; the core's users find it here too
    "GAMMA",
    "MAX_VALUE_S",
    "MIN_VALUE_S",
    "N_BUCKETS",
    "RELATIVE_ACCURACY",
    "LogHistogram",
    "bucket_index",
    "bucket_upper",
    "bucket_value",
    "coarse_bins",
    "compress",
    "cumulative_at",
    "quantiles_of",
]

_NO_COUNTS = np.zeros(N_BUCKETS, dtype=np.int64)
_NO_COUNTS.flags.writeable = False


class LogHistogram:
    """Dense counts over :data:`N_BUCKETS` log buckets; ``dropped`` counts NaN/inf observations.

    The count array is made at the first observation: an Offline fleet of 1,152 nodes holds 3,456
    per-node histograms that never see one (35 MB of zeros, allocated again at every replay seek).
    Until then ``counts`` is a shared read-only zero array.

    ``used`` is a range of buckets that holds every count (``[low, high)``; empty until the first): a
    fleet's verdict tick reads every node's quantiles in one pass, and copying all 1,268 buckets of each
    of 1,152 nodes' histograms was most of its cost, where their latencies span a few hundred."""

    __slots__ = ("_counts", "dropped", "total", "used")

    def __init__(self) -> None:
        self._counts: IntArray | None = None
        self.total = 0
        self.dropped = 0
        self.used = (N_BUCKETS, 0)

    @property
    def counts(self) -> IntArray:
        return _NO_COUNTS if self._counts is None else self._counts

    def _own_counts(self) -> IntArray:
        if self._counts is None:
            self._counts = np.zeros(N_BUCKETS, dtype=np.int64)
        return self._counts

    def add(self, values_s: FloatArray, counts: IntArray | None = None) -> None:
        """Add observations (optionally weighted: ``counts[i]`` copies of ``values_s[i]``)."""
        values = np.asarray(values_s, dtype=np.float64)
        finite = np.isfinite(values)
        weights = np.ones(values.shape, np.int64) if counts is None else np.asarray(counts, np.int64)
        weights = np.maximum(weights, 0)
        if finite.all():  # the usual batch: no copies to leave the non-finite out
            idx, kept = bucket_index(values), weights
        else:
            self.dropped += int(weights[~finite].sum())
            idx, kept = bucket_index(values[finite]), weights[finite]
        np.add.at(self._own_counts(), idx, kept)
        self.total += int(kept.sum())
        if idx.size:
            self._widen(int(idx.min()), int(idx.max()) + 1)

    def _widen(self, low: int, high: int) -> None:
        self.used = (min(self.used[0], low), max(self.used[1], high))

    def merge(self, other: LogHistogram) -> None:
        if other._counts is not None:
            self._own_counts()[:] += other._counts
            self._widen(*other.used)
        self.total += other.total
        self.dropped += other.dropped

    def copy(self) -> LogHistogram:
        clone = LogHistogram()
        clone._counts = None if self._counts is None else self._counts.copy()
        clone.total = self.total
        clone.dropped = self.dropped
        clone.used = self.used
        return clone

    def quantiles(self, qs: Sequence[float]) -> list[float]:
        """Quantiles in seconds (smallest bucket whose cumulative share reaches q); NaN when empty."""
        return quantiles_of(self.counts, qs)

    def mean(self) -> float:
        if self.total == 0:
            return math.nan
        return float((self.counts * bucket_value(np.arange(N_BUCKETS))).sum() / self.total)


def quantiles_of(counts: IntArray, qs: Sequence[float]) -> list[float]:
    """Quantiles of a dense count array (see :meth:`LogHistogram.quantiles`)."""
    total = int(counts.sum())
    if total == 0:
        return [math.nan for _ in qs]
    cumulative = np.cumsum(counts)
    ranks = np.maximum(np.ceil(np.asarray(qs, dtype=np.float64) * total), 1)
    idx = np.searchsorted(cumulative, ranks, side="left")
    return [float(v) for v in bucket_value(np.minimum(idx, N_BUCKETS - 1))]


def cumulative_at(counts: IntArray, bounds_s: Sequence[float]) -> IntArray:
    """Observations at or below each bound (seconds), as a Prometheus ``le`` bucket counts them.

    Last axis of ``counts`` is the :data:`N_BUCKETS` buckets (so (nodes, N_BUCKETS) works too). A log
    bucket counts below a bound when its representative value is, so a count is exact to within the
    histogram's 1 % relative accuracy.
    """
    cumulative = np.cumsum(np.asarray(counts, dtype=np.int64), axis=-1)
    last = np.searchsorted(bucket_value(np.arange(N_BUCKETS)), np.asarray(bounds_s, np.float64), "right") - 1
    out = np.zeros((*cumulative.shape[:-1], len(bounds_s)), dtype=np.int64)
    ok = last >= 0
    out[..., ok] = cumulative[..., last[ok]]
    return out


def coarse_bins(values_s: FloatArray, counts: IntArray, max_bins: int) -> tuple[FloatArray, IntArray]:
    """Merge runs of ``k`` adjacent log buckets into at most ``max_bins`` bins for a chart.

    Takes the (representative value, count) pairs of :func:`compress`; returns (edges in seconds,
    len(edges) - 1 counts). Bins follow bucket boundaries, so every bin holds the same number of
    buckets and no bin is inflated by aliasing.
    """
    values = np.asarray(values_s, dtype=np.float64)
    weights = np.asarray(counts, dtype=np.int64)
    if values.size == 0:
        return np.zeros(0), np.zeros(0, np.int64)
    idx = bucket_index(values)
    lo, hi = int(idx.min()), int(idx.max())
    k = max(1, math.ceil((hi - lo + 1) / max(1, max_bins)))
    bins = (hi - lo) // k + 1
    out = np.zeros(bins, np.int64)
    np.add.at(out, (idx - lo) // k, weights)
    edges = bucket_upper(lo - 1 + k * np.arange(bins + 1))
    return np.asarray(edges, dtype=np.float64), out
