"""The GPUs' whole-run series (``history_gpu``) are kept only where something may ask the core for them:
``RackCore.history()``, which reports and exports call on a core they build from the recording. A
headless session's core (its lines, ``--jsonl``, /metrics, the alerts, the summary) never reads them, so
it does not keep them, and says so if asked."""

from __future__ import annotations

import dataclasses

import pytest

from tokenwatch.core import CoreConfig
from tokenwatch.inputs.sim.faults import parse_faults
from tokenwatch.inputs.sim.profile import load_profile
from tokenwatch.inputs.sim.rack_sim import SimSettings

from .session_cores import headless_sim_core, surfaces_through


def _rack_settings(duration_s: float) -> SimSettings:
    """8 nodes: node03's GPU throttles from 40 s (a straggler with a GPU cause), node05 is down from 90 s."""
    profile = load_profile("gb300-nvl72")
    profile = dataclasses.replace(profile, nodes=8, total_samples=profile.total_samples * 8 // profile.nodes)
    faults = parse_faults("node03:throttle@40s,node05:down@90s", profile.node_names())
    return SimSettings(profile, scenario="Offline", seed=7, duration_s=duration_s, faults=faults)


def test_a_headless_sessions_core_keeps_no_whole_run_gpu_series() -> None:
    core = headless_sim_core(_rack_settings(60.0))
    assert not core.config.whole_run_gpu_series
    with pytest.raises(ValueError, match="whole-run series"):
        core.history()
    assert CoreConfig().whole_run_gpu_series  # a core made in code keeps them (the report, an export)


def test_nothing_a_headless_run_shows_reads_the_whole_run_gpu_series() -> None:
    """The same events through a core that keeps the series and one that does not: every 20-s JSONL
    snapshot and /metrics page, the alerts and the summary are the same bytes."""
    cores, said = surfaces_through(
        [CoreConfig(), CoreConfig(whole_run_gpu_series=False)], _rack_settings(180.0), 20.0
    )
    assert len(said[0]) >= 16
    assert said[0] == said[1]
    assert cores[0].alerts_since(0) == cores[1].alerts_since(0)
    assert any(alert.kind == "straggler" for alert in cores[0].alerts_since(0))
    assert cores[0].summary() == cores[1].summary()
    assert len(cores[0].history().gpu_times) > 0  # ...while the one that keeps them has them
