"""A backlog's rate lines as the history they describe: the tokens a line states were made across the
interval it covers, not at the instant it was written.

Live, a rate line can only be credited when it arrives. Read from a backlog, the interval is known: the
node's cumulative counts are filled in a point a second, rising linearly from the previous record to this
one over the seconds the line covers (flat before, where idle intervals were skipped). So the history's
10-s rates are the rates the lines state, whatever the phase of a 10-s logging interval against the
window. Sample counts stay steps (they count whole samples).
"""

from __future__ import annotations

import math

from tokenwatch.base.events import Event, Progress
from tokenwatch.sources.filled_span import BacklogItem, FilledSpan

MAX_FILL_POINTS = 3600  # per record: a line covers seconds to minutes, never more than an hour


class ProgressSpreader:
    """Feed it each backlog record's events (at most one ``Progress``, the node's totals) in time order."""

    def __init__(self) -> None:
        self.last: Progress | None = None

    def spread(self, events: list[Event], covered_s: float) -> list[BacklogItem]:
        """``events`` after the node's counts filled in, a point a second, over the ``covered_s`` seconds
        before their ``Progress``: one :class:`FilledSpan` for them all (their values are made as arrays
        by the merge, :func:`~tokenwatch.sources.filled_span.span_columns`)."""
        progress = next((e for e in events if isinstance(e, Progress)), None)
        if progress is None:
            return list(events)
        before, self.last = self.last, progress
        if before is None or not covered_s > 1.0:
            return list(events)
        begin = max(before.t, progress.t - covered_s)
        span = FilledSpan(
            progress.node,
            begin,
            progress.t,
            begin > before.t,  # idle until the covered interval: the counts hold
            max(0, min(MAX_FILL_POINTS, math.ceil(progress.t - begin) - 1)),
            before.samples_done,
            before.tokens_done,
            progress.tokens_done,
            before.prompt_tokens_done,
            progress.prompt_tokens_done,
        )
        return [span, *events] if span.size else list(events)
