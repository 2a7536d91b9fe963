"""The GPUs' whole-run series (``history_gpu``) are kept only where something may ask the core for them:
``RackCore.history()``, which reports and exports call on a core they build from the recording. A
headless session's core (its lines, ``--jsonl``, /metrics, the alerts, the summary) never reads them, so
it does not keep them, and says so if asked."""

from __future__ import annotations

import dataclasses

import orjson
import pytest

from tokenwatch.cli.options import RunOptions
from tokenwatch.cli.running import run_session
from tokenwatch.core import CoreConfig, RackCore
from tokenwatch.core.snapshot_json import snapshot_json
from tokenwatch.frontends.metrics.exposition import render
from tokenwatch.frontends.metrics.families import take_view
from tokenwatch.inputs.sim.collector import SimulatorCollector
from tokenwatch.inputs.sim.faults import parse_faults
from tokenwatch.inputs.sim.profile import load_profile
from tokenwatch.inputs.sim.rack_sim import RackSimulation, SimSettings


def _rack_settings(duration_s: float) -> SimSettings:
    """8 nodes: node03's GPU throttles from 40 s (a straggler with a GPU cause), node05 is down from 90 s."""
    profile = load_profile("gb300-nvl72")
    profile = dataclasses.replace(profile, nodes=8, total_samples=profile.total_samples * 8 // profile.nodes)
    faults = parse_faults("node03:throttle@40s,node05:down@90s", profile.node_names())
    return SimSettings(profile, scenario="Offline", seed=7, duration_s=duration_s, faults=faults)


def test_a_headless_sessions_core_keeps_no_whole_run_gpu_series() -> None:
    seen: list[RackCore] = []
    status = run_session(
        RunOptions("sim", headless=True, speed=0.0, interval_s=60.0),
        [SimulatorCollector(_rack_settings(60.0), speed=0.0)],
        after=lambda session: seen.append(session.core),
    )
    assert status == 0
    assert not seen[0].config.whole_run_gpu_series
    with pytest.raises(ValueError, match="whole-run series"):
        seen[0].history()
    assert CoreConfig().whole_run_gpu_series  # a core made in code keeps them (the report, an export)


def test_nothing_a_headless_run_shows_reads_the_whole_run_gpu_series() -> None:
    """The same events through a core that keeps the series and one that does not: every 20-s JSONL
    snapshot and /metrics page, the alerts and the summary are the same bytes."""
    said: list[list[bytes]] = [[], []]
    cores = [RackCore(), RackCore(CoreConfig(whole_run_gpu_series=False))]
    for core, out in zip(cores, said, strict=True):

        def look(t: float, core: RackCore = core, out: list[bytes] = out) -> None:
            out.append(orjson.dumps(snapshot_json(core.snapshot(t))))
            out.append(render(take_view(core)))

        core.every(20.0, look)
    for event in RackSimulation(_rack_settings(180.0)).events():
        for core in cores:
            core.ingest(event)
    assert len(said[0]) >= 16
    assert said[0] == said[1]
    assert cores[0].alerts_since(0) == cores[1].alerts_since(0)
    assert any(alert.kind == "straggler" for alert in cores[0].alerts_since(0))
    assert cores[0].summary() == cores[1].summary()
    assert len(cores[0].history().gpu_times) > 0  # ...while the one that keeps them has them
