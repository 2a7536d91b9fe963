"""A fleet's racks read their nodes' joined token series and starts off the fleet's, joined once per
verdict tick, and hold them only through that tick.

A rack's joined series are a pure selection of the fleet's columns, so its forecast from them is bit for
bit the forecast from a join of its own rows: held here at every verdict tick of a fleet run, with the
path under test shown taken. The fleet's series (~7 MB at 64 racks) are gone when its racks are done, and
a copy of the state (a replay's keyframe) never carries them.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import pickle

import numpy as np
import pytest

from tokenwatch.core import RackCore
from tokenwatch.core import _ticks as ticks
from tokenwatch.core._state import RackState
from tokenwatch.core.fleet._board import _history_row, fleet_tick
from tokenwatch.core.fleet._rack_view import forecast_view
from tokenwatch.core.verdict._inputs import joined_tokens
from tokenwatch.core.verdict._joined_memo import JoinedMemo
from tokenwatch.core.verdict._tick import current_forecast

from .fleet_runs import fleet_events


def _own_join_forecast(state: RackState, r: int, t: float) -> list[float]:
    """Rack ``r``'s forecast at ``t`` joining its own rows' series (no fleet memo to read)."""
    view = forecast_view(state, r)
    view.verdict = dataclasses.replace(view.verdict, joined_memo=JoinedMemo(), forecast_memo=None)
    return _history_row(current_forecast(view, t))


@pytest.mark.parametrize(("scenario", "faults"), [("Offline", ""), ("Server", "node05:slow@40s-120s")])
def test_each_racks_forecast_from_the_fleets_joined_series_is_the_one_from_its_own(
    scenario: str, faults: str
) -> None:
    core = RackCore()
    interval = core.config.verdict_interval_s
    kept: dict[float, list[list[float]]] = {}
    own: dict[float, list[list[float]]] = {}
    read_from_fleet = 0

    def tick_and_look(state: RackState, t: float) -> None:
        nonlocal read_from_fleet
        memo = state.fleet
        due = math.isclose(t / interval, round(t / interval))
        if memo is None or not due or state.ended or not (state.tokens.any() or state.samples.any()):
            fleet_tick(state, t)
            return
        joined = state.verdict.joined_memo.found(state.version, t)
        if joined is not None:
            # What the racks will slice is the fleet's own join at this tick.
            times, tokens = joined_tokens(state, t)
            assert np.array_equal(joined[0], times)
            assert np.array_equal(joined[1], tokens)
            read_from_fleet += 1
        fleet_tick(state, t)
        assert state.verdict.joined_memo.tokens is None  # gone once the racks are done
        kept[t] = [[memo.tokens_per_s[r], memo.valid[r]] for r in range(len(memo.groups))]
        own[t] = [_own_join_forecast(state, r, t) for r in range(len(memo.groups))]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(ticks, "fleet_tick", tick_and_look)
        for event in fleet_events(3, 4, scenario=scenario, duration_s=150.0, faults=faults):
            core.ingest(event)
    assert len(kept) >= 10  # the run had verdict ticks to compare
    assert read_from_fleet >= len(kept) - 1  # the racks read the fleet's series (the path under test)
    for t, rows in own.items():
        expected = [[row[0], row[4]] for row in rows]
        assert np.array_equal(np.asarray(kept[t]), np.asarray(expected), equal_nan=True), t


def test_a_copy_of_the_state_carries_no_joined_series() -> None:
    memo = JoinedMemo()
    memo.keep(3, 10.0, np.arange(4.0), np.ones((4, 6)), np.zeros(6))
    assert memo.found(3, 10.0) is not None
    assert memo.found(4, 10.0) is None  # another state...
    assert memo.found(3, 11.0) is None  # ...another time
    for twin in (copy.deepcopy(memo), pickle.loads(pickle.dumps(memo))):
        assert twin.tokens is None
        assert twin.found(3, 10.0) is None
    rack = memo.columns(slice(2, 4))
    assert rack.tokens is not None
    assert rack.tokens.shape == (4, 2)
    assert np.shares_memory(rack.tokens, memo.tokens)
