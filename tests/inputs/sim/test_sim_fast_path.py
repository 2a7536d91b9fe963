"""The simulator's tick without faults skips the fault masks' work: its telemetry and events are the ones the
general path gives, to the bit."""

from __future__ import annotations

import numpy as np
import pytest

from tokenwatch.base.events import GpuBatch, ProgressBatch
from tokenwatch.inputs.sim.faults import parse_faults
from tokenwatch.inputs.sim.gpu_model import RackGpuModel
from tokenwatch.inputs.sim.profile import load_profile
from tokenwatch.inputs.sim.rack_sim import RackSimulation, SimSettings
from tokenwatch.recording.codec import dumps

GB300 = load_profile("gb300-nvl72")


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_gpu_model_without_faults_reads_as_with_a_cap_that_caps_nothing(seed: int) -> None:
    """A cap of NaN on every GPU (no cap in force) takes the general path; None takes the fast one."""
    nodes, gpus = 6, 4
    fast = RackGpuModel(GB300.gpu, nodes, gpus, np.random.default_rng(seed))
    general = RackGpuModel(GB300.gpu, nodes, gpus, np.random.default_rng(seed))
    loads = np.random.default_rng(seed + 100)
    no_cap = np.full(nodes * gpus, np.nan)
    none = np.zeros(nodes * gpus, bool)
    for step in range(400):
        load = loads.uniform(0.0, 1.2, nodes)
        load[step % nodes] = 0.0  # an idle node too: its clocks and reasons take the idle branch
        values_fast, reasons_fast = fast.step(load, none, 1.0)
        values_general, reasons_general = general.step(load, none, 1.0, none, no_cap)
        assert np.array_equal(values_fast, values_general, equal_nan=True), step
        assert np.array_equal(reasons_fast, reasons_general), step
        assert np.array_equal(fast.temp, general.temp), step


def test_a_run_reads_the_same_with_a_fault_that_never_comes() -> None:
    """A fault after the run's end puts every tick through the fault masks (the general path)."""
    settings = SimSettings(GB300, duration_s=900.0, seed=3)
    late = parse_faults("node04:slow@100m-110m,node02/1:hot@100m-110m", GB300.node_names(), 4)
    plain = [e for e in RackSimulation(settings).events() if isinstance(e, GpuBatch | ProgressBatch)]
    general = [
        e
        for e in RackSimulation(SimSettings(GB300, duration_s=900.0, seed=3, faults=late)).events()
        if isinstance(e, GpuBatch | ProgressBatch)
    ]
    assert len(plain) == len(general) > 1_000
    assert [dumps(e) for e in plain] == [dumps(e) for e in general]
