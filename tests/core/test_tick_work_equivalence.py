"""The 1-s tick's cheaper paths give what the general ones give, at every tick.

Two cores take the same simulated events. The reference core runs the general paths: the pace's
medians through numpy's ``np.nanmedian``, every projection made afresh (no memo shared between the
verdict's forecast and a decided verdict's rest), and the throttle rule's full comparison at every
tick. The other runs the code as it ships. After every event (each tick happens inside one) their
alerts, their throttle rule's memory and their verdict history (the forecast every verdict tick
records: the band, the projected end, the verdict) are the same; and so are their summaries.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import pytest

from tokenwatch.core import RackCore
from tokenwatch.core import _alert_rules as rules
from tokenwatch.core._state import RackState
from tokenwatch.core.verdict import _decided as decided
from tokenwatch.core.verdict import _tick as tick
from tokenwatch.core.verdict._inputs import node_progress, over_limits, run_settings
from tokenwatch.inputs.sim.faults import parse_faults
from tokenwatch.inputs.sim.profile import load_profile
from tokenwatch.inputs.sim.rack_sim import RackSimulation, SimSettings
from tokenwatch.mlperf import forecast as mlperf_forecast
from tokenwatch.mlperf import pace
from tokenwatch.mlperf.forecast import Forecast

_NODES = 6


def _simulation(scenario: str, faults: str, duration_s: float, seed: int) -> RackSimulation:
    profile = load_profile("gb300-nvl72")
    profile = dataclasses.replace(
        profile, nodes=_NODES, total_samples=profile.total_samples * _NODES // profile.nodes
    )
    return RackSimulation(
        SimSettings(
            profile,
            scenario=scenario,  # type: ignore[arg-type]
            seed=seed,
            duration_s=duration_s,
            faults=parse_faults(faults, profile.node_names()),
        )
    )


def _numpys_nanmedian(values: np.ndarray) -> np.ndarray:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # an all-NaN column is NaN
        return np.asarray(np.nanmedian(values, axis=0))


def _afresh(state: RackState, now: float, keep: np.ndarray) -> Forecast:
    settings, _ = run_settings(state)
    progress = node_progress(state, now, keep)
    return mlperf_forecast.forecast(progress, settings, over_limits(state, keep), state.config.forecast)


@contextmanager
def _general_paths() -> Iterator[None]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(pace, "nanmedian_columns", _numpys_nanmedian)
        patch.setattr(tick, "projection", _afresh)
        patch.setattr(decided, "projection", _afresh)
        patch.setattr(rules, "nothing_throttles", lambda *_: False)
        yield


def _alerts(core: RackCore) -> list[tuple[float, str | None, str, str, bool]]:
    return [(a.t, a.node, a.kind, a.message, a.active) for a in core.state.alerts.log]


def _same_array(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and np.array_equal(a, b, equal_nan=a.dtype.kind == "f")


@pytest.mark.parametrize(
    ("scenario", "faults", "duration_s", "seed"),
    [
        # A throttled GPU (raised, then cleared) beside a slow node: the throttle rule's both paths.
        ("Offline", "node05:throttle@60s-240s,node02:slow@90s-400s", 600.0, 3),
        ("Server", "node03:hot@60s-200s,node04:powercap=1200@100s-250s", 420.0, 5),
        # A node down for good: the verdict decided INVALID, its rest's end projected without it.
        ("Offline", "node01:down@60s", 900.0, 11),
    ],
)
def test_the_cheaper_paths_give_the_general_paths_figures_at_every_tick(
    scenario: str, faults: str, duration_s: float, seed: int
) -> None:
    reference, shipped = RackCore(), RackCore()
    compared = 0
    for event in _simulation(scenario, faults, duration_s, seed).events():
        with _general_paths():
            reference.ingest(event)
        shipped.ingest(event)
        ref, got = reference.state, shipped.state
        assert got.ticks_sampled == ref.ticks_sampled
        assert _alerts(shipped) == _alerts(reference), ref.now
        for name in ("throttle_since", "throttling", "throttle_alerted"):
            assert _same_array(getattr(got.rules, name), getattr(ref.rules, name)), (name, ref.now)
        ref_times, ref_rows = ref.verdict.history.view()
        got_times, got_rows = got.verdict.history.view()
        assert _same_array(got_times, ref_times), ref.now
        assert _same_array(got_rows, ref_rows), ref.now
        compared += 1
    state = reference.state
    assert state.ticks_sampled >= duration_s  # a tick a second, each compared right after it
    assert len(state.verdict.history.view()[0]) >= duration_s / state.verdict.interval_s / 2
    kinds = {kind for _, _, kind, _, _ in _alerts(reference)}
    if "throttle" in faults:
        assert "throttle" in kinds  # the full rule did run, and raised what the fast path then cleared
    if "down" in faults:
        assert "verdict_decided" in kinds
    assert shipped.summary() == reference.summary()
    assert compared > 0
