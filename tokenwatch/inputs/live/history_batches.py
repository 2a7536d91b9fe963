"""The run's history in time order, its filled-in points one batch per second, in one numpy pass.

An hour of a 72-node rack's logs is about 285,000 events, 259,200 of them filled-in points (a point a
second between a log's 10-s lines, :mod:`~tokenwatch.sources.progress_spread`). Sorting them as Python
tuples and walking them event by event kept the first frame a second away; here each event is read once
into columns, the filled-in points are made as columns from their spans (never objects), and the
order, the batches and the counts they carry are array operations.
"""

from __future__ import annotations

from collections.abc import Sequence
from operator import attrgetter

import numpy as np

from tokenwatch.base.events import Event, IntArray, Progress, ProgressBatch
from tokenwatch.inputs.live.backlog import retime
from tokenwatch.inputs.live.history_rows import (
    COUNTERS,
    OTHER,
    PROGRESS,
    SOURCE_BATCH,
    history_rows,
)
from tokenwatch.sources.filled_span import BacklogItem

_T = attrgetter("t")
_COUNTS = frozenset({Progress, ProgressBatch})


def placed_times(events: Sequence[Event], start: float, attach: float) -> tuple[np.ndarray, np.ndarray]:
    """(the events kept: those not before ``start``; their run times), counts on whole seconds (the
    core's ticks) and nothing later than ``attach``."""
    unix = np.fromiter(map(_T, events), float, len(events))
    counts = np.fromiter(map(_COUNTS.__contains__, map(type, events)), bool, len(events))
    keep = np.flatnonzero(~(unix < start))  # NaN is kept, as an event at the attach
    t = unix[keep] - start
    t = np.where(counts[keep], np.round(t), t)  # half to even, as round() does
    return keep, np.where(t < attach, t, attach)


def in_order(events: Sequence[Event], start: float, attach: float) -> list[Event]:
    """The events from ``start`` on at their run times, in time order (stable: a source's order is kept)."""
    keep, t = placed_times(events, start, attach)
    order = np.argsort(t, kind="stable")
    return [retime(events[i], s) for i, s in zip(keep[order].tolist(), t[order].tolist(), strict=True)]


def batched(
    items: Sequence[BacklogItem],
    start: float,
    attach: float,
    nodes: Sequence[str],
    records_before: float | None = None,
) -> list[Event]:
    """:func:`in_order`, with each second's filled-in points of the run's ``nodes`` as one
    ``ProgressBatch`` ahead of that second's other events (one row per node: its first point in the
    second; a further point of the node in that second goes on as an event of its own). A batch row
    holds the node's counts as they stand at the end of that second, every ``Progress`` of the node so
    far counted; a counter none of them reported reads 0. A log's spans of filled-in points
    (:class:`~tokenwatch.sources.filled_span.FilledSpan`) are read as their points, made as arrays.

    With ``records_before`` (a run time), each instant's records before it (the nodes' own counts, not
    filled in: a log's rate lines) go as one more batch after those points, not ``filled`` (each record
    is an arrival, which the node's cadence is learnt from): see :func:`_lone_records`."""
    placed = history_rows(items, {name: i for i, name in enumerate(nodes)})
    keep = np.flatnonzero(~(placed.unix < start))  # NaN is kept, as an event at the attach
    t = placed.unix[keep] - start
    t = np.where(placed.is_count[keep], np.round(t), t)  # half to even, as round() does
    t = np.where(t < attach, t, attach)
    order = np.argsort(t, kind="stable")
    pos = keep[order]  # into the rows, in time order
    t = t[order]
    n = len(pos)
    if not n:
        return []
    kind, node = placed.kind[pos], placed.node[pos]
    counted = np.flatnonzero((kind == PROGRESS) & (node >= 0))
    filled = placed.filled[pos] & (node >= 0)
    # each second: its run time's group; a row is a node's first filled point in it
    group = np.zeros(n, np.int64)
    group[1:] = np.cumsum(t[1:] != t[:-1])
    candidates = np.flatnonzero(filled)
    _, first = np.unique(group[candidates] * (len(nodes) + 1) + node[candidates], return_index=True)
    rows = np.sort(candidates[first])
    # a row's counts: the node's last reported ones up to the end of its second
    ends = np.searchsorted(group, group[rows], side="right") - 1
    records = (
        _lone_records(kind, node, filled, group, t < records_before, len(nodes))
        if records_before is not None
        else np.zeros(0, np.int64)
    )
    is_row = np.zeros(n, bool)
    is_row[rows] = is_row[records] = True
    # a record's row: the node's counts as that record leaves them
    samples, tokens, prompt = _last_reported(
        node,
        counted,
        [placed.values[c][pos[counted]] for c in range(len(COUNTERS))],
        [placed.has[c][pos[counted]] for c in range(len(COUNTERS))],
        np.concatenate([rows, records]),
        np.concatenate([ends, records]),
    )
    # each second: its batches, then its other events (retimed: a count's time is its whole second)
    others = np.flatnonzero(~is_row)
    moved = [placed.event(r, s) for r, s in zip(pos[others].tolist(), t[others].tolist(), strict=True)]
    bounds = np.flatnonzero(np.diff(group)) + 1
    starts = np.concatenate([[0], bounds, [n]])
    row_at = np.searchsorted(rows, starts).tolist()
    record_at = (np.searchsorted(records, starts) + len(rows)).tolist()
    other_at = np.searchsorted(others, starts).tolist()
    times = t[starts[:-1]].tolist()
    out: list[Event] = []
    for g, at in enumerate(times):
        for r0, r1, was_filled in ((row_at[g], row_at[g + 1], True), (record_at[g], record_at[g + 1], False)):
            if r1 > r0:
                k = node[rows[r0:r1]] if was_filled else node[records[r0 - len(rows) : r1 - len(rows)]]
                out.append(
                    ProgressBatch(at, k, samples[r0:r1], tokens[r0:r1], prompt[r0:r1], filled=was_filled)
                )
        out += moved[other_at[g] : other_at[g + 1]]
    return out


def _lone_records(
    kind: np.ndarray, node: IntArray, filled: np.ndarray, group: IntArray, early: np.ndarray, nodes: int
) -> IntArray:
    """Positions of the records that go as their instant's batch: each the one count of a run's node at
    its instant (a filled-in point of the node there keeps its record apart), at least two of them
    there, in an instant that holds only counts and events beside them; none at all where a source sent
    batches of its own (they set counters that the rows, read from the ``Progress`` alone, would not
    carry), nor from ``early``'s end on (the attach: a node's first record after it is its catch-up)."""
    if (kind == SOURCE_BATCH).any():
        return np.zeros(0, np.int64)
    counted = np.flatnonzero(node >= 0)
    _, where, count = np.unique(
        group[counted] * (nodes + 1) + node[counted], return_inverse=True, return_counts=True
    )
    lone = np.zeros(len(node), bool)
    lone[counted] = count[where] == 1
    blocked = np.zeros(int(group[-1]) + 1, bool)
    blocked[group[kind == OTHER]] = True
    records = np.flatnonzero(lone & ~filled & early & ~blocked[group])
    per_instant = np.bincount(group[records], minlength=len(blocked))
    return records[per_instant[group[records]] >= 2]


def _last_reported(
    node: IntArray,
    counted: IntArray,
    values: list[IntArray],
    has: list[np.ndarray],
    rows: IntArray,
    ends: IntArray,
) -> list[IntArray]:
    """Per counter, per row: its node's value of the counter (``values[c]`` at each point ``counted``,
    reported where ``has[c]``) at the last point (at or before ``ends``) that reported it; 0 where none
    did. The points are sorted by (node, position) once for every counter: a row's last point is found
    by one binary search, and each counter's last reported one at or before it by a running maximum."""
    if not len(counted):
        return [np.zeros(len(rows), np.int64) for _ in values]
    span = len(node) + 1
    keys = node[counted] * span + counted
    sort = np.argsort(keys, kind="stable")
    keys, who = keys[sort], node[counted][sort]
    found = np.searchsorted(keys, node[rows] * span + ends, side="right") - 1
    order = np.arange(len(sort))
    out = []
    for value, known in zip(values, has, strict=True):
        # the last point reporting the counter at or before each point (-1: none yet)
        last = np.maximum.accumulate(np.where(known[sort], order, -1))
        at = np.where(found >= 0, last[np.maximum(found, 0)], -1)
        at_or_0 = np.maximum(at, 0)
        mine = (at >= 0) & (who[at_or_0] == node[rows])  # a point before the node's own is another's
        out.append(np.where(mine, value[sort][at_or_0], 0).astype(np.int64))
    return out
