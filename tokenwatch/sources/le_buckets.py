"""Cumulative Prometheus ``le`` buckets -> the latency observations added since the previous read.

One rule for both ways a histogram arrives (a scraped ``/metrics`` page, a Prometheus query answer),
so the same counts always give the same :class:`~tokenwatch.base.events.LatencyBatch`:

* pairs with a NaN bound or a count that is not a finite number >= 0 are left out;
* per-bucket counts are the differences of the cumulative ones; a cumulative count that falls as
  ``le`` grows (a damaged page) is held at the running maximum, and ``problem`` says so;
* the delta is taken per bucket against the previous read of the same series; if a bucket shrank or
  the bounds changed, the source restarted (or was reconfigured): everything it holds now is new;
* each bucket's new observations read as one latency, :func:`bucket_values`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from tokenwatch.base.events import FloatArray, IntArray

# Counts above 2**53 are not whole numbers as floats (and far beyond any real run): a damaged read.
MAX_BUCKET_COUNT = float(2**53)


@dataclass(frozen=True, slots=True, eq=False)
class BucketRead:
    """One series' buckets at one read: ascending upper bounds (``+Inf`` last) and per-bucket counts."""

    bounds: tuple[float, ...]
    per_bucket: FloatArray


@dataclass(frozen=True, slots=True, eq=False)
class BucketDelta:
    """New observations (``values_s`` weighted by ``counts``, both empty when none), what to keep
    for the next read of the series, and a one-line ``problem`` with the input, if any."""

    values_s: FloatArray
    counts: IntArray
    keep: BucketRead | None
    problem: str | None = None


def bucket_values(bounds: FloatArray) -> FloatArray:
    """The latency (s) that the observations of each bucket ``(previous bound, bound]`` read as.

    * ``(lower, upper]`` with ``lower > 0``: the geometric middle ``sqrt(lower * upper)``. Latency
      buckets are log-spaced (Prometheus' defaults, vLLM's, tokenwatch's own), and the core's
      histogram keeps *relative* error: the geometric middle is the same ratio away from both bounds,
      while the arithmetic one sits near the upper bound and reads every bucket high ((0.1, 0.25]
      as 0.175 s rather than 0.158 s, 11 % more).
    * The first bucket ``(0, upper]``: ``upper / 2``. Without a lower bound there is no ratio
      middle; half the bound stays inside the bucket.
    * ``(last finite bound, +Inf]``: the last finite bound, the least those observations took.
    * ``+Inf`` with no finite bound above 0 before it: NaN, the observations cannot be placed
      (:func:`bucket_delta` leaves them out).
    """
    bounds = np.asarray(bounds, dtype=np.float64)
    lower = np.concatenate(([0.0], bounds[:-1]))
    with np.errstate(invalid="ignore"):
        middle = np.where(lower > 0, np.sqrt(lower * bounds), np.maximum(bounds, 0.0) / 2.0)
    above = np.where(lower > 0, lower, np.nan)
    return np.where(np.isposinf(bounds), above, middle)


def _empty(keep: BucketRead | None, problem: str | None = None) -> BucketDelta:
    return BucketDelta(np.empty(0, np.float64), np.empty(0, np.int64), keep, problem)


def bucket_delta(pairs: Iterable[tuple[float, float]], before: BucketRead | None) -> BucketDelta:
    """The observations a series of ``(le, cumulative count)`` pairs gained since ``before``."""
    kept = sorted((le, count) for le, count in pairs if le == le and np.isfinite(count) and count >= 0)
    if not kept:
        return _empty(before)
    bounds = tuple(le for le, _ in kept)
    cumulative = np.array([count for _, count in kept], dtype=np.float64)
    if (cumulative > MAX_BUCKET_COUNT).any():
        return _empty(before, f"a bucket count beyond {MAX_BUCKET_COUNT:.0e}: series skipped")
    problem = None
    rising = np.maximum.accumulate(cumulative)
    if (rising != cumulative).any():
        problem = "bucket counts fall as le grows: held at the running maximum"
    per_bucket = np.diff(rising, prepend=0.0)
    delta = per_bucket
    if before is not None and before.bounds == bounds and (per_bucket >= before.per_bucket).all():
        delta = per_bucket - before.per_bucket  # the usual case: what was observed since
    counts = np.rint(delta).astype(np.int64)  # buckets count whole observations
    values = bucket_values(np.array(bounds, dtype=np.float64))
    chosen = (counts > 0) & np.isfinite(values)
    keep = BucketRead(bounds, per_bucket)
    if not chosen.any():
        return _empty(keep, problem)
    values, counts = values[chosen], counts[chosen]
    values.flags.writeable = counts.flags.writeable = False  # they travel in events as they are
    return BucketDelta(values, counts, keep, problem)
