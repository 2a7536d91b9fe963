"""A fleet's racks projected together at a verdict tick make each rack's own forecast, bit for bit.

At every verdict tick of small fleets (Offline; Server with a slow node, a node down and one silent a while; a
time-bounded Server run; racks of different sizes), each rack's forecast with its projection made
together with the others' is held against the same rack's forecast made on its own (its view's forecast
with nothing handed over): the whole forecast (figure, band, end, every rule, the verdict), as text, so
NaN compares too. And the join itself, on random progress: each group's projection is what its own
progress projects, and progress that does not read alike is not joined.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokenwatch.base.events import Event, RunStarted
from tokenwatch.core import RackCore
from tokenwatch.core import _ticks as ticks
from tokenwatch.core._state import RackState
from tokenwatch.core.fleet._board import fleet_tick
from tokenwatch.core.fleet._rack_view import forecast_view
from tokenwatch.core.verdict import current_forecast
from tokenwatch.mlperf.pace import Assumptions, Pace
from tokenwatch.mlperf.projected_together import counts_together, project_together
from tokenwatch.mlperf.rules_forecast import OverLimit, count_projection
from tokenwatch.mlperf.throughput_forecast import NodeProgress, project_nodes

from .fleet_runs import fleet_events


@pytest.mark.parametrize(
    ("scenario", "faults", "per_rack", "nodes"),
    [
        ("Offline", "", 4, 0),
        ("Offline", "node03:stale@50s-70s,node06:down@40s", 3, 0),
        ("Server", "node05:slow@40s-120s,node02:down@60s", 4, 0),
        ("Offline", "node04:slow@30s-100s", 4, 10),  # racks of 4, 4 and 2 nodes
    ],
)
def test_each_racks_forecast_projected_together_is_its_own(
    scenario: str, faults: str, per_rack: int, nodes: int
) -> None:
    core = RackCore()
    compared = together = counted = 0

    def tick_and_compare(state: RackState, t: float) -> None:
        nonlocal compared, together
        memo = state.fleet
        if memo is None or not (state.tokens.any() or state.samples.any()):
            fleet_tick(state, t)
            return
        due = memo.next_due_s
        made: list[str] = []
        real = current_forecast

        def keep(view: RackState, now: float) -> object:
            nonlocal together, counted
            handed = view.verdict.progress_memo
            together += handed is not None and handed[1].projection is not None
            counted += handed is not None and any(o.projected is not None for o in handed[2])
            fc = real(view, now)
            made.append(repr(fc))
            return fc

        with pytest.MonkeyPatch.context() as patch:
            patch.setattr("tokenwatch.core.fleet._board.current_forecast", keep)
            fleet_tick(state, t)
        if t + 1e-9 < due or not made:
            return
        own = [repr(current_forecast(forecast_view(state, r), t)) for r in range(len(memo.groups))]
        assert made == own, t
        compared += 1

    events = fleet_events(3, per_rack, scenario=scenario, duration_s=150.0, faults=faults)
    if nodes:
        events = _fewer_nodes(events, nodes)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(ticks, "fleet_tick", tick_and_compare)
        for event in events:
            core.ingest(event)
    assert compared >= 10  # verdict ticks with forecasts to compare
    assert together >= 3 * (compared - 6)  # ...most of them projected together (past the pace's start)
    if scenario == "Server":
        assert counted >= 3 * (compared - 6)  # ...and their latency counts


def _fewer_nodes(events: list[Event], nodes: int) -> list[Event]:
    """The run with its last racks' nodes cut to ``nodes`` in all: a fleet whose last rack is smaller."""
    out = []
    for event in events:
        if isinstance(event, RunStarted):
            event = dataclasses.replace(event, nodes=event.nodes[:nodes])
        out.append(event)
    return out


def _progress(rng: np.random.Generator, n: int, *, samples: bool, window_s: float = 20.0) -> NodeProgress:
    now = 100.0
    start = rng.uniform(0.0, 5.0, n)
    finished = rng.random(n) < 0.2
    last = np.where(finished, rng.uniform(60.0, 100.0, n), now - rng.choice([0.0, 1.0, 8.0, 200.0], n))
    tokens = rng.uniform(0.0, 5e4, n) * (rng.random(n) > 0.1)
    done = np.floor(tokens / rng.uniform(50.0, 200.0, n))
    usual = rng.uniform(0.0, 800.0, n) * (rng.random(n) > 0.1)
    pace = Pace(
        np.where(rng.random(n) < 0.1, np.nan, usual * rng.uniform(0.3, 1.5, n)),
        usual,
        np.where(rng.random(n) < 0.2, np.nan, rng.uniform(0.0, 0.4, n)),
        window_s,
        window_s / 3.0,
    )
    return NodeProgress(
        "Offline",
        now,
        np.zeros(0),
        np.zeros(0),
        tokens,
        done,
        start,
        last,
        finished,
        total_samples=done + rng.uniform(0.0, 300.0, n) if samples else None,
        final_latency_s=rng.uniform(0.0, 3.0, n),
        timing_s=rng.uniform(0.5, 5.0, n),
        end_gap_s=np.where(rng.random(n) < 0.5, np.nan, rng.uniform(0.0, 10.0, n)),
        pace=pace,
    )


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), sizes=st.lists(st.integers(1, 12), min_size=2, max_size=6))
def test_each_groups_projection_is_its_own(seed: int, sizes: list[int]) -> None:
    rng = np.random.default_rng(seed)
    samples = bool(rng.random() < 0.7)
    progress = [_progress(rng, n, samples=samples) for n in sizes]
    a = Assumptions()
    together = project_together(progress, a)
    assert together is not None
    for own_progress, joined in zip(progress, together, strict=True):
        own = project_nodes(own_progress, a)
        for f in dataclasses.fields(own):
            assert repr(getattr(joined, f.name)) == repr(getattr(own, f.name)), f.name


def test_progress_that_does_not_read_alike_is_not_joined() -> None:
    rng = np.random.default_rng(1)
    a = Assumptions()
    assert project_together([_progress(rng, 4, samples=True), _progress(rng, 4, samples=False)], a) is None
    other_spans = [_progress(rng, 4, samples=True), _progress(rng, 4, samples=True, window_s=30.0)]
    assert project_together(other_spans, a) is None
    unmeasured = _progress(rng, 4, samples=True)
    assert project_together([dataclasses.replace(unmeasured, pace=None), unmeasured], a) is None
    assert project_together([unmeasured], a) is None  # one alone: nothing to join


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), sizes=st.lists(st.integers(1, 12), min_size=2, max_size=6))
def test_each_racks_latency_counts_projected_together_are_its_own(seed: int, sizes: list[int]) -> None:
    rng = np.random.default_rng(seed)
    latency, totals = [], []
    for n in sizes:
        completed = np.floor(rng.uniform(0.0, 3e4, n))
        low = np.floor(completed * rng.uniform(0.0, 0.03, n))
        high = low + np.floor(rng.uniform(0.0, 20.0, n))
        latency.append([OverLimit(m, 0.5, completed, low, high) for m in ("ttft", "tpot")])
        totals.append(completed + np.floor(rng.uniform(0.0, 5e4, n)))
    together = counts_together(latency, totals)
    assert together is not None
    for own, joined, total in zip(latency, together, totals, strict=True):
        for o, j in zip(own, joined, strict=True):
            expected, made = count_projection(o, total), j.projected
            assert made is not None
            for f in dataclasses.fields(expected):
                assert repr(getattr(made, f.name)) == repr(getattr(expected, f.name)), f.name
    other = [latency[0], latency[1][:1]]  # a rack without the TPOT counts: not joined
    assert counts_together(other, totals[:2]) is None
