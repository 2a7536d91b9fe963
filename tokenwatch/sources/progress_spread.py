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

MAX_FILL_POINTS = 3600  # per record: a line covers seconds to minutes, never more than an hour


def _between(before: int | None, after: int | None, fraction: float) -> int | None:
    if after is None or before is None:
        return after if before is None else before
    return round(before + (after - before) * fraction)


class ProgressSpreader:
    """Feed it each backlog record's events (at most one ``Progress``, the node's totals) in time order."""

    def __init__(self) -> None:
        self.last: Progress | None = None

    def spread(self, events: list[Event], covered_s: float) -> list[Event]:
        """``events`` with the node's counts filled in, a point a second, over the ``covered_s`` seconds
        before their ``Progress``."""
        progress = next((e for e in events if isinstance(e, Progress)), None)
        if progress is None:
            return events
        before, self.last = self.last, progress
        if before is None or not covered_s > 1.0:
            return events
        begin = max(before.t, progress.t - covered_s)
        points = min(MAX_FILL_POINTS, math.ceil(progress.t - begin) - 1)
        fill: list[Event] = []
        if begin > before.t:  # idle until the covered interval: the counts hold
            fill.append(
                Progress(
                    begin,
                    progress.node,
                    before.samples_done,
                    before.tokens_done,
                    before.prompt_tokens_done,
                    filled=True,
                )
            )
        for k in range(1, points + 1):
            t = begin + k
            fraction = (t - begin) / (progress.t - begin)
            fill.append(
                Progress(
                    t,
                    progress.node,
                    before.samples_done,
                    _between(before.tokens_done, progress.tokens_done, fraction),
                    _between(before.prompt_tokens_done, progress.prompt_tokens_done, fraction),
                    filled=True,
                )
            )
        return fill + events
