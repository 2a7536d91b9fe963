"""Every node's joined token series and LoadGen start, read once per verdict tick for a fleet and sliced by
its racks.

A rack's forecast reads its nodes' tokens over the run (the whole-run series, the recent ring, the
counters now: :func:`~tokenwatch.core.verdict._inputs.joined_tokens`) and their starts, each a pure
selection of the fleet's columns: a rack's are the fleet's columns at its rows, bit for bit. Joining them
afresh for each of 64 racks was a fifth of a fleet's verdict tick; the fleet's own forecast at the same
tick keeps them here and each rack's view of the state
(:mod:`tokenwatch.core.fleet._rack_view`) reads its columns. Kept only through the fleet's tick (a
1,152-node fleet's joined series are ~7 MB): :func:`forget` drops them when its racks are done.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from tokenwatch.base.events import FloatArray


@dataclass(slots=True, eq=False)
class JoinedMemo:
    """The joined series (``times`` (K,), ``tokens`` (K, nodes)) and ``starts`` (nodes,) at run time
    ``now_s`` and state ``version``; empty (``tokens`` None) where none is kept."""

    version: int = -1
    now_s: float = math.nan
    times: FloatArray | None = None
    tokens: FloatArray | None = None
    starts: FloatArray | None = None

    def found(self, version: int, now: float) -> tuple[FloatArray, FloatArray, FloatArray] | None:
        """(times, tokens (C-ordered), starts) where they were kept at ``version`` and ``now``."""
        if self.tokens is None or self.times is None or self.starts is None:
            return None
        if self.version != version or self.now_s != now:
            return None
        # C order as a rack's own join makes them: the forecast's sums over nodes then add in its order.
        return self.times, np.ascontiguousarray(self.tokens), self.starts

    def keep(
        self, version: int, now: float, times: FloatArray, tokens: FloatArray, starts: FloatArray
    ) -> None:
        self.version, self.now_s, self.times, self.tokens, self.starts = version, now, times, tokens, starts

    def columns(self, rows: slice) -> JoinedMemo:
        """The memo of the nodes at ``rows`` (a rack's view): views of the columns, nothing copied."""
        if self.tokens is None or self.starts is None:
            return JoinedMemo()
        return JoinedMemo(self.version, self.now_s, self.times, self.tokens[:, rows], self.starts[rows])

    def __reduce__(self) -> tuple[type[JoinedMemo], tuple[()]]:
        # A copy (a replay's keyframe, a clone) keeps none: they are a tick's, and made again where needed.
        return (JoinedMemo, ())

    def __deepcopy__(self, memo: dict[int, object]) -> JoinedMemo:
        return JoinedMemo()

    def forget(self) -> None:
        self.version, self.now_s, self.times, self.tokens, self.starts = -1, math.nan, None, None, None
