"""Energy per node from the GPUs' counters (baseline, restarts) or integrated power, and which one each
figure is: table-driven over counter sequences whose energy is worked out by hand in each row."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tokenwatch.base.events import GPU_METRICS, GpuBatch, NodeStatus, ProgressBatch, RunStarted
from tokenwatch.core import RackCore
from tokenwatch.core.energy import EnergyCounters, energy_source, node_energy

_POWER, _ENERGY = GPU_METRICS.index("power_w"), GPU_METRICS.index("energy_j")


@pytest.mark.parametrize(
    ("readings", "energy"),
    [
        ([100.0, 150.0, 200.0], 100.0),  # the first reading is a baseline
        ([100.0, 150.0, 200.0, 20.0, 70.0], 170.0),  # restarted at 20 (counts from zero): 100 + 20 + 50
        ([100.0, math.nan, 200.0], 100.0),  # a reading missing this time changes nothing
        ([5e9, 5e9 + 0.001], 0.001),  # a counter far from zero (5 GJ) keeps its millijoules
        ([math.nan, math.nan], math.nan),  # no counter at all
    ],
)
def test_one_counter(readings: list[float], energy: float) -> None:
    counters = EnergyCounters.for_rack(1, 1)
    for value in readings:
        counters.note((slice(None), slice(None)), np.array([[value]]))
    counted = counters.counted_j()[0, 0]
    assert counted == pytest.approx(energy, abs=1e-5, nan_ok=True)  # float64 at 5e9 J: ~1e-6 J steps


def test_node_sources() -> None:
    """node0: every GPU has a counter -> counter; node1: one GPU lacks it -> integrated power; node2:
    never reported -> no energy; node3: one GPU never reported, the other has a counter -> counter."""
    counters = EnergyCounters.for_rack(4, 2)
    counters.node_integrated_j[:] = [11.0, 22.0, 0.0, 44.0]
    for step in (0.0, 10.0):
        counters.note(
            (slice(None), slice(None)),
            np.array([[step, 2 * step], [step, np.nan], [np.nan] * 2, [step, np.nan]]),
        )
    seen = np.array([[True, True], [True, True], [False, False], [True, False]])
    energy, from_counter = node_energy(counters, seen)
    assert from_counter.tolist() == [True, False, False, True]
    assert energy[[0, 1, 3]].tolist() == [30.0, 22.0, 10.0]
    assert math.isnan(energy[2])
    assert energy_source(from_counter, energy > 0) == "mixed"
    assert energy_source(from_counter[[0, 3]], np.array([True, True])) == "counter"
    assert energy_source(from_counter[[1]], np.array([True])) == "power"
    assert energy_source(from_counter, np.zeros(4, bool)) == ""


def test_snapshot_and_summary_per_node() -> None:
    """Two nodes through the core: node00's GPUs carry counters (1 kW each, counted exactly), node01's do
    not (integrated power, 500 W each). tokens/J per node is its tokens over its energy."""
    core = RackCore()
    core.ingest(RunStarted(0.0, "e", "Offline", ("node00", "node01"), 2, None, None, "sim", 0.0))
    for name in ("node00", "node01"):
        core.ingest(NodeStatus(0.0, name, "up"))
    node_index, gpu = np.repeat([0, 1], 2), np.tile([0, 1], 2)
    for k in range(101):
        t = float(k)
        values = np.full((4, len(GPU_METRICS)), np.nan)
        values[:, _POWER] = [1000.0, 1000.0, 500.0, 500.0]
        values[:2, _ENERGY] = 7e6 + 1000.0 * t
        core.ingest(GpuBatch(t, node_index, gpu, values, np.zeros(4, np.uint64)))
        core.ingest(ProgressBatch(t, np.array([0, 1]), np.array([k, k]), np.array([300 * k, 200 * k])))
    snap = core.snapshot()
    assert snap.nodes.energy_source == ("counter", "power")
    assert snap.aggregate.energy_source == "mixed"
    # node00: 2 GPUs x 1 kW x 100 s by the counters; node01: 2 x 500 W on the ticks before t = 100.
    assert snap.nodes.tokens_per_joule[0] == pytest.approx(30_000 / 200_000.0)
    integrated = core.state.energy.node_integrated_j[1]
    assert integrated == pytest.approx(2 * 500.0 * 100, rel=0.02)
    assert snap.nodes.tokens_per_joule[1] == pytest.approx(20_000 / integrated)
    assert snap.aggregate.energy_j == pytest.approx(200_000.0 + integrated)
    summary = core.summary()
    assert summary.energy_source == "mixed"
    assert summary.tokens_per_joule == pytest.approx(50_000 / (200_000.0 + integrated))
