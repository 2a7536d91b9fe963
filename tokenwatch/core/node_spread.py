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


def below_median_pct(tokens_per_s: FloatArray, eligible: np.ndarray) -> FloatArray:
    """How far each node is below the median of the eligible nodes, in % (negative = above).

    NaN for nodes that are not eligible or when fewer than two nodes are eligible.
    """
    values = np.asarray(tokens_per_s, dtype=np.float64)
    out = np.full(values.shape, np.nan)
    mask = eligible & np.isfinite(values)
    if mask.sum() < 2:
        return out
    median = float(np.median(values[mask]))
    if median <= 0:
        return out
    out[mask] = (median - values[mask]) / median * 100.0
    return out
