"""Each node's pace (output tokens per second) now, its usual pace, and how noisy it is.

Read from the cumulative token counts the core keeps per node (any sampling, e.g. 1 s recent points
after coarser whole-run points). Rates are tokens per second; noise is relative (a share of the pace).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from tokenwatch.base.events import FloatArray


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


def measure_pace(
    times: FloatArray, tokens: FloatArray, tokens_now: FloatArray, now: float, start: float, a: Assumptions
) -> Pace:
    """``times`` (K,) / ``tokens`` (K, n): cumulative tokens per node up to ``now``; ``start``: the run's."""
    elapsed = max(now - start, 1e-9)
    window = min(a.window_s, 0.25 * elapsed)
    block = min(a.block_s, window / 3.0)
    # Blocks cover the run before now, but not its first fifth (the warm-up ramp is no one's usual pace).
    blocks = max(int(min(a.history_s, 0.8 * elapsed) // block), 1)
    edges = now - block * np.arange(blocks, -1, -1, dtype=np.float64)
    cum = cumulative_at(times, tokens, np.append(edges, now - window))
    block_rates = np.diff(cum[:-1], axis=0) / block
    pace_now = _since_last_pause(
        times, tokens, tokens_now, now, window, block, (tokens_now - cum[-1]) / window
    )
    if blocks < 8:  # too little history to measure: the pace now, and a wide, honest noise
        return Pace(
            pace_now,
            np.where(pace_now > 0, pace_now, block_rates[-1]),
            np.full(len(pace_now), 0.25),
            window,
            block,
        )
    median, top = np.quantile(block_rates, (0.5, 0.9), axis=0)
    safe = np.where(median > 0, median, 1.0)
    # Noise: from the differences of neighbouring blocks (their median absolute value as an SD), which a
    # change of pace, the ramp or a stall barely moves. The usual pace: the 90th percentile less 1.28 SD,
    # i.e. the middle of the node's good blocks, so a slowdown that has lasted most of the run is still
    # seen as one.
    step = np.median(np.abs(np.diff(block_rates, axis=0)), axis=0)
    noise = np.where(median > 0, step / (0.6745 * math.sqrt(2.0)) / safe, 1.0)
    return Pace(pace_now, top - 1.28 * noise * median, noise, window, block)


def _since_last_pause(
    times: FloatArray,
    tokens: FloatArray,
    tokens_now: FloatArray,
    now: float,
    window: float,
    block: float,
    window_rate: FloatArray,
) -> FloatArray:
    """The rate over the window, or only since the node last made no progress (a stall, or a silence its next
    report made up for): a pause that has ended says nothing of the pace now. NaN: resumed too recently."""
    inside = np.flatnonzero(times >= now - window)
    if inside.size < 3:
        return window_rate
    t, values = times[inside], tokens[inside]
    flat = np.diff(values, axis=0) <= 0  # (m - 1, n): no progress from t[j] to t[j + 1]
    last = flat.shape[0] - 1 - np.argmax(flat[::-1], axis=0)
    resume = np.minimum(last + 2, len(t) - 1)  # skip the catch-up step after the pause
    span = now - t[resume]
    gained = tokens_now - values[resume, np.arange(values.shape[1])]
    paced = np.where(span >= block, gained / np.where(span > 0, span, 1.0), np.nan)
    return np.where(flat.any(axis=0), paced, window_rate)


def with_peers(pace: Pace, rate: FloatArray, running: np.ndarray) -> Pace:
    """A node far below its peers (under Tukey's fence, q1 - 1.5 IQR of the running nodes' paces) may be
    back at a normal node's pace any moment, even if it has been slow since early on: its usual pace is at
    least the peers' lower quartile."""
    peers = rate[running]
    if peers.size < 4:
        return pace
    q1, q3 = np.quantile(peers, (0.25, 0.75))
    outlier = rate < q1 - 1.5 * (q3 - q1)
    usual = np.where(outlier, np.maximum(pace.usual, q1), pace.usual)
    return Pace(pace.now, usual, pace.noise, pace.window_s, pace.block_s)
