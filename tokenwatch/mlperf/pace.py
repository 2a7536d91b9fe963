"""Each node's pace (output tokens per second) now, its usual pace, and how noisy it is.

Read from the cumulative token counts the core keeps per node (any sampling, e.g. 1 s recent points
after coarser whole-run points). Rates are tokens per second; noise is relative (a share of the pace).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from tokenwatch.base.column_median import (
    linear_quantiles,
    median_columns,
    nanmedian_columns,
    quantile_columns,
)
from tokenwatch.base.events import FloatArray
from tokenwatch.base.nan_to_zero import nan_to_zero


@dataclass(frozen=True, slots=True)
class Assumptions:
    """What the projection assumes where the data cannot tell. Times in seconds."""

    window_s: float = 60.0  # a node's pace now: its last minute (less early in a run)
    block_s: float = 10.0  # pace noise is measured on blocks this long...
    history_s: float = 3600.0  # ...over at most this much of the run before now
    drain_s: float = 10.0  # Offline: expected length of the drain tail (a tail of length d costs d/2)
    output_cv: float = 0.7  # spread of output tokens per sample, when only their running mean is known
    outage_s: float = 120.0  # a stalled node may stay stalled this long more
    # Low side: one running node may still lose this share of the work of the run time it has left (a
    # stall, a slowdown, a throttle): the faults no data can foresee.
    future_share: float = 0.2
    stall_after_s: float = 5.0  # a running node whose tokens have not grown for this long is stalled
    z: float = 3.0  # half-width of the random part of the band, in standard errors
    # Warm-up (mlperf/warm_up.py): steady once the rack's pace over a window rose at most warm_rise over
    # the window before; at the latest warm_max_s into the run.
    warm_window_s: float = 10.0
    warm_rise: float = 0.02
    warm_max_s: float = 600.0


# A median-based SD (the median absolute deviation of normal data, or of its differences) measured from n
# blocks has a standard error of about 1.17 / sqrt(n) of itself (its efficiency, 37 %, against the SD's).
_NOISE_SE = 1.17


@dataclass(frozen=True, slots=True, eq=False)
class Pace:
    now: FloatArray  # tokens/s over the window (since the last pause if the node paused); NaN: just resumed
    usual: FloatArray  # the node's usual pace, before any change of pace
    noise: FloatArray  # relative SD of 10-s block rates
    window_s: float
    block_s: float

    def spread(self, horizon: FloatArray) -> FloatArray:
        """Relative SD of the mean pace over ``horizon`` seconds ahead, as estimated now."""
        b = self.block_s
        return self.noise * np.sqrt(b / np.maximum(horizon, b) + b / self.window_s)


def cumulative_at(times: FloatArray, values: FloatArray, at: FloatArray) -> FloatArray:
    """Each column of ``values`` (K, n) linearly interpolated at the times ``at`` (m,): shape (m, n)."""
    at = np.clip(at, times[0], times[-1])
    right = np.clip(np.searchsorted(times, at, side="right"), 1, len(times) - 1)
    left = right - 1
    span = times[right] - times[left]
    w = np.where(span > 0, (at - times[left]) / np.where(span > 0, span, 1.0), 1.0)
    return values[left] + w[:, None] * (values[right] - values[left])


def pace_spans(now: float, start: float, a: Assumptions) -> tuple[float, float, int]:
    """(the window of the pace now, s; the length of a block, s; how many blocks) that a pace at
    ``now`` of a run started at ``start`` measures: all that the pace reads of the run's start."""
    elapsed = max(now - start, 1e-9)
    window = min(a.window_s, 0.25 * elapsed)
    block = min(a.block_s, window / 3.0)
    # Blocks cover the run before now, but not its first fifth (the warm-up ramp is no one's usual pace).
    blocks = max(int(min(a.history_s, 0.8 * elapsed) // block), 1)
    return window, block, blocks


def measure_pace(
    times: FloatArray,
    tokens: FloatArray,
    tokens_now: FloatArray,
    now: float,
    start: float,
    a: Assumptions,
    cadence_s: FloatArray | None = None,
) -> Pace:
    """``times`` (K,) / ``tokens`` (K, n): cumulative tokens per node up to ``now``; ``start``: the run's.
    ``cadence_s``: each node's typical interval between reports (None: every sample is a report).
    Each node's pace is measured from its own column alone, so the pace of some nodes is theirs of the
    pace of more nodes at the same times, wherever both measure the same :func:`pace_spans`."""
    window, block, blocks = pace_spans(now, start, a)
    edges = now - block * np.arange(blocks, -1, -1, dtype=np.float64)
    cum = cumulative_at(times, tokens, np.append(edges, now - window))
    block_rates = np.diff(cum[:-1], axis=0) / block
    cadence = np.zeros(tokens.shape[1]) if cadence_s is None else nan_to_zero(cadence_s)
    pace_now = _since_last_pause(
        times,
        tokens,
        tokens_now,
        (now, window, block),
        (tokens_now - cum[-1]) / window,
        np.maximum(a.stall_after_s, 3.0 * cadence),
    )
    if blocks < 8:  # too little history to measure: the pace now, and a wide, honest noise
        return Pace(
            pace_now,
            np.where(pace_now > 0, pace_now, block_rates[-1]),
            np.full(len(pace_now), 0.25),
            window,
            block,
        )
    # numpy's figures by one sort (rates of counts: no negative zero, which a sort may order otherwise)
    median, top = quantile_columns(block_rates, (0.5, 0.9))
    # Blocks of no progress are left out of the pace's scale and wander: a stall or an outage has terms of
    # its own in the band. A node with no working block: NaN.
    working = np.where(block_rates > 0, block_rates, np.nan)
    centre = nanmedian_columns(working)
    # Noise: from the differences of neighbouring blocks (their median absolute value as an SD), which a
    # change of pace, the ramp or a stall barely moves, relative to the median block (to the median
    # working block where most blocks are a stall: a node down for half the window had a noise of 100 %,
    # and its band 80,000 tok/s above its figure). The usual pace: the 90th percentile less 1.28 SD, i.e.
    # the middle of the node's good blocks, so a slowdown that has lasted most of the run is still seen as
    # one.
    scale = np.where(median > 0, median, nan_to_zero(centre))
    step = median_columns(np.abs(np.diff(block_rates, axis=0)))
    # A node with no working block (silent through the whole history) has no noise of its own: NaN, read
    # from its peers' (with_peers), which a node's own column cannot tell.
    noise = np.where(scale > 0, step / (0.6745 * math.sqrt(2.0)) / np.where(scale > 0, scale, 1.0), np.nan)
    usual = top - 1.28 * nan_to_zero(noise) * median  # no noise of its own: no working block either
    # The band's noise is at least the spread of the block rates themselves (their median absolute
    # deviation as an SD): a pace that wanders (a CPU engine's follows the machine's load: its 10-s rates
    # ran from 255 to 1,393 tok/s in one 62-s run) varies more than its neighbouring blocks differ by.
    wander = nanmedian_columns(np.abs(working - centre)) / 0.6745
    noise = np.fmax(noise, np.where(centre > 0, nan_to_zero(wander / centre), np.nan))
    # The noise is itself measured, from a few blocks early in a run, by median-based estimators: taken
    # one standard error high. A CPU engine's pace, its blocks' noise ~0.4 of it, was read at 0.15 from 8
    # blocks at 107 s of a 184-s run, and the band's low side missed LoadGen's figure at that tick.
    noise = noise * (1.0 + _NOISE_SE / math.sqrt(blocks))
    return Pace(pace_now, usual, noise, window, block)


def _since_last_pause(
    times: FloatArray,
    tokens: FloatArray,
    tokens_now: FloatArray,
    now_window_block: tuple[float, float, float],
    window_rate: FloatArray,
    pause_s: FloatArray,
) -> FloatArray:
    """The rate over the window, or only since the node last made no progress for ``pause_s`` (a stall, or
    a silence its next report made up for): a pause that has ended says nothing of the pace now. A flat
    spell shorter than that is a source read between its reports (a /metrics scrape every second or more,
    the core's points every second), no pause: taken as one, the pace of a real engine scraped every
    second was unknown most of its run. Either rate runs to the node's last growth, for the same reason.
    NaN: resumed too recently."""
    now, window, block = now_window_block
    inside = np.flatnonzero(times >= now - window)
    if inside.size < 3:
        return window_rate
    t, values = times[inside], tokens[inside]
    m, n = values.shape
    grew = np.diff(values, axis=0) > 0  # (m - 1, n): node's count grew from t[j] to t[j + 1]
    step = np.arange(m - 1)[:, None]
    # The time of each node's latest growth at or before each step (t[0] before any).
    latest = np.maximum.accumulate(np.where(grew, t[1:, None], -np.inf), axis=0)
    before = np.vstack((np.full((1, n), t[0]), np.maximum(latest[:-1], t[0])))
    ended = grew & (t[1:, None] - before >= pause_s)  # growth that ends a pause (its catch-up step)
    heard = np.maximum(latest[-1], t[0])  # when each node's count last grew (the window's start: never)
    still = now - heard >= pause_s  # paused now
    last = np.where(ended.any(axis=0), m - 2 - np.argmax(ended[::-1], axis=0), -1)
    # The first growth after the catch-up step: the pace is measured from there.
    upcoming = np.where(grew & (step > last), step, m)
    resume = upcoming.min(axis=0)
    found = resume < m - 1
    at = np.minimum(resume + 1, m - 1)
    # Both rates run to the node's last growth: the flat spell since is its source unread, not work undone
    # (a real engine's /metrics unanswered for 3 s of a 20-s window read its pace 14 % low, 8 s before its
    # end). A node resumed less than a block ago has no pace yet, however the time since was read.
    span = heard - t[at]
    gained = tokens_now - values[at, np.arange(n)]
    paced = np.where(
        found & (now - t[at] >= block) & (span > 0), gained / np.where(span > 0, span, 1.0), np.nan
    )
    heard_span = heard - (now - window)
    window_rate = np.where(
        heard_span >= block, window_rate * window / np.maximum(heard_span, 1e-9), window_rate
    )
    return np.where(still, np.nan, np.where(last >= 0, paced, window_rate))


def with_peers(pace: Pace, rate: FloatArray, running: np.ndarray) -> Pace:
    """A node far below its peers (under Tukey's fence, q1 - 1.5 IQR of the running nodes' paces) may be
    back at a normal node's pace any moment, even if it has been slow since early on: its usual pace is at
    least the peers' lower quartile. A node with no noise of its own (silent through its whole history)
    resumes with its peers' typical noise, the same work on the same hardware; with no peer, 100 %
    (taken for every such node, it put a 10-minute-silent node's resumed end 22 minutes late and its
    figure 120,000 tok/s high)."""
    noise = pace.noise
    unmeasured = np.isnan(noise)
    if unmeasured.any():
        measured = noise[running & ~unmeasured]
        noise = np.where(unmeasured, float(np.median(measured)) if measured.size else 1.0, noise)
    peers = rate[running]
    if peers.size < 4:
        return Pace(pace.now, pace.usual, noise, pace.window_s, pace.block_s)
    q1, q3 = linear_quantiles(peers, (0.25, 0.75))  # np.quantile's figures, without its generic path
    outlier = rate < q1 - 1.5 * (q3 - q1)
    usual = np.where(outlier, np.maximum(pace.usual, q1), pace.usual)
    return Pace(pace.now, usual, noise, pace.window_s, pace.block_s)
