"""What a snapshot says about the reference run (``--baseline``): the types, and how they read in words.

The comparison is made in :mod:`tokenwatch.core.baseline.compare` at the snapshot's run time and carried
as ``RackSnapshot.baseline``; front ends draw these figures and compute none.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from tokenwatch.base.events import FloatArray, IntArray, LatencyMetric
from tokenwatch.base.formatting import DASH, format_clock

# name, rank (the i-th against the i-th), expected (every node against the simulator's expected node of
# the profile), none (the baseline has no per-node figures, or the runs are not compared)
MatchedBy = Literal["name", "rank", "expected", "none"]


@dataclass(frozen=True, slots=True, eq=False)
class BaselineLatency:
    """One latency metric of the reference run over its whole run (rack-wide), in seconds: the core's fine
    log buckets (non-empty ones), so an overlay can be re-binned onto the live histogram's axis."""

    count: int
    p50: float
    p90: float
    p99: float
    bucket_values_s: FloatArray
    bucket_counts: IntArray


@dataclass(frozen=True, slots=True, eq=False)
class BaselineView:
    """The run against its reference at run time ``t``. Rates in tokens/s, deltas in % (negative = the run
    is slower), times in s of run time.

    The compared figure is the **measured mean so far**: each node's generated tokens over its own
    duration up to ``t`` (what the summary's node figure is at the end), the rack's the sum over nodes.
    Both runs are read at the same run time, so the comparison holds through warm-up and drain, and at the
    end it is the summaries' comparison. ``node_delta_pct`` is per node of the run, in the snapshot's node
    order (NaN: no counterpart, or no figure yet on either side); ``counterpart`` names the reference node
    each was held against. ``projected_*``: the verdict's projected final figure and end against the
    reference's final figure and end (the actual ones once the run has ended).
    """

    name: str  # what the screen calls the reference: its file name, ``sim:gb300-nvl72``
    source: str  # "recording" | "result folders" | "simulator"
    matched_by: MatchedBy
    notes: tuple[str, ...]  # how the two runs differ (node count, names, GPUs): one line each
    refused: str  # non-empty: the runs cannot be compared (another scenario); every figure is NaN
    t: float
    tokens_per_s: float  # the run's rack figure at t (sum of its nodes' measured means)
    baseline_tokens_per_s: float  # the reference's at the same run time
    delta_pct: float
    node_delta_pct: FloatArray
    counterpart: tuple[str, ...]  # "" where a node has none
    final_tokens_per_s: float  # the reference's final rack figure
    end_s: float  # the reference's last completion
    projected_tokens_per_s: float
    projected_delta_pct: float
    projected_end_s: float
    finish_gap_s: float  # projected end - the reference's end (positive: finishes later)
    timeline_times: FloatArray  # the reference's rack tokens/s over its run (empty: final figures only)
    timeline_tokens_per_s: FloatArray
    latency: Mapping[LatencyMetric, BaselineLatency]
    # Per node of the run: what it or its counterpart did when either stopped partway by ``t`` (``this run:
    # down from 03:00, 30 % of its samples``), "" for the others; and what the rack figure covers, when
    # some node stopped partway (``17 of 18 nodes up in this run (...); all 18 in the baseline``).
    node_marks: tuple[str, ...] = ()
    covers: str = ""
    covers_brief: str = ""  # the same counts without the names, for a one-line header

    def delta_text(self) -> str:
        """``-2.1 %`` (the run against the baseline now), ``—`` when either has no figure yet."""
        return signed_pct(self.delta_pct)

    def headline(self) -> str:
        """``vs baseline -2.1 % at 41:07``, or why the runs are not compared."""
        if self.refused:
            return f"baseline not compared: {self.refused}"
        return f"vs baseline {self.delta_text()} at {format_clock(self.t)}"

    def finish_text(self) -> str:
        """``finish +1:32, proj -1.8 %``: the projected end against the baseline's (later is +) and the
        projected final figure against the baseline's final one."""
        if self.refused:
            return ""
        gap = self.finish_gap_s
        clock = format_clock(abs(gap))  # whole seconds: under one second either way is +00:00, not -00:00
        when = f"{'-' if gap < 0 and clock != '00:00' else '+'}{clock}" if math.isfinite(gap) else DASH
        return f"finish {when}, proj {signed_pct(self.projected_delta_pct)}"


def signed_pct(value: float) -> str:
    """``+1.4 %``, ``-2.1 %`` (a rounded zero is ``+0.0 %``); ``—`` when unknown."""
    if not math.isfinite(value):
        return DASH
    return f"{round(value, 1) or 0.0:+.1f} %"
