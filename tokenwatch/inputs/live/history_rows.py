"""The placed history as columns, a row per event and per filled-in point, in the sources' order.

The merge (:mod:`~tokenwatch.inputs.live.history_batches`) orders, batches and counts in numpy; its rows
come from two kinds of item: events (one row each, their fields read once) and a log's spans of
filled-in points (:class:`~tokenwatch.sources.filled_span.FilledSpan`, a row per point, made as arrays:
an hour of a 72-node rack is 259,200 of them, which no longer exist as objects). A row that does not
go into a batch becomes an event again (:meth:`HistoryRows.event`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import repeat
from operator import attrgetter

import numpy as np

from tokenwatch.base.events import (
    Event,
    LatencyBatch,
    LatencyLimitCounts,
    LoadGenDetail,
    LogLine,
    NodeStatus,
    Notice,
    Progress,
    ProgressBatch,
)
from tokenwatch.inputs.live.backlog import retime
from tokenwatch.sources.filled_span import BacklogItem, FilledSpan, SpanColumns, span_columns

_T, _NODE, _FILLED = attrgetter("t"), attrgetter("node"), attrgetter("filled")
_COUNTS = frozenset({Progress, ProgressBatch})
_SPAN = frozenset({FilledSpan})
# Each event's kind, as far as the batches care: a count, a source's own batch of counts, an event the
# core applies without reading or writing any node's counters (an instant's records may go ahead of it
# in one batch: a node state or latency marks its node heard from at the same instant, a gap of zero,
# which teaches the cadence nothing whichever comes first), or one that reads them (a GPU reading notes
# the tokens beside its energy counter).
OTHER, PROGRESS, SOURCE_BATCH, BESIDE = 0, 1, 2, 3
_KIND = {
    Progress: PROGRESS,
    ProgressBatch: SOURCE_BATCH,
    **dict.fromkeys((LogLine, Notice, NodeStatus, LatencyBatch, LoadGenDetail, LatencyLimitCounts), BESIDE),
}
COUNTERS = ("samples_done", "tokens_done", "prompt_tokens_done")


@dataclass(frozen=True, slots=True)
class HistoryRows:
    """Per row: Unix time ``unix``, whether it is a count (placed on whole seconds), its ``kind``, its
    node's index among the run's nodes (-1: not a count of one of them), ``filled``, and each counter's
    value with whether the row reports it (``values[c]``, ``has[c]``, c in :data:`COUNTERS` order).
    ``event_of`` is the row's event (-1: a filled-in point, ``point_of`` into ``points``)."""

    unix: np.ndarray
    is_count: np.ndarray
    kind: np.ndarray
    node: np.ndarray
    filled: np.ndarray
    values: tuple[np.ndarray, ...]
    has: tuple[np.ndarray, ...]
    event_of: np.ndarray
    point_of: np.ndarray
    events: list[Event]
    spans: list[FilledSpan]
    points: SpanColumns

    def event(self, row: int, t: float) -> Event:
        """The row as an event at run time ``t``."""
        k = int(self.event_of[row])
        if k >= 0:
            return retime(self.events[k], t)
        p = int(self.point_of[row])
        cols = self.points
        samples, tokens, prompt = (
            int(v[p]) if h[p] else None
            for v, h in (
                (cols.samples, cols.has_samples),
                (cols.tokens, cols.has_tokens),
                (cols.prompt, cols.has_prompt),
            )
        )
        return Progress(t, self.spans[int(cols.span[p])].node, samples, tokens, prompt, filled=True)


def history_rows(items: Sequence[BacklogItem], index: Mapping[str, int]) -> HistoryRows:
    """The rows of ``items`` in their order, a span's points where the span is; ``index``: the run's
    nodes' positions."""
    is_span = np.fromiter(map(_SPAN.__contains__, map(type, items)), bool, len(items))
    span_at, event_at = np.flatnonzero(is_span), np.flatnonzero(~is_span)
    spans: list[FilledSpan] = [items[i] for i in span_at.tolist()]  # type: ignore[misc]
    events: list[Event] = [items[i] for i in event_at.tolist()]  # type: ignore[misc]
    points = span_columns(spans)
    span_sizes = np.bincount(points.span, minlength=len(spans)).astype(np.int64)
    sizes = np.ones(len(items), np.int64)
    sizes[span_at] = span_sizes
    first_row = np.cumsum(sizes) - sizes
    n = int(sizes.sum())
    event_row = first_row[event_at]
    within = np.arange(len(points.span)) - (np.cumsum(span_sizes) - span_sizes)[points.span]
    point_row = first_row[span_at][points.span] + within

    unix = np.empty(n)
    unix[event_row] = np.fromiter(map(_T, events), float, len(events))
    unix[point_row] = points.t
    is_count = np.ones(n, bool)
    is_count[event_row] = np.fromiter(map(_COUNTS.__contains__, map(type, events)), bool, len(events))
    kind = np.full(n, PROGRESS, np.int8)
    event_kind = np.fromiter(map(_KIND.get, map(type, events), repeat(OTHER)), np.int8, len(events))
    kind[event_row] = event_kind
    node = np.full(n, -1, np.int64)
    filled = np.zeros(n, bool)
    values = tuple(np.zeros(n, np.int64) for _ in COUNTERS)
    has = tuple(np.zeros(n, bool) for _ in COUNTERS)

    progress_at = np.flatnonzero(event_kind == PROGRESS)
    counts = [events[i] for i in progress_at.tolist()]
    progress_row = event_row[progress_at]
    node[progress_row] = np.fromiter(map(index.get, map(_NODE, counts), repeat(-1)), np.int64, len(counts))
    filled[progress_row] = np.fromiter(map(_FILLED, counts), bool, len(counts))
    for c, name in enumerate(COUNTERS):
        raw = np.fromiter(map(attrgetter(name), counts), object, len(counts))
        known = np.not_equal(raw, np.array(None, object))
        has[c][progress_row[known]] = True
        values[c][progress_row[known]] = raw[known].astype(np.int64)

    span_node = np.fromiter(map(index.get, map(_NODE, spans), repeat(-1)), np.int64, len(spans))
    node[point_row] = span_node[points.span]
    filled[point_row] = True
    for c, (value, known) in enumerate(
        (
            (points.samples, points.has_samples),
            (points.tokens, points.has_tokens),
            (points.prompt, points.has_prompt),
        )
    ):
        values[c][point_row], has[c][point_row] = value, known

    event_of = np.full(n, -1, np.int64)
    event_of[event_row] = np.arange(len(events))
    point_of = np.full(n, -1, np.int64)
    point_of[point_row] = np.arange(len(point_row))
    return HistoryRows(
        unix, is_count, kind, node, filled, values, has, event_of, point_of, events, spans, points
    )
