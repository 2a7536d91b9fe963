"""A fleet's racks read their pace off the fleet's, measured once per verdict tick (and their joined token
series and starts, joined once: tests/core/fleet/test_rack_joined_shared.py).

The pace is measured node by node, so the pace of a rack's nodes is their rows of the pace of every node
wherever both are measured over the same spans (window and blocks). Held here bit for bit: the pace of
random columns against the rows of the whole's, and a fleet's rack forecasts at every verdict tick (made
from the fleet's pace where the spans agree) against the same rack's forecast measuring its own.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokenwatch.core import RackCore
from tokenwatch.core import _ticks as ticks
from tokenwatch.core._state import RackState
from tokenwatch.core.fleet._board import _history_row, fleet_tick
from tokenwatch.core.fleet._rack_view import forecast_view
from tokenwatch.core.verdict._inputs import joined_tokens, start_times
from tokenwatch.core.verdict._joined_memo import JoinedMemo
from tokenwatch.core.verdict._pace_memo import PaceMemo
from tokenwatch.core.verdict._tick import current_forecast
from tokenwatch.mlperf.pace import Assumptions, measure_pace, pace_spans

from .fleet_runs import fleet_events


@settings(max_examples=80, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    nodes=st.integers(2, 9),
    points=st.integers(4, 400),
    now_share=st.floats(0.3, 1.0),
    cadence=st.booleans(),
)
def test_the_pace_of_some_nodes_is_their_rows_of_the_pace_of_all(
    seed: int, nodes: int, points: int, now_share: float, cadence: bool
) -> None:
    rng = np.random.default_rng(seed)
    times = np.cumsum(rng.uniform(0.5, 3.0, points))
    # each node's cumulative tokens: bursts, pauses (no growth) and a node that never ran
    steps = rng.uniform(0.0, 1000.0, (points, nodes)) * (rng.random((points, nodes)) > 0.3)
    steps[:, 0] = 0.0
    tokens = np.cumsum(steps, axis=0)
    now = float(times[-1])
    start = float(times[0] + (1.0 - now_share) * (now - times[0]))
    typical = rng.uniform(0.0, 12.0, nodes) if cadence else None
    a = Assumptions()
    whole = measure_pace(times, tokens, tokens[-1], now, start, a, typical)
    rows = slice(1, nodes - 1) if nodes > 2 else slice(0, 1)
    part = measure_pace(
        times, tokens[:, rows], tokens[-1, rows], now, start, a, None if typical is None else typical[rows]
    )
    for name in ("now", "usual", "noise"):
        assert np.array_equal(getattr(part, name), getattr(whole, name)[rows], equal_nan=True), name
    assert (part.window_s, part.block_s) == (whole.window_s, whole.block_s)


def test_the_spans_are_all_the_pace_reads_of_the_start() -> None:
    """Two starts with the same spans measure the same pace; one block fewer is another pace."""
    rng = np.random.default_rng(5)
    times = np.arange(0.0, 3606.0)
    tokens = np.cumsum(rng.uniform(50.0, 150.0, (len(times), 3)), axis=0)
    a = Assumptions()
    now = 3605.0  # 288 blocks from 0 or 2 s (0.8 of the run), 286 from 20 s
    assert pace_spans(now, 0.0, a) == pace_spans(now, 2.0, a) != pace_spans(now, 20.0, a)
    early, late, later = (measure_pace(times, tokens, tokens[-1], now, s, a) for s in (0.0, 2.0, 20.0))
    assert np.array_equal(early.noise, late.noise)
    assert not np.array_equal(early.noise, later.noise)


def _own_forecast(state: RackState, r: int, t: float) -> list[float]:
    """Rack ``r``'s forecast at ``t`` with memos of its own: its pace measured and its series joined from
    its rows, nothing read off the fleet's."""
    view = forecast_view(state, r)
    view.verdict = dataclasses.replace(
        view.verdict, pace_memo=PaceMemo(), joined_memo=JoinedMemo(), forecast_memo=None
    )
    return _history_row(current_forecast(view, t))


@pytest.mark.parametrize(("scenario", "faults"), [("Offline", ""), ("Server", "node05:slow@40s-120s")])
def test_each_racks_forecast_from_the_fleets_pace_and_series_is_the_one_from_its_own(
    scenario: str, faults: str
) -> None:
    core = RackCore()
    interval = core.config.verdict_interval_s
    kept: dict[float, list[list[float]]] = {}
    own: dict[float, list[list[float]]] = {}
    shared_racks = joined_ticks = 0

    def tick_and_look(state: RackState, t: float) -> None:
        nonlocal shared_racks, joined_ticks
        memo = state.fleet
        due = math.isclose(t / interval, round(t / interval))
        if memo is None or not due or state.ended or not (state.tokens.any() or state.samples.any()):
            fleet_tick(state, t)
            return
        joined = state.verdict.joined_memo.found(state.version, t)
        if joined is not None:  # what the racks will slice is the fleet's own join at this tick
            times, tokens = joined_tokens(state, t)
            assert np.array_equal(joined[0], times)
            assert np.array_equal(joined[1], tokens)
            joined_ticks += 1
        fleet_tick(state, t)
        assert state.verdict.joined_memo.tokens is None  # gone once the racks are done
        kept[t] = [[memo.tokens_per_s[r], memo.valid[r]] for r in range(len(memo.groups))]
        own[t] = [_own_forecast(state, r, t) for r in range(len(memo.groups))]
        paces = state.verdict.pace_memo
        if paces.pace is not None and paces.version == state.version and paces.now_s == t:
            starts = start_times(state, t)
            for r in range(len(memo.groups)):
                rows = memo.groups.nodes(r)
                a = state.config.forecast
                shared_racks += pace_spans(t, float(starts[rows].min()), a) == paces.spans

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(ticks, "fleet_tick", tick_and_look)
        for event in fleet_events(3, 4, scenario=scenario, duration_s=150.0, faults=faults):
            core.ingest(event)
    assert len(kept) >= 10  # the run had verdict ticks to compare
    assert shared_racks >= len(kept)  # racks read the fleet's pace (the path under test was taken)
    assert joined_ticks >= len(kept) - 1  # ...and its joined series
    for t, rows in own.items():
        expected = [[row[0], row[4]] for row in rows]
        assert np.array_equal(np.asarray(kept[t]), np.asarray(expected), equal_nan=True), t
