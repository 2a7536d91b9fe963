"""Cumulative work out of one log's lines, per writer (stream), as the writers mean their figures.

A rate line ("Avg generation throughput: 812.4 tokens/s") states the mean over the time since the
same writer's previous line. So the first line of a stream only starts its clock (crediting it a
whole default interval made N lines read N/(N-1) too high), and each later line is credited the time
since the previous one, taken from the lines' own timestamps (feed time when the line carries
none). A logger that skips idle intervals (vLLM logs nothing while all rates are zero, yet its
clock runs on) must not be credited for them: when ``interval`` is set, a gap much longer than the
stream's own cadence (the median of its recent gaps, at most ``interval``) counts as one cadence.

Each stream keeps its own clock and counts: data-parallel engines write their lines in the same
second, and a node's figures are the sum over its streams.
"""

from __future__ import annotations

import statistics
from collections import deque
from dataclasses import dataclass, field

STAMP_RESOLUTION_S = 1.0  # most loggers print whole seconds: a gap may read one second long
_CADENCE_GAPS = 9


@dataclass(slots=True)
class StreamClock:
    """When one stream's rate lines were written, and how long the rate on each covers."""

    interval_s: float | None
    last: float | None = None
    from_stamps: bool | None = None  # whether ``last`` is log time (True) or feed time (False)
    gaps: deque[float] = field(default_factory=lambda: deque(maxlen=_CADENCE_GAPS))
    went_back_from: float | None = None  # where the clock was before it went back (None: it has not)

    def cadence(self) -> float | None:
        """The stream's own logging interval: the median of its recent gaps, at most ``interval``."""
        if self.interval_s is None:
            return None
        if not self.gaps:
            return self.interval_s
        return min(self.interval_s, statistics.median(self.gaps))

    def covered(self, stamp: float | None, t: float) -> tuple[float, str | None]:
        """Seconds the rate on a line covers (log time ``stamp`` if it has one, else feed time ``t``),
        and why the line was credited nothing, if it was."""
        position, from_stamps = (stamp, True) if stamp is not None else (t, False)
        last, self.last = self.last, position
        if last is None or from_stamps != self.from_stamps:
            self.from_stamps = from_stamps
            return 0.0, None  # the first line starts the clock
        gap = position - last
        if gap < 0:
            self.gaps.clear()
            self.went_back_from = max(last, self.went_back_from or last)
            return 0.0, f"clock went back {-gap:.0f} s: the line starts the stream's clock again"
        if self.went_back_from is not None and position >= self.went_back_from:
            # the clock is back where it was (one line was misstamped): count from there, never the
            # whole jump back and forth again
            gap, self.went_back_from = position - self.went_back_from, None
        limit, interval = self.cadence(), self.interval_s
        if limit is None or interval is None:
            return gap, None
        if 0 < gap <= 1.5 * interval:
            self.gaps.append(gap)
        if gap <= 1.5 * limit + STAMP_RESOLUTION_S:
            return gap, None
        return limit, None  # idle intervals were skipped: the line covers one interval


@dataclass(slots=True)
class StreamCounts:
    """One stream's cumulative work (``None``: this stream does not report it)."""

    clock: StreamClock
    tokens: float | None = None
    prompt_tokens: float | None = None
    samples: int | None = None
    # the previous run-mean reading (samples, elapsed): a drop means the writer started a new run
    mean_samples: float | None = None
    mean_elapsed: float | None = None

    def add_rates(
        self, tokens_per_s: float | None, prompt_tokens_per_s: float | None, seconds: float
    ) -> None:
        if tokens_per_s is not None:
            self.tokens = (self.tokens or 0.0) + tokens_per_s * seconds
        if prompt_tokens_per_s is not None:
            self.prompt_tokens = (self.prompt_tokens or 0.0) + prompt_tokens_per_s * seconds

    def set_from_mean(self, tokens: float, samples: float | None, elapsed: float | None) -> None:
        """Tokens as a run-mean rate times the run's duration so far. The figures are rounded (two
        decimals, whole seconds), so a reading a little below the last one is held; a reading after
        the run's sample count or clock went back is a new run, passed on as such."""
        restarted = (
            samples is not None and self.mean_samples is not None and samples < self.mean_samples
        ) or (elapsed is not None and self.mean_elapsed is not None and elapsed < self.mean_elapsed)
        if restarted or self.tokens is None:
            self.tokens = tokens
        else:
            self.tokens = max(self.tokens, tokens)
        self.mean_samples, self.mean_elapsed = samples, elapsed


def totals(streams: list[StreamCounts]) -> tuple[int | None, int | None, int | None]:
    """The node's (samples, tokens, prompt tokens): sums over the streams that report each."""

    def total(values: list[float | int | None]) -> float | None:
        known = [v for v in values if v is not None]
        return sum(known) if known else None

    samples = total([s.samples for s in streams])
    tokens = total([s.tokens for s in streams])
    prompt = total([s.prompt_tokens for s in streams])
    return (
        None if samples is None else int(samples),
        None if tokens is None else round(tokens),
        None if prompt is None else round(prompt),
    )
