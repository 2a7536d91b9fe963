"""The run's history before the watch attached: where t = 0 is, and the backfill in time order.

Sources that know when things happened (a log's timestamps, the LoadGen trace's clock, a Prometheus
server's ``query_range``) give their history as events at Unix times (:class:`Backfill`). The run's
t = 0 is the earliest start any of them knows (the first line of a log, LoadGen's start in its trace),
else the moment the watch started; the watch then joins the run at ``attach_s``. Every source's history
is merged by time into one stream that ends at ``attach_s``, so the core, which expects non-decreasing
times, receives the whole run in order before the first live event.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from tokenwatch.base.events import Event
from tokenwatch.inputs.live.backlog import MAX_HISTORY_S, Backfill, retime
from tokenwatch.inputs.live.history_batches import batched, in_order
from tokenwatch.sources.filled_span import expanded


@runtime_checkable
class HistorySource(Protocol):
    """A rack-wide collector that can fill in the run's history (the Prometheus API's ``query_range``)."""

    async def run_start(self, watch_wall: float) -> float | None:
        """When this run started as the source can tell (Unix time), or None."""
        ...

    async def history(self, start_wall: float, end_wall: float) -> list[Event]:
        """The source's events between the two Unix times, at their own times (``t`` in Unix time)."""
        ...


@dataclass(frozen=True, slots=True)
class RunClock:
    """Where the run's t = 0 is (``start_wall``, Unix time), how far into it the watch attached, and
    which source said so ("" = nobody knew: the watch's start)."""

    start_wall: float
    attach_s: float
    started_by: str


def run_clock(watch_wall: float, starts: Iterable[tuple[str, float | None]]) -> RunClock:
    """t = 0 at the earliest known start, never later than the watch nor earlier than MAX_HISTORY_S
    before it."""
    known = [
        (wall, source)
        for source, wall in starts
        if wall is not None and math.isfinite(wall) and wall < watch_wall
    ]
    if not known:
        return RunClock(watch_wall, 0.0, "")
    wall, source = min(known)
    wall = max(wall, watch_wall - MAX_HISTORY_S)
    return RunClock(wall, watch_wall - wall, source)


def merged(
    backfills: Sequence[Backfill],
    clock: RunClock,
    nodes: Sequence[str] = (),
    records_before: float | None = None,
) -> list[Event]:
    """Every source's placed history by run time (a stable sort: one source's order is kept), within
    [0, attach_s], then what belongs to the moment the watch starts.

    Counts are placed on whole run seconds, the core's ticks: a count that moves a second at a time
    (:mod:`~tokenwatch.sources.progress_spread`) is then sampled where it was, not up to a second late,
    which read every 10-s rate up to 10 % high. Those filled-in points of the run's ``nodes`` go as one
    batch per second for the rack (an hour of 72 nodes is 259,200 of them: one event each kept the first
    frame tens of seconds away). With ``records_before`` (a run time), each instant's records of those
    nodes before it go as one batch too (a rack's logs, 72 nodes writing a rate line every 10 s, are
    26,000 records an hour); without it, the records stay events of their own."""
    start, attach = clock.start_wall, clock.attach_s
    items = [item for done in backfills for item in done.placed]
    out = (
        batched(items, start, attach, nodes, records_before)
        if nodes
        else in_order(expanded(items), start, attach)
    )
    out += [retime(event, clock.attach_s) for done in backfills for event in done.at_start]
    return out
