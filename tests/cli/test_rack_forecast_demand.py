"""Each rack's forecast is made only where something reads it as the run goes: the dashboard (the fleet
board's projected column, a rack's verdict panel), ``--jsonl`` (the board's rows) and ``--rack`` (one
rack's lines). The headless fleet line, /metrics and the summary never read them: what they say is the
same without them."""

from __future__ import annotations

import dataclasses

from tokenwatch.cli.options import RunOptions
from tokenwatch.core import CoreConfig
from tokenwatch.inputs.sim.faults import parse_faults
from tokenwatch.inputs.sim.profile import load_profile
from tokenwatch.inputs.sim.rack_sim import SimSettings

from .session_cores import headless_sim_core, surfaces_through


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
    core = headless_sim_core(_fleet_settings(150.0))
    fleet = core.state.fleet
    assert fleet is not None
    assert not core.config.rack_forecasts
    assert len(fleet.history.view()[0]) == 0


def test_metrics_and_the_summary_of_a_fleet_do_not_read_the_racks_forecasts() -> None:
    """A Server fleet of 2 racks with a node down, through a core that makes each rack's forecast and one
    that does not: every /metrics page, the summary and every 30-s JSONL snapshot but its board rows (each
    rack's projection: ``--jsonl`` turns the forecasts on) are the same bytes."""
    settings = _fleet_settings(150.0)
    cores, said = surfaces_through(
        [CoreConfig(), CoreConfig(rack_forecasts=False)], settings, 30.0, without_board=True
    )
    assert len(said[0]) >= 8
    assert said[0] == said[1]
    assert cores[0].summary() == cores[1].summary()
    # ...while the eager core did make them, and the lazy one none.
    eager, lazy = (core.state.fleet for core in cores)
    assert eager is not None
    assert lazy is not None
    assert len(eager.history.view()[0]) > 0
    assert len(lazy.history.view()[0]) == 0
