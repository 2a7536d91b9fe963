"""Where a node's windowed rate starts when the window's first tick holds no usable reading of it
(:meth:`tokenwatch.core._state.RackState.window_rates`): after a gap (or before a first reading), the
first reading after the gap; with no reading since the window began, the one before the newest, unless
a gap lies between them.

A fleet watched through its server reads every node at its alerting pass, every 30 s: at most rounds
each of its 18,000 nodes looks for the reading before its newest here. Searching every tick the recent
rings hold for every node (100-600 ticks x 18,000 nodes) was most of a snapshot after a round (~20-40 ms
of CPU); the reading is in the newest ~30 ticks, so those are searched first, and the whole span (only
as far back as a reading could still count) only for the nodes not found there and those after a gap.
The bases are the same as the whole search's (``tests/core/test_window_bases.py``).
"""

from __future__ import annotations

import math
from typing import Protocol

import numpy as np

from tokenwatch.base.events import FloatArray
from tokenwatch.core._ring import RecentRing
from tokenwatch.core.config import CoreConfig


class RackState(Protocol):
    """What the search reads of the core's state (``core._state.RackState``, which calls it: named by
    what it reads rather than imported, so the two modules do not import each other)."""

    @property
    def config(self) -> CoreConfig: ...
    @property
    def t_read(self) -> FloatArray: ...
    @property
    def stale_limit_s(self) -> FloatArray: ...
    @property
    def recent_tokens(self) -> RecentRing: ...
    @property
    def recent_samples(self) -> RecentRing: ...
    @property
    def recent_read_t(self) -> RecentRing: ...


# The newest ticks searched first: a node read every 30 s (a fleet's alerting pass) has the reading
# before its newest within its last 31.
NEWEST_TICKS = 32


def bases_elsewhere(
    state: RackState,
    nodes: np.ndarray,
    gap: np.ndarray,
    after: FloatArray,
    bases: tuple[FloatArray, FloatArray, FloatArray],
) -> None:
    """For ``nodes``: after a gap (``gap``), the first reading after ``after``; else the newest one older
    than the node's newest, unless more than its staleness limit older. NaN time where none is left (one
    reading bounds no span). ``bases``: (tokens, samples, reading time) per node, written in place."""
    base_tokens, base_samples, base_t = bases
    ring = state.recent_tokens
    order = ring.ordered_slots()
    newest, gaps, limit = state.t_read[nodes], gap[nodes], state.stale_limit_s[nodes]
    order = order[_first_tick_worth_reading(ring.times[order], newest, gaps, after[nodes], limit, state)]
    if not len(order):
        base_t[nodes] = math.nan
        return
    reads_of = state.recent_read_t.values
    at = np.full(len(nodes), -1, np.int64)  # each node's base: its position in order (-1: none)
    plain = np.flatnonzero(~gaps)
    if len(plain):  # the newest reading before the newest: in the newest ticks, for most nodes
        recent = order[-NEWEST_TICKS:]
        rows = reads_of[recent]  # whole rows: one gather of contiguous memory
        reads = rows if len(plain) == rows.shape[1] else rows[:, nodes[plain]]
        with np.errstate(invalid="ignore"):
            older = reads < newest[plain][None, :]
        hit = older.any(axis=0)
        at[plain[hit]] = len(order) - 1 - np.argmax(older[::-1, hit], axis=0)
    rest = np.flatnonzero(at < 0)
    if len(rest):  # after a gap, or further back: the whole span, for those nodes alone
        reads = reads_of[np.ix_(order, nodes[rest])]  # (ticks, nodes), oldest tick first
        with np.errstate(invalid="ignore"):
            older = reads < newest[rest][None, :]
            usable = np.where(gaps[rest][None, :], older & (reads > after[nodes[rest]][None, :]), older)
        found = usable.any(axis=0)
        first = np.argmax(usable, axis=0)
        last = len(order) - 1 - np.argmax(usable[::-1], axis=0)
        at[rest[found]] = np.where(gaps[rest], first, last)[found]
    found = at >= 0
    slots = order[np.where(found, at, 0)]
    read_at = reads_of[slots, nodes]
    with np.errstate(invalid="ignore"):
        too_old = ~gaps & (newest - read_at > limit)
    ok = found & ~too_old
    picked, kept = slots[ok], nodes[ok]
    base_tokens[kept] = ring.values[picked, kept]
    base_samples[kept] = state.recent_samples.values[picked, kept]
    base_t[kept] = read_at[ok]
    base_t[nodes[~ok]] = math.nan


def _first_tick_worth_reading(
    times: FloatArray,
    newest: FloatArray,
    gaps: np.ndarray,
    after: FloatArray,
    limit: FloatArray,
    state: RackState,
) -> slice:
    """The ticks (``times``, oldest first) that can hold a base: a tick holds no reading newer than
    itself, so one older than every node's bound holds none that counts (after a gap, none after
    ``after``; else none within the node's staleness limit of its newest reading: too old to be a base).
    A long run's rings hold up to 600 ticks; a fleet's limit is ~95 s."""
    with np.errstate(invalid="ignore"):
        bound = np.where(gaps, after, newest - limit)
    lowest = float(np.min(bound)) if len(bound) else math.nan
    if not lowest > -np.inf:  # NaN or -inf: every tick
        return slice(0, None)
    # One tick of margin: the bound's rounding never decides which ticks are searched.
    return slice(int(np.searchsorted(times, lowest - state.config.tick_s, side="left")), None)
