"""Latency histograms on the log buckets written as bucket numbers and counts: exact, and half the bytes.

The simulator (and any source counting on :mod:`tokenwatch.base.log_buckets`) ships each node's latencies
every few seconds as (bucket value, count) pairs. Written as they are, each value is a 17-digit float
(``0.11704795725214104``) that zstd cannot shrink, and a Server recording was two thirds histograms. The
values are :data:`BUCKET_VALUES` entries, so a ``.zst`` recording writes the histogram as its first
bucket's number and one count per bucket from there (``first_bucket``, ``bucket_counts``), zeros in the
gaps; the reader gives back the same table entries, bit for bit (the header lists where the writer's
table differs from a reference every machine computes alike: :func:`reference_values`).
``bucket_counts`` is a text of one character per bucket (:data:`_DIGITS`, counts 0..90) when every count
fits, else a list of whole numbers: one character per count is a sixth smaller than the list once
compressed.

A record stands alone (no difference from an earlier histogram: measured, those compress worse, the
counts being as random as the samples), so a cut or damaged recording loses no histogram beyond the
lines it lost. A histogram whose values are not exactly table entries, that repeats a bucket, has a
count of zero, or spreads thinly over a long range is written as before. Plain ``.jsonl`` recordings
keep the values (they are for reading, not for size).
"""

from __future__ import annotations

import decimal
import functools
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from tokenwatch.base.events import LATENCY_METRICS, LatencyBatch
from tokenwatch.base.log_buckets import GAMMA, MIN_VALUE_S, N_BUCKETS, bucket_value

FIRST_KEY = "first_bucket"
COUNTS_KEY = "bucket_counts"
TABLE_KEY = "latency_bucket_values"  # the header's [[bucket, value], ...] where this machine differs
# The value each bucket's latencies are reported as (seconds), as this machine's numpy computes it (what
# the sources send): one table, whatever subset of it a histogram holds.
BUCKET_VALUES = bucket_value(np.arange(N_BUCKETS))
BUCKET_VALUES.flags.writeable = False
# Count c is the character _DIGITS[c]: printable ASCII from '#' up, without the backslash, so the text
# needs no escape in JSON.
_DIGITS = bytes(c for c in range(ord("#"), ord("~") + 1) if c != ord("\\"))
_MAX_DIGIT = len(_DIGITS) - 1
_DIGIT_ARRAY = np.frombuffer(_DIGITS, np.uint8)
_COUNT_OF_BYTE = np.full(256, -1, np.int64)
_COUNT_OF_BYTE[_DIGIT_ARRAY] = np.arange(len(_DIGITS))
# A histogram is written as a run of counts only where its range is at most this many times its
# non-empty buckets (plus a little): a few latencies seconds apart would otherwise be a long run of zeros.
_MAX_SPREAD = 8
_SPREAD_SLACK = 64


@functools.cache
def reference_values() -> np.ndarray:
    """``bucket_value``'s formula with ``GAMMA**i`` correctly rounded (decimal arithmetic to 60 digits,
    rounded once to a float): the same on every machine. numpy's power is not (its SIMD power differs
    from libm in the last bit for 58 of the 1,267 buckets on an AVX-512 machine), so a recording's header
    lists where the writer's table differs from this one, and a reader anywhere rebuilds the writer's
    values bit for bit."""
    with decimal.localcontext(prec=60):
        gamma, power, out = decimal.Decimal(GAMMA), decimal.Decimal(1), []
        for _ in range(N_BUCKETS):
            out.append(MIN_VALUE_S * 2.0 * float(power) / (GAMMA + 1.0))
            power *= gamma
    table = np.array(out)
    table.flags.writeable = False
    return table


def table_differences() -> list[list[float]]:
    """For the header: ``[bucket, value]`` wherever this machine's table differs from the reference."""
    reference = reference_values()
    return [[i, float(BUCKET_VALUES[i])] for i in np.flatnonzero(reference != BUCKET_VALUES).tolist()]


def writers_table(differences: Any) -> np.ndarray:
    """The writer's table from its header's differences; :class:`BucketRecordError` if they are not a
    list of ``[bucket, value]`` pairs (damage: the reference alone is then used)."""
    table = reference_values()
    if differences is None:
        return table
    if not isinstance(differences, list) or not all(
        isinstance(pair, list)
        and len(pair) == 2
        and type(pair[0]) is int
        and 0 <= pair[0] < N_BUCKETS
        and type(pair[1]) is float
        and math.isclose(pair[1], table[pair[0]], rel_tol=1e-12)
        for pair in differences
    ):
        raise BucketRecordError(
            f"the header's {TABLE_KEY} is not a list of [bucket, value] near each bucket's own value: "
            "latencies read from the reference table"
        )
    patched = table.copy()
    for bucket, value in differences:
        patched[bucket] = value
    patched.flags.writeable = False
    return patched


class BucketRecordError(ValueError):
    """A histogram in bucket form that does not make one (damage): the line is skipped with this message."""


def bucket_records(events: Sequence[LatencyBatch]) -> list[dict[str, Any] | None]:
    """Each histogram's record in bucket form, in order, or None where that would not give it back
    exactly (raw latencies, values not all table entries in rising order, a count of zero or less, a
    thin spread): those are written as before. Done for a burst of histograms at once (a source flushes
    every node's together): one pass of numpy over all of them costs less than writing their values as
    text did, where one per histogram cost four times that."""
    out: list[dict[str, Any] | None] = [None] * len(events)
    fits = [
        i
        for i, e in enumerate(events)
        if e.counts is not None and len(e.values_s) and len(e.counts) == len(e.values_s)
    ]
    if fits:
        for i, record in zip(fits, _bucket_records([events[i] for i in fits]), strict=True):
            out[i] = record
    return out


def _bucket_records(events: Sequence[LatencyBatch]) -> list[dict[str, Any] | None]:
    """:func:`bucket_records` of histograms that each have one count per value."""
    sizes = np.array([len(e.values_s) for e in events])
    ends = np.cumsum(sizes)
    starts = ends - sizes
    values = np.concatenate([e.values_s for e in events])
    counts = np.concatenate([e.counts for e in events])  # None filtered out by the caller
    index = BUCKET_VALUES.searchsorted(values)
    index = np.minimum(index, N_BUCKETS - 1)  # a value past the last bucket then differs from it
    steps = np.diff(index, prepend=-1)
    steps[starts] = 1  # each histogram's first bucket follows nothing of its own
    bad = (BUCKET_VALUES[index] != values) | (steps <= 0) | (counts <= 0)
    firsts, lasts = index[starts], index[ends - 1]
    spans = lasts - firsts + 1
    good = ~np.logical_or.reduceat(bad, starts) & (spans <= _MAX_SPREAD * sizes + _SPREAD_SLACK)
    if not good.any():
        return [None] * len(events)
    # One run of counts for all the good histograms, each from its first bucket, zeros in the gaps.
    run_ends = np.cumsum(np.where(good, spans, 0))
    run_starts = run_ends - np.where(good, spans, 0)
    rows = np.repeat(good, sizes)
    run = np.zeros(int(run_ends[-1]), np.int64)
    run[(index + np.repeat(run_starts - firsts, sizes))[rows]] = counts[rows]
    small = np.maximum.reduceat(counts, starts) <= _MAX_DIGIT
    text = _DIGIT_ARRAY[np.minimum(run, _MAX_DIGIT)].tobytes().decode("ascii")
    out: list[dict[str, Any] | None] = []
    for e, ok, first, begin, end, as_text in zip(
        events,
        good.tolist(),
        firsts.tolist(),
        run_starts.tolist(),
        run_ends.tolist(),
        small.tolist(),
        strict=True,
    ):
        if not ok:
            out.append(None)
            continue
        out.append(
            {
                "k": "latency",
                "t": e.t,
                "node": e.node,
                "metric": e.metric,
                FIRST_KEY: first,
                COUNTS_KEY: text[begin:end] if as_text else run[begin:end],
            }
        )
    return out


def from_buckets(record: Mapping[str, Any], t: float, node: str, table: np.ndarray) -> LatencyBatch:
    """The event of a record in bucket form (``t`` and ``node`` already checked by the caller), its
    values from ``table`` (:func:`writers_table`)."""
    metric = record["metric"]
    if metric not in LATENCY_METRICS:
        raise BucketRecordError(f"latency metric must be one of {LATENCY_METRICS}")
    first = record[FIRST_KEY]
    if isinstance(first, bool) or not isinstance(first, int) or not 0 <= first < N_BUCKETS:
        raise BucketRecordError(f"{FIRST_KEY} must be a bucket number from 0 to {N_BUCKETS - 1}")
    run = _counts(record[COUNTS_KEY])
    if first + len(run) > N_BUCKETS:
        raise BucketRecordError(f"{COUNTS_KEY} runs past the last bucket ({N_BUCKETS - 1})")
    filled = np.flatnonzero(run)
    if not len(filled):
        raise BucketRecordError(f"{COUNTS_KEY} holds no latency")
    return LatencyBatch(t, node, metric, table[filled + first], run[filled])


def _counts(value: Any) -> np.ndarray:
    if isinstance(value, str):
        try:
            raw = np.frombuffer(value.encode("ascii"), np.uint8)
        except UnicodeEncodeError:
            raise BucketRecordError(f"{COUNTS_KEY} holds a character that is not a count") from None
        run = _COUNT_OF_BYTE[raw]
        if len(run) and run.min() < 0:
            raise BucketRecordError(f"{COUNTS_KEY} holds a character that is not a count")
        return run
    if not isinstance(value, list) or not all(type(c) is int for c in value):
        raise BucketRecordError(f"{COUNTS_KEY} must be a text of counts or a list of whole numbers")
    try:
        run = np.array(value, dtype=np.int64)
    except OverflowError:
        raise BucketRecordError(f"{COUNTS_KEY} holds a count beyond 2^63-1") from None
    if len(run) and run.min() < 0:
        raise BucketRecordError(f"{COUNTS_KEY} must not hold a negative count")
    return run
