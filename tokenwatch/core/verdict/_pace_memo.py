"""Every node's pace for the forecast, measured once per verdict tick for a fleet and sliced by its racks.

At each verdict tick a fleet makes its own forecast and one per rack (:mod:`tokenwatch.core.fleet._board`),
and each measured the pace of its nodes (:func:`~tokenwatch.mlperf.pace.measure_pace`, the largest part of
a forecast): a 72-node rack's hour of history measured it five times a tick. The pace is measured column
by column (each node from its own series at the run's times), so a rack's pace is the rows of the
fleet's, bit for bit, wherever the two measure the same spans (:func:`~tokenwatch.mlperf.pace.pace_spans`:
the window and blocks, which is all the pace reads of the run's start). The fleet's forecast keeps its
pace here, indexed by node, and a rack's view of the state (:mod:`tokenwatch.core.fleet._rack_view`)
reads its rows. A rack whose earliest node started later than the fleet's by enough to change the
spans (one block fewer) measures its own.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from tokenwatch.mlperf.forecast import NodeProgress
from tokenwatch.mlperf.pace import Assumptions, Pace, measure_pace, pace_spans


@dataclass(slots=True, eq=False)
class PaceMemo:
    """Every node's pace at run time ``now_s`` and state ``version``, over the spans ``spans``
    (:func:`~tokenwatch.mlperf.pace.pace_spans`); None until a fleet's forecast keeps one. Indexed by
    node, so a rack's view gets its rows'."""

    version: int = -1
    now_s: float = math.nan
    spans: tuple[float, float, int] = (math.nan, math.nan, 0)
    pace: Pace | None = None


def node_pace(memo: PaceMemo, version: int, p: NodeProgress, a: Assumptions, *, keep: bool) -> Pace:
    """The pace of the nodes ``p`` holds at state ``version``: the memo's where it was measured at the
    same time and version over the same spans for as many nodes, else measured (and kept where
    ``keep``: the fleet's own forecast over every node)."""
    start = float(np.min(p.start_s))
    spans = pace_spans(p.now_s, start, a)
    found = memo.pace
    if (
        found is not None
        and memo.version == version
        and memo.now_s == p.now_s
        and memo.spans == spans
        and len(found.now) == p.tokens.shape[1]
    ):
        return found
    pace = measure_pace(p.times_s, p.tokens, p.tokens_done, p.now_s, start, a, p.timing_s)
    if keep:
        memo.version, memo.now_s, memo.spans, memo.pace = version, p.now_s, spans, pace
    return pace
