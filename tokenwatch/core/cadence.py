"""How long a node may be silent before it is stale: learnt from the node's own cadence at ingest.

A node whose only source writes every 10 s is not stale after 5 s of silence. Each node's limit is
``max(stale_after_s, 3 x its cadence)``, where its cadence is the median of the last
:data:`CADENCE_GAPS` gaps between its events. Events closer than :data:`MIN_GAP_S` (the several
events of one read: a log line's progress and latency) are one arrival, not a gap. A single long
silence is one gap among five, so a node that went quiet once does not learn to be quiet.

Both the node states (:meth:`RackState.effective_state`) and the GPUs' freshness read the limit, so a
node and its GPUs go stale together. Replays learn the same limits from the same events.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

import numpy as np

from tokenwatch.base.column_median import nanmedian_columns
from tokenwatch.base.events import FloatArray, IntArray

CADENCE_GAPS = 5
STALE_CADENCE_FACTOR = 3.0
MIN_GAP_S = 0.01
_RECOMPUTE_BEYOND = 0.1  # a gap within 10 % of the current cadence cannot move the median by more


@dataclass(slots=True, eq=False)
class NodeCadence:
    """Per node: the last gaps between its events (NaN = none yet), and the staleness limit they give."""

    stale_after_s: float
    gaps: FloatArray  # (nodes, CADENCE_GAPS)
    next_slot: IntArray  # (nodes,) where the next gap goes
    typical_s: FloatArray  # (nodes,) median of the gaps (NaN = no gap yet)
    stale_limit_s: FloatArray  # (nodes,) seconds of silence after which the node is stale

    @classmethod
    def for_nodes(cls, nodes: int, stale_after_s: float) -> NodeCadence:
        return cls(
            stale_after_s,
            np.full((nodes, CADENCE_GAPS), np.nan),
            np.zeros(nodes, np.int64),
            np.full(nodes, np.nan),
            np.full(nodes, float(stale_after_s)),
        )

    def note_one(self, i: int, t: float, last_seen: float) -> None:
        """Node ``i`` sent an event at ``t``; ``last_seen`` is its previous arrival (NaN = none)."""
        gap = t - last_seen
        if not gap > MIN_GAP_S:  # NaN included: a first event is no gap
            return
        slot = int(self.next_slot[i])
        self.gaps[i, slot] = gap
        self.next_slot[i] = (slot + 1) % CADENCE_GAPS
        typical = float(self.typical_s[i])
        if abs(gap - typical) <= _RECOMPUTE_BEYOND * typical:
            return
        # One node's five gaps in plain Python: numpy's calls cost more than the median of five (the
        # standard library's median is numpy's number: the middle one, or the mean of the middle two).
        median = statistics.median(g for g in self.gaps[i].tolist() if g == g)  # the new gap at least
        self.typical_s[i] = median
        self.stale_limit_s[i] = max(self.stale_after_s, STALE_CADENCE_FACTOR * median)

    def note_rows(self, rows: IntArray | slice, t: float, last_seen: FloatArray) -> None:
        """Nodes ``rows`` (indices, or a slice for all) sent events at ``t``; ``last_seen`` holds their
        previous arrivals, aligned with ``rows``."""
        index = np.arange(len(self.typical_s))[rows] if isinstance(rows, slice) else rows
        with np.errstate(invalid="ignore"):
            gap = t - last_seen
            ok = gap > MIN_GAP_S
        if not ok.all():
            index, gap = index[ok], gap[ok]
        if not len(index):
            return
        slots = self.next_slot[index]
        self.gaps[index, slots] = gap
        self.next_slot[index] = (slots + 1) % CADENCE_GAPS
        typical = self.typical_s[index]
        with np.errstate(invalid="ignore"):
            far = ~(np.abs(gap - typical) <= _RECOMPUTE_BEYOND * typical)
        if far.any():
            self._recompute(np.unique(index[far]))

    def _recompute(self, index: IntArray) -> None:
        # numpy's nanmedian takes a masked-array path for five values (~0.5 ms a call): in a live watch
        # whose GPU and log lines arrive in turn, most events move the median, and it was most of the
        # watch's CPU. The column median is the same number, bit for bit.
        typical = nanmedian_columns(self.gaps[index].T)
        self.typical_s[index] = typical
        self.stale_limit_s[index] = np.maximum(self.stale_after_s, STALE_CADENCE_FACTOR * typical)
