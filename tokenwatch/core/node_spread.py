"""Spread of per-node throughput, in the form of the published rack summary."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from tokenwatch.base.events import FloatArray


@dataclass(frozen=True, slots=True)
class NodeSpread:
    """max/min/mean/median tokens/s over nodes; ``spread_pct = (max-min)/min*100``."""

    max: float
    min: float
    mean: float
    median: float
    spread_pct: float
    nodes: int

    @staticmethod
    def of(tokens_per_s: FloatArray) -> NodeSpread:
        """Spread of the finite, positive values (nodes with no work yet are left out)."""
        values = np.asarray(tokens_per_s, dtype=np.float64)
        values = values[np.isfinite(values) & (values > 0)]
        if values.size == 0:
            nan = math.nan
            return NodeSpread(nan, nan, nan, nan, nan, 0)
        lo, hi = float(values.min()), float(values.max())
        return NodeSpread(
            max=hi,
            min=lo,
            mean=float(values.mean()),
            median=float(np.median(values)),
            spread_pct=(hi - lo) / lo * 100.0,
            nodes=int(values.size),
        )


def median_of(values: FloatArray) -> float:
    """``np.median`` of finite values (the same number: the middle one, or the mean of the middle two),
    without its generic machinery, which cost more than the partition itself at every 1-s tick."""
    n = values.size
    k = n // 2
    if n % 2:
        return float(np.partition(values, k)[k])
    part = np.partition(values, (k - 1, k))
    return float((part[k - 1] + part[k]) / 2.0)


def eligible_median(tokens_per_s: FloatArray, eligible: np.ndarray) -> float:
    """The median of the eligible nodes' finite values; NaN when fewer than two are."""
    values = np.asarray(tokens_per_s, dtype=np.float64)
    mask = eligible & np.isfinite(values)
    return median_of(values[mask]) if mask.sum() >= 2 else math.nan


def below_median_pct(
    tokens_per_s: FloatArray, eligible: np.ndarray, median: float | None = None
) -> FloatArray:
    """How far each node is below the median of the eligible nodes, in % (negative = above).

    NaN for nodes that are not eligible or when fewer than two nodes are eligible. ``median``: that
    median where the caller has it already (:func:`eligible_median`).
    """
    values = np.asarray(tokens_per_s, dtype=np.float64)
    out = np.full(values.shape, np.nan)
    mask = eligible & np.isfinite(values)
    if mask.sum() < 2:
        return out
    if median is None:
        median = median_of(values[mask])
    if median <= 0:
        return out
    out[mask] = (median - values[mask]) / median * 100.0
    return out
