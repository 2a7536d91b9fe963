"""The log buckets latencies are counted in, with a bounded relative error: the one scheme the
simulator's latency batches and the core's histograms share.

Bucket ``i`` holds values in ``(GAMMA**(i-1), GAMMA**i] * MIN_VALUE_S``; a value is reported as the
bucket's harmonic midpoint ``2*GAMMA**i/(GAMMA+1)``, whose relative error is at most
``RELATIVE_ACCURACY`` (1 %) for every value inside the range (the DDSketch construction).
"""

from __future__ import annotations

import math

import numpy as np

from tokenwatch.base.events import FloatArray, IntArray

RELATIVE_ACCURACY = 0.01
GAMMA = (1 + RELATIVE_ACCURACY) / (1 - RELATIVE_ACCURACY)
_LOG_GAMMA = math.log(GAMMA)
MIN_VALUE_S = 1e-6  # 1 µs: below that a latency is clamped to the first bucket
MAX_VALUE_S = 1e5  # ~28 h: above that, to the last
N_BUCKETS = math.ceil(math.log(MAX_VALUE_S / MIN_VALUE_S) / _LOG_GAMMA) + 1


def bucket_index(values_s: FloatArray) -> IntArray:
    """Bucket of each value (seconds); values outside the range clamp to the end buckets."""
    # minimum/maximum rather than np.clip: the same numbers (NaN stays NaN), at half the cost on the few
    # dozen values of a latency batch, where np.clip's checks of its bounds were most of the call.
    clipped = np.minimum(np.maximum(np.asarray(values_s, dtype=np.float64), MIN_VALUE_S), MAX_VALUE_S)
    idx = np.ceil(np.log(clipped / MIN_VALUE_S) / _LOG_GAMMA - 1e-9).astype(np.int64)
    return np.minimum(np.maximum(idx, 0), N_BUCKETS - 1)


def bucket_value(index: IntArray | int) -> FloatArray:
    """The representative value (seconds) reported for bucket ``index``."""
    i = np.asarray(index, dtype=np.float64)
    return np.asarray(MIN_VALUE_S * 2.0 * GAMMA**i / (GAMMA + 1.0), dtype=np.float64)


def bucket_upper(index: IntArray | int) -> FloatArray:
    """Upper bound (seconds) of bucket ``index``."""
    return np.asarray(MIN_VALUE_S * GAMMA ** np.asarray(index, dtype=np.float64), dtype=np.float64)


def compress(counts: IntArray) -> tuple[FloatArray, IntArray]:
    """The non-empty buckets as (representative values, counts): how histograms travel in events."""
    nonzero = np.flatnonzero(counts)
    return bucket_value(nonzero), counts[nonzero].copy()
