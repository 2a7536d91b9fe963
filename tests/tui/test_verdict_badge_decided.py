"""The dashboard's verdict badge says DECIDED INVALID once a node is down for good (a projection before)."""

from __future__ import annotations

from tokenwatch.base.events import Event
from tokenwatch.core import RackCore
from tokenwatch.core.verdict_decided import LOST_AFTER_DOWN_S
from tokenwatch.frontends.tui.widgets.verdict_badge import badge_text
from tokenwatch.inputs.sim.faults import parse_faults
from tokenwatch.inputs.sim.profile import load_profile
from tokenwatch.inputs.sim.rack_sim import RackSimulation, SimSettings

DOWN_AT_S = 300.0


def sim_events(faults: str) -> list[Event]:
    profile = load_profile("gb300-nvl72")
    faults_at = parse_faults(faults, profile.node_names())
    return list(RackSimulation(SimSettings(profile, "Offline", 5, 2400.0, faults=faults_at)).events())


def test_the_badge_says_decided_once_a_node_is_down_for_good() -> None:
    core = RackCore()
    lost_at = DOWN_AT_S + LOST_AFTER_DOWN_S
    said: dict[str, str] = {}
    for event in sim_events(f"node07:down@{DOWN_AT_S:g}s"):
        if event.t > lost_at + core.config.verdict_interval_s:
            break
        if event.t < lost_at - 60.0 or "before" in said:
            core.ingest(event)
            continue
        said["before"] = badge_text(core.snapshot())
        core.ingest(event)
    said["after"] = badge_text(core.snapshot())
    assert said["before"].startswith("PROJECTED ")
    assert said["after"].startswith("DECIDED INVALID ")
