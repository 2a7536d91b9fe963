"""The points a backlog's rate line fills in, as one record: the line's interval and the counts at its ends.

A backlog's history fills in a node's counts a point a second between two records
(:mod:`~tokenwatch.sources.progress_spread`): an hour of a 72-node rack is 259,200 points. Made as one
``Progress`` each, they were most of the backlog read's time and most of the merge's (each point an
object, read field by field). A :class:`FilledSpan` holds what determines them all (where the interval
begins and ends, the counts before and after, where the span was placed in Unix time), and
:func:`span_columns` makes the points of many spans at once as arrays, each value computed by the same
float operations as the one-by-one points (:func:`expanded` makes those, for whoever wants events).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from operator import attrgetter

import numpy as np

from tokenwatch.base.events import Event, Progress


@dataclass(frozen=True, slots=True)
class FilledSpan:
    """A node's filled-in points between two of its records, a point a second (``filled`` Progress).

    On the source's clock: the interval the later record covers begins at ``begin`` and that record is at
    ``end``; ``idle`` adds a first point at ``begin`` holding the earlier counts (the node was idle from
    the earlier record until then); then ``points`` points at ``begin + k`` (k = 1..points), the token
    counts rising linearly from ``*_before`` to ``*_after``, samples held at ``samples`` (whole samples).
    Placed in Unix time by :func:`~tokenwatch.inputs.live.backlog.place`: a point at ``t`` on the
    source's clock is at ``max(floor, max(t, first) + anchor)`` (``floor``: the latest time placed before
    it, so times never go back within a source)."""

    node: str
    begin: float
    end: float
    idle: bool
    points: int
    samples: int | None
    tokens_before: int | None
    tokens_after: int | None
    prompt_before: int | None
    prompt_after: int | None
    first: float = -math.inf
    anchor: float = 0.0
    floor: float = -math.inf

    @property
    def size(self) -> int:
        return self.points + self.idle

    @property
    def last_t(self) -> float:
        """The last point's time on the source's clock."""
        return self.begin + self.points if self.points else self.begin

    def placed(self, first: float, anchor: float, floor: float) -> FilledSpan:
        return dataclasses.replace(self, first=first, anchor=anchor, floor=floor)

    def placed_t(self, t: float) -> float:
        return max(self.floor, max(t, self.first) + self.anchor)


BacklogItem = Event | FilledSpan


def _between(before: int | None, after: int | None, fraction: float) -> int | None:
    if after is None or before is None:
        return after if before is None else before
    return round(before + (after - before) * fraction)


def expanded(items: Iterable[BacklogItem]) -> list[Event]:
    """``items`` with each span as its points, one ``Progress`` each (what the merge's arrays stand for)."""
    out: list[Event] = []
    for item in items:
        if not isinstance(item, FilledSpan):
            out.append(item)
            continue
        s = item
        if s.idle:
            out.append(
                Progress(s.placed_t(s.begin), s.node, s.samples, s.tokens_before, s.prompt_before, True)
            )
        for k in range(1, s.points + 1):
            t = s.begin + k
            fraction = (t - s.begin) / (s.end - s.begin)
            tokens = _between(s.tokens_before, s.tokens_after, fraction)
            prompt = _between(s.prompt_before, s.prompt_after, fraction)
            out.append(Progress(s.placed_t(t), s.node, s.samples, tokens, prompt, True))
    return out


@dataclass(frozen=True, slots=True)
class SpanColumns:
    """The points of several spans, span after span (a span's points in time order): Unix ``t``, the
    span each came from (``span``), and each counter's values with where they are known (``has_*``)."""

    t: np.ndarray
    span: np.ndarray
    samples: np.ndarray
    has_samples: np.ndarray
    tokens: np.ndarray
    has_tokens: np.ndarray
    prompt: np.ndarray
    has_prompt: np.ndarray


def _known(values: Iterable[int | None], n: int) -> tuple[np.ndarray, np.ndarray]:
    """(the values, 0 where unknown; where they are known)."""
    raw = list(values)
    if None not in raw:  # a log's counters: every one known, read in one pass
        return np.fromiter(raw, np.int64, n), np.ones(n, bool)
    has = np.fromiter((v is not None for v in raw), bool, n)
    return np.fromiter((0 if v is None else v for v in raw), np.int64, n), has


def span_columns(spans: Sequence[FilledSpan]) -> SpanColumns:
    """Every span's points as arrays, bit for bit the values :func:`expanded` gives."""
    n = len(spans)
    field = np.fromiter
    begin = field(map(attrgetter("begin"), spans), float, n)
    end = field(map(attrgetter("end"), spans), float, n)
    idle = field(map(attrgetter("idle"), spans), bool, n)
    points = field(map(attrgetter("points"), spans), np.int64, n)
    first = field(map(attrgetter("first"), spans), float, n)
    anchor = field(map(attrgetter("anchor"), spans), float, n)
    floor = field(map(attrgetter("floor"), spans), float, n)
    samples, has_samples = _known(map(attrgetter("samples"), spans), n)
    tok0, has_tok0 = _known(map(attrgetter("tokens_before"), spans), n)
    tok1, has_tok1 = _known(map(attrgetter("tokens_after"), spans), n)
    pr0, has_pr0 = _known(map(attrgetter("prompt_before"), spans), n)
    pr1, has_pr1 = _known(map(attrgetter("prompt_after"), spans), n)
    sizes = points + idle
    span = np.repeat(np.arange(n), sizes)
    # each point's k: 0 the idle point (at begin), then 1..points
    offsets = np.cumsum(sizes) - sizes
    k = np.arange(len(span)) - offsets[span] + 1 - idle[span]
    b, e = begin[span], end[span]
    raw_t = b + k  # as begin + k, a float and an int
    fraction = (raw_t - b) / np.where(k > 0, e - b, 1.0)
    t = np.maximum(floor[span], np.maximum(raw_t, first[span]) + anchor[span])

    def between(
        before: np.ndarray, has_before: np.ndarray, after: np.ndarray, has_after: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        hb, ha = has_before[span], has_after[span]
        bv, av = before[span], after[span]
        both = hb & ha & (k > 0)
        rising = np.rint(bv + (av - bv) * fraction).astype(np.int64)
        # the idle point holds the earlier count; otherwise one unknown end: the other one
        value = np.where(both, rising, np.where(hb, bv, av))
        value = np.where(k == 0, bv, value)
        known = np.where(k == 0, hb, hb | ha)
        return value, known

    tokens, has_tokens = between(tok0, has_tok0, tok1, has_tok1)
    prompt, has_prompt = between(pr0, has_pr0, pr1, has_pr1)
    return SpanColumns(t, span, samples[span], has_samples[span], tokens, has_tokens, prompt, has_prompt)
