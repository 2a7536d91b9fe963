"""Memory must not grow with run length: an 8-hour run keeps the core's buffers at a fixed size."""

from __future__ import annotations

import numpy as np
import pytest

from tokenwatch.core import RackCore
from tokenwatch.core._ring import DownsampledSeries, RecentRing
from tokenwatch.core.histogram import LogHistogram
from tokenwatch.inputs.sim.profile import load_profile
from tokenwatch.inputs.sim.rack_sim import RackSimulation, SimSettings


def buffer_bytes(core: RackCore) -> int:
    """Every numpy buffer the core holds, found by walking its attributes."""
    total, seen, todo = 0, set(), [core]
    while todo:
        obj = todo.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        if isinstance(obj, np.ndarray):
            total += obj.nbytes
        elif isinstance(obj, dict):
            todo.extend(obj.values())
        elif isinstance(obj, list | tuple):
            todo.extend(obj)
        elif isinstance(obj, RackCore | RecentRing | DownsampledSeries | LogHistogram):
            names = [*getattr(type(obj), "__slots__", ()), *getattr(obj, "__dict__", {})]
            todo.extend(getattr(obj, name) for name in names if hasattr(obj, name))
    return total


# Eight simulated hours through the core: ~30 s of CPU on a quiet machine, past the suite's 180-s ceiling on
# one loaded by twenty other processes (105 s alone at load 18).
@pytest.mark.timeout(900)
def test_eight_hour_run_keeps_buffers_fixed() -> None:
    profile = load_profile("h100-dgx")
    settings = SimSettings(profile, seed=1, duration_s=8 * 3600.0, interval_s=2.0)
    core = RackCore()
    after_one_hour = None
    for event in RackSimulation(settings).events():
        core.ingest(event)
        if after_one_hour is None and event.t >= 3600.0:
            after_one_hour = buffer_bytes(core)
    assert core.now >= 7.9 * 3600.0
    assert after_one_hour is not None
    assert buffer_bytes(core) == after_one_hour
    assert after_one_hour < 50 * 1024 * 1024
    times, _ = core.state.history_tokens.view()
    assert len(times) <= core.config.history_points
    assert times[-1] - times[0] > 7.9 * 3600  # the whole run is still there, downsampled
    assert len(core.state.recent_tokens) == core.config.recent_points
    assert len(core.state.alerts.log) <= core.config.alert_log_size
