"""A rack's forecast view read through the state's plan (the walk of its structure done once a tick for
every rack) holds what the walk of each rack's own makes: every field, nested dataclass and dict, the
same arrays bit for bit, of the same types, sharing the fleet's storage where the walk shares it.

Held at every verdict tick of small fleets (Offline, and Server with a slow node and latency counts),
against :func:`rows_of` made field by field, and the plan made anew when the state has changed.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest

from tokenwatch.core import RackCore
from tokenwatch.core import _ticks as ticks
from tokenwatch.core._ring import DownsampledSeries, RecentRing
from tokenwatch.core._state import RackState
from tokenwatch.core.fleet._board import fleet_tick
from tokenwatch.core.fleet._rack_view import (
    _FORECAST_FIELDS,
    _VERDICT_MADE,
    _VERDICT_WHOLE_RUN,
    _VIEW_MADE,
    forecast_view,
    rows_of,
    view_plan,
)
from tokenwatch.core.verdict import VerdictState

from .fleet_runs import fleet_events


def _same(a: Any, b: Any, where: str) -> None:
    """``a`` and ``b`` hold the same values: arrays bit for bit (and the same storage), dataclasses and
    dicts field by field, anything else the same object."""
    assert type(a) is type(b), where
    if isinstance(a, np.ndarray):
        assert a.dtype == b.dtype, where
        assert a.shape == b.shape, where
        assert np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"), where
        assert np.shares_memory(a, b) or not a.size or a.base is None, where
        return
    if isinstance(a, RecentRing | DownsampledSeries):
        for name in type(a).__slots__:
            _same(getattr(a, name, None), getattr(b, name, None), f"{where}.{name}")
        return
    if isinstance(a, dict):
        assert list(a) == list(b), where
        for key in a:
            _same(a[key], b[key], f"{where}[{key!r}]")
        return
    if isinstance(a, list | tuple) and not dataclasses.is_dataclass(a):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _same(x, y, f"{where}[{i}]")
        return
    if dataclasses.is_dataclass(a):
        for f in dataclasses.fields(a):
            _same(getattr(a, f.name), getattr(b, f.name), f"{where}.{f.name}")
        return
    assert a is b or a == b, where


def _walked_fields(state: RackState, r: int) -> dict[str, Any]:
    """What the walk of the state makes for rack ``r``'s view, field by field (the fields not made for the
    rack itself)."""
    assert state.fleet is not None
    rows, n = state.fleet.groups.nodes(r), len(state.run.nodes)
    return {name: rows_of(getattr(state, name), rows, n) for name in _FORECAST_FIELDS}


@pytest.mark.parametrize(
    ("scenario", "faults"), [("Offline", ""), ("Server", "node05:slow@40s-120s,node02:down@60s")]
)
def test_a_view_through_the_plan_holds_what_the_walk_of_each_rack_makes(scenario: str, faults: str) -> None:
    core = RackCore()
    looked = 0

    def tick_and_look(state: RackState, t: float) -> None:
        nonlocal looked
        if state.fleet is not None and (state.tokens.any() or state.samples.any()):
            plan = view_plan(state)
            for r in range(len(state.fleet.groups)):
                view = forecast_view(state, r, plan)
                walked = _walked_fields(state, r)
                for name in _FORECAST_FIELDS - _VIEW_MADE:  # those not made for the rack itself
                    _same(getattr(view, name), walked[name], name)
                verdict: VerdictState = view.verdict
                for f in dataclasses.fields(VerdictState):
                    if f.name in _VERDICT_MADE:
                        continue
                    expected = getattr(state.verdict, f.name)
                    if f.name not in _VERDICT_WHOLE_RUN:
                        expected = rows_of(expected, state.fleet.groups.nodes(r), len(state.run.nodes))
                    _same(getattr(verdict, f.name), expected, f"verdict.{f.name}")
            looked += 1
        fleet_tick(state, t)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(ticks, "fleet_tick", tick_and_look)
        for event in fleet_events(3, 4, scenario=scenario, duration_s=90.0, faults=faults):
            core.ingest(event)
    assert looked >= 60  # every tick with progress was looked at


def test_a_plan_of_an_older_state_is_made_anew() -> None:
    """A view asked for with the plan of a state since changed reads the state as it is now."""
    core = RackCore()
    events = fleet_events(2, 3, duration_s=40.0)
    for event in events[: len(events) // 2]:
        core.ingest(event)
    state = core.state
    old = view_plan(state)
    for event in events[len(events) // 2 :]:
        core.ingest(event)
    assert old.version != state.version
    view = forecast_view(state, 1, old)
    _same(view.tokens, state.tokens[state.fleet.groups.nodes(1)] if state.fleet else None, "tokens")
