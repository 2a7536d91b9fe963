"""The baseline's overlays, laid out for drawing: its latency histogram on the live histogram's axis.

Read-only and cheap (a few hundred fine buckets re-binned once per refresh): the dashboard's latency panel
draws the result and computes nothing.
"""

from __future__ import annotations

import math

import numpy as np

from tokenwatch.base.events import FloatArray, IntArray
from tokenwatch.core.baseline.view import BaselineLatency
from tokenwatch.core.histogram import GAMMA, MIN_VALUE_S, bucket_index
from tokenwatch.core.snapshot import LatencyStats
from tokenwatch.core.views import DisplayHistogram, display_histogram

_LOG10_GAMMA = math.log10(GAMMA)


def rebin(values_s: FloatArray, counts: FloatArray | IntArray, edges_s: FloatArray) -> FloatArray:
    """Counts of the core's fine log buckets (``values_s``: their representative values) on the display
    buckets between ``edges_s``, each fine bucket shared in proportion to its overlap in log(latency), as
    :func:`~tokenwatch.core.views.display_histogram` shares them."""
    values = np.asarray(values_s, np.float64)
    weights = np.asarray(counts, np.float64)
    keep = np.isfinite(values) & (values > 0) & (weights > 0)
    values, weights = values[keep], weights[keep]
    upper = math.log10(MIN_VALUE_S) + bucket_index(values) * _LOG10_GAMMA
    lower = upper - _LOG10_GAMMA
    below = np.clip((np.log10(edges_s)[None, :] - lower[:, None]) / _LOG10_GAMMA, 0.0, 1.0)
    return np.asarray(np.diff(weights @ below), np.float64)


def overlay_histogram(
    stats: LatencyStats, reference: BaselineLatency, bins: int, include_s: tuple[float, ...] = ()
) -> tuple[DisplayHistogram, FloatArray]:
    """The run's histogram and the baseline's on one axis spanning both, the baseline's scaled to the
    run's count so far: the shapes compare, however many samples each has counted."""
    ref_values = np.asarray(reference.bucket_values_s, np.float64)
    ref_values = ref_values[np.isfinite(ref_values) & (ref_values > 0)]
    extents = (float(ref_values.min()), float(ref_values.max())) if ref_values.size else ()
    hist = display_histogram(stats, bins, (*include_s, *extents))
    ref_counts = rebin(reference.bucket_values_s, reference.bucket_counts, hist.edges_s)
    total = float(ref_counts.sum())
    scale = stats.count / total if total > 0 else 0.0
    return hist, ref_counts * scale
