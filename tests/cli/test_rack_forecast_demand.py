"""Each rack's forecast is made only where something reads it as the run goes: the dashboard (the fleet
board's projected column, a rack's verdict panel), ``--jsonl`` (the board's rows) and ``--rack`` (one
rack's lines). The headless fleet line, /metrics and the summary never read them: what they say is the
same without them."""

from __future__ import annotations

import dataclasses

import orjson

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


def _fleet_settings(duration_s: float) -> SimSettings:
    """A Server fleet of 2 racks of 4 nodes with node02 down from 60 s."""
    profile = load_profile("gb300-nvl72")
    profile = dataclasses.replace(
        profile, name="gb300 x2", nodes=8, total_samples=profile.total_samples * 8 // profile.nodes
    )
    return SimSettings(
        profile,
        scenario="Server",
        seed=5,
        duration_s=duration_s,
        faults=parse_faults("node02:down@60s", profile.node_names()),
        extra_meta={"nodes_per_rack": 4},
    )


def test_only_what_shows_a_racks_forecast_keeps_it() -> None:
    assert not RunOptions("sim", headless=True).reads_rack_forecasts()
    assert not RunOptions("sim", headless=True, record="r.jsonl").reads_rack_forecasts()
    assert not RunOptions("sim", headless=True, prometheus_port=0).reads_rack_forecasts()
    assert RunOptions("sim", headless=True, jsonl="-").reads_rack_forecasts()  # the board's rows
    assert RunOptions("sim", headless=True, rack="rack01").reads_rack_forecasts()  # its projection
    assert not RunOptions("replay").reads_rack_forecasts()  # pytest's stdout is not a terminal
    assert RunOptions("sim", force_dashboard=True).reads_rack_forecasts()
    assert CoreConfig().rack_forecasts  # a core made in code keeps them (the report, a baseline, tests)


def test_a_headless_sims_core_makes_no_rack_forecast() -> None:
    """The CLI's session core: a headless fleet sim ends with no per-rack forecast kept."""
    seen: list[RackCore] = []
    status = run_session(
        RunOptions("sim", headless=True, speed=0.0, interval_s=60.0),
        [SimulatorCollector(_fleet_settings(150.0), speed=0.0)],
        after=lambda session: seen.append(session.core),
    )
    assert status == 0
    fleet = seen[0].state.fleet
    assert fleet is not None
    assert not seen[0].config.rack_forecasts
    assert len(fleet.history.view()[0]) == 0


def test_metrics_and_the_summary_of_a_fleet_do_not_read_the_racks_forecasts() -> None:
    """A Server fleet of 2 racks with a node down, through a core that makes each rack's forecast and one
    that does not: every /metrics page, the summary and every 30-s JSONL snapshot but its board rows (each
    rack's projection: ``--jsonl`` turns the forecasts on) are the same bytes."""
    settings = _fleet_settings(150.0)
    said: list[list[bytes]] = [[], []]
    cores = [RackCore(), RackCore(CoreConfig(rack_forecasts=False))]
    for core, out in zip(cores, said, strict=True):

        def look(t: float, core: RackCore = core, out: list[bytes] = out) -> None:
            record = snapshot_json(core.snapshot(t))
            record.pop("fleet", None)  # the board's rows carry each rack's projection
            out.append(orjson.dumps(record))
            out.append(render(take_view(core)))

        core.every(30.0, look)
    for event in RackSimulation(settings).events():
        for core in cores:
            core.ingest(event)
    assert len(said[0]) >= 8
    assert said[0] == said[1]
    assert cores[0].summary() == cores[1].summary()
    # ...while the eager core did make them, and the lazy one none.
    eager, lazy = (core.state.fleet for core in cores)
    assert eager is not None
    assert lazy is not None
    assert len(eager.history.view()[0]) > 0
    assert len(lazy.history.view()[0]) == 0
