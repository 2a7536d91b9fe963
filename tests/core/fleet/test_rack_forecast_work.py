"""The fleet's verdict tick does less work for the same figures.

Each rack's forecast is made from a view holding only what a forecast reads, with the nodes' latency
quantiles read once for the fleet, and not at all where nothing reads it (``rack_forecasts`` off: a
headless run without /metrics). Held here against what it replaced, tick by tick over seeded fleets with
faults: the rack's forecast from the full view of its rows (``rack_state``, every field sliced, every
quantile read from its own histogram) is the eager figure; the lazy core's forecast made on demand at the
same tick is the same number.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tokenwatch.core import CoreConfig, RackCore
from tokenwatch.core import _ticks as ticks
from tokenwatch.core._state import RackState
from tokenwatch.core.fleet._board import _history_row, fleet_tick, rack_forecast
from tokenwatch.core.fleet._rack_view import rack_state, rows_of
from tokenwatch.core.histogram import LogHistogram
from tokenwatch.core.node_spread import below_median_pct, median_of
from tokenwatch.core.verdict._node_quantiles import NodeQuantileMemo, quantile_per_node
from tokenwatch.core.verdict._pace_memo import PaceMemo
from tokenwatch.core.verdict._tick import current_forecast
from tokenwatch.inputs.sim.faults import parse_faults
from tokenwatch.inputs.sim.profile import load_profile
from tokenwatch.inputs.sim.rack_sim import RackSimulation, SimSettings

_FAULTS = ("", "node01:down@60s", "node04:slow@40s-120s", "node02:stale@50s-70s", "node05:throttle@30s")


def _fleet(
    racks: int, per_rack: int, scenario: str, seed: int, faults: str, duration_s: float
) -> RackSimulation:
    profile = load_profile("gb300-nvl72")
    profile = dataclasses.replace(
        profile,
        name=f"{profile.name} x{racks}",
        nodes=per_rack * racks,
        total_samples=profile.total_samples * per_rack * racks // profile.nodes,
    )
    return RackSimulation(
        SimSettings(
            profile,
            scenario=scenario,  # type: ignore[arg-type]
            seed=seed,
            duration_s=duration_s,
            faults=parse_faults(faults, profile.node_names()),
            extra_meta={"nodes_per_rack": per_rack},
        )
    )


def _old_rack_forecast(state: RackState, r: int, t: float) -> list[float]:
    """The forecast as the tick made it before: the full view of the rack's rows (every field of the
    verdict state walked for rows), each node's quantile read from its own histogram."""
    assert state.fleet is not None
    rows, n = state.fleet.groups.nodes(r), len(state.run.nodes)
    view = rack_state(state, r, for_forecast=True)
    view.verdict = dataclasses.replace(
        rows_of(state.verdict, rows, n),
        history=state.fleet.history.columns(r),
        margin_alerted=set(),
        settings_alerted=set(),
        forecast_memo=None,
        loadgen_memo=None,
        node_quantiles=NodeQuantileMemo(),
        pace_memo=PaceMemo(),  # its own pace, not the rows of the fleet's
    )
    return _history_row(current_forecast(view, t))


def _same(a: Any, b: Any) -> bool:
    return bool(np.array_equal(np.asarray(a, float), np.asarray(b, float), equal_nan=True))


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    racks=st.integers(2, 3),
    scenario=st.sampled_from(["Offline", "Server"]),
    seed=st.integers(0, 10_000),
    faults=st.sampled_from(_FAULTS),
)
def test_each_racks_forecast_at_every_tick_equals_the_full_views_and_the_lazy_cores(
    racks: int, scenario: str, seed: int, faults: str
) -> None:
    eager, lazy = RackCore(), RackCore(CoreConfig(rack_forecasts=False))
    interval = eager.config.verdict_interval_s
    seen: dict[str, dict[float, list[list[float]]]] = {"kept": {}, "old": {}, "on_demand": {}}

    def tick_and_look(state: RackState, t: float) -> None:
        """The tick, then at once (the state as the tick saw it): what it kept, the full view's forecast
        (eager core) or the forecast made on demand (lazy core)."""
        memo = state.fleet
        due = math.isclose(t / interval, round(t / interval))  # a verdict tick (every 10 s of run time)
        fleet_tick(state, t)
        if memo is None or not due or state.ended or not (state.tokens.any() or state.samples.any()):
            return
        if state.config.rack_forecasts:
            seen["kept"][t] = [[memo.tokens_per_s[r], memo.valid[r]] for r in range(racks)]
            seen["old"][t] = [_old_rack_forecast(state, r, t) for r in range(racks)]
        else:
            seen["on_demand"][t] = [_history_row(rack_forecast(state, r, t)) for r in range(racks)]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(ticks, "fleet_tick", tick_and_look)
        for event in _fleet(racks, 4, scenario, seed, faults, 180.0).events():
            eager.ingest(event)
            lazy.ingest(event)
    assert len(seen["old"]) >= 10  # the run had verdict ticks to compare
    assert seen["on_demand"].keys() == seen["old"].keys()
    for t, old in seen["old"].items():
        assert _same(seen["kept"][t], [[row[0], row[4]] for row in old]), t
        assert _same(seen["on_demand"][t], old), t
    # Nothing read the lazy core's rack forecasts: it kept none, and its figures are the eager core's.
    assert lazy.state.fleet is not None
    assert len(lazy.state.fleet.history.view()[0]) == 0
    assert eager.summary().tokens_per_s == lazy.summary().tokens_per_s


@pytest.mark.parametrize("scenario", ["Offline", "Server"])
def test_a_lazy_cores_final_board_is_the_eager_ones(scenario: str) -> None:
    eager, lazy = RackCore(), RackCore(CoreConfig(rack_forecasts=False))
    for event in _fleet(2, 4, scenario, 7, "node01:down@40s", 120.0).events():
        eager.ingest(event)
        lazy.ingest(event)
    assert eager.ended
    assert lazy.ended
    a, b = eager.snapshot().fleet, lazy.snapshot().fleet
    assert a is not None
    assert b is not None
    assert _same(a.projected_valid, b.projected_valid)
    assert _same(a.projected_tokens_per_s, b.projected_tokens_per_s)


@settings(max_examples=60, deadline=None)
@given(
    nodes=st.lists(
        st.lists(st.floats(1e-6, 1e4, allow_nan=False), min_size=0, max_size=40), min_size=1, max_size=12
    ),
    q=st.sampled_from([0.0, 0.01, 0.5, 0.9, 0.99, 0.999, 1.0]),
)
def test_every_nodes_quantile_at_once_equals_each_histograms_own(nodes: list[list[float]], q: float) -> None:
    hists = []
    for k, values in enumerate(nodes):
        hist = LogHistogram()
        if values and k % 3 == 2:  # made by merges (a rack's sum, a copy): their ranges join
            half = len(values) // 2
            for part in (values[:half], values[half:]):
                piece = LogHistogram()
                piece.add(np.asarray(part))
                hist.merge(piece)
        elif values:
            hist.add(np.asarray(values))
        hists.append(hist)
    expected = [float(h.quantiles([q])[0]) if h.total else math.nan for h in hists]
    assert _same(quantile_per_node(hists, q), expected)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(-1e9, 1e9, allow_nan=False, allow_infinity=False), min_size=1, max_size=80))
def test_the_stragglers_median_is_numpys(values: list[float]) -> None:
    array = np.asarray(values)
    assert median_of(array) == float(np.median(array))
    eligible = np.arange(len(values)) % 3 != 0
    with np.errstate(all="ignore"):
        assert _same(below_median_pct(array, eligible), _numpy_below_median(array, eligible))


def _numpy_below_median(values: np.ndarray, eligible: np.ndarray) -> np.ndarray:
    out = np.full(values.shape, np.nan)
    mask = eligible & np.isfinite(values)
    if mask.sum() < 2:
        return out
    median = float(np.median(values[mask]))
    if median <= 0:
        return out
    out[mask] = (median - values[mask]) / median * 100.0
    return out
