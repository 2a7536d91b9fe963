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

import numpy as np

from tokenwatch.base.events import Event, Progress, ProgressBatch
from tokenwatch.inputs.live.backlog import MAX_HISTORY_S, Backfill, retime


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


def merged(backfills: Sequence[Backfill], clock: RunClock, nodes: Sequence[str] = ()) -> list[Event]:
    """Every source's placed history by run time (a stable sort: one source's order is kept), within
    [0, attach_s], then what belongs to the moment the watch starts.

    Counts are placed on whole run seconds, the core's ticks: a count that moves a second at a time
    (:mod:`~tokenwatch.sources.progress_spread`) is then sampled where it was, not up to a second late,
    which read every 10-s rate up to 10 % high. Those filled-in points of the run's ``nodes`` go as one
    batch per second for the rack (an hour of 72 nodes is 259,200 of them: one event each kept the first
    frame tens of seconds away); the records themselves stay events of their own."""
    start, attach = clock.start_wall, clock.attach_s
    placed: list[tuple[float, Event]] = []
    for done in backfills:  # one pass, no call per event: an hour of 72 nodes is 285,000 of them
        for event in done.placed:
            if event.t < start:
                continue
            t = event.t - start
            if type(event) is Progress or type(event) is ProgressBatch:
                t = float(round(t))
            placed.append((t if t < attach else attach, event))
    placed.sort(key=lambda pair: pair[0])
    out = _batched(placed, nodes) if nodes else [retime(event, t) for t, event in placed]
    out += [retime(event, clock.attach_s) for done in backfills for event in done.at_start]
    return out


def _batched(placed: list[tuple[float, Event]], nodes: Sequence[str]) -> list[Event]:
    """``placed`` (sorted by run time) with each second's filled-in points as one ``ProgressBatch``
    ahead of that second's other events (a node's points precede its record). A counter a point does not
    report holds the node's last reported value, as the core holds it."""
    index = {name: i for i, name in enumerate(nodes)}
    last = np.zeros((3, len(nodes)), np.int64)  # samples, tokens, prompt tokens: the last reported
    batched = np.zeros(len(nodes), bool)  # nodes with a point in this second's batch
    out: list[Event] = []
    rows: list[int] = []
    others: list[Event] = []
    at = math.nan
    for t, event in placed:
        if t != at:
            if rows:
                k = np.array(rows, np.int64)
                out.append(ProgressBatch(at, k, last[0, k], last[1, k], last[2, k], filled=True))
                batched[k] = False
                rows.clear()
            out += others
            others.clear()
            at = t
        if type(event) is Progress and (i := index.get(event.node)) is not None:
            if event.samples_done is not None:
                last[0, i] = event.samples_done
            if event.tokens_done is not None:
                last[1, i] = event.tokens_done
            if event.prompt_tokens_done is not None:
                last[2, i] = event.prompt_tokens_done
            if event.filled and not batched[i]:
                batched[i] = True
                rows.append(i)
                continue
        others.append(retime(event, t))
    if rows:
        k = np.array(rows, np.int64)
        out.append(ProgressBatch(at, k, last[0, k], last[1, k], last[2, k], filled=True))
    return out + others
