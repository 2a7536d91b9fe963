"""A fleet's backfill of rack figures, none of its nodes read: the ticks of its old history write nothing
per node (18,000 nodes at 1,000 racks), and the board, the timeline and the fleet's figures are those of a
core that ticked every node every second."""

from __future__ import annotations

import dataclasses

import numpy as np

from tests.core.fleet.test_fleet_state import RACKS, batch, figures, started
from tokenwatch.core import RackCore

ATTACHED_AT_S = 1200.0  # the watch joined 20 minutes in: 15 minutes of old history before the rules' lookback


def backfilled(attached_at_s: float) -> RackCore:
    start = started()
    meta = {**start.meta, "attached_at_s": attached_at_s}
    core = RackCore()
    core.ingest(dataclasses.replace(start, meta=meta))
    for k in range(1, 81):  # every 15 s to the attach; rack03 down for five minutes in the middle
        t = 15.0 * k
        down = ("rack03",) if 600 <= t < 900 else ()
        core.ingest(batch(t, {r: figures(1000.0 + 10 * k + i, 400.0 + i) for i, r in enumerate(RACKS)}, down))
    core.advance(ATTACHED_AT_S + 1)
    return core


def test_the_backfills_figures_are_those_of_every_tick() -> None:
    skipped, ticked = backfilled(ATTACHED_AT_S), backfilled(0.0)  # attached at 0: every tick is ticked
    a, b = skipped.snapshot(), ticked.snapshot()
    assert a.fleet is not None
    assert b.fleet is not None
    assert a.fleet.state == b.fleet.state
    np.testing.assert_array_equal(a.fleet.tokens_per_s, b.fleet.tokens_per_s)
    np.testing.assert_array_equal(a.fleet.power_w, b.fleet.power_w)
    np.testing.assert_array_equal(a.timeline.times, b.timeline.times)
    np.testing.assert_array_equal(a.timeline.tokens_per_s, b.timeline.tokens_per_s)
    np.testing.assert_array_equal(a.timeline.power_w, b.timeline.power_w)
    assert a.aggregate.tokens_per_s == b.aggregate.tokens_per_s
    # Independent of both: the last batch's sums.
    assert a.aggregate.tokens_per_s == sum(1000.0 + 10 * 80 + i for i in range(len(RACKS)))
    assert len(a.timeline.times) == 80
    # And the old history was skipped (else this compares a core with itself): one node point a minute.
    old = skipped.state.history_tokens.view()[0]
    assert len(old[old < ATTACHED_AT_S - 180]) < len(ticked.state.history_tokens.view()[0]) / 10
