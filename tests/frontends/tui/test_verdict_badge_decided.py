"""The dashboard's verdict badge says DECIDED INVALID once a node is down for good (a projection before), and
DECIDED VALID with LoadGen's own figure once every node's LoadGen wrote VALID."""

from __future__ import annotations

from tests.sources.conftest import LOADGEN
from tokenwatch.base.events import Event, NodeStatus, RunStarted
from tokenwatch.core import RackCore
from tokenwatch.core.verdict import LOST_AFTER_DOWN_S
from tokenwatch.frontends.tui.widgets.verdict_badge import badge_text
from tokenwatch.inputs.sim.faults import parse_faults
from tokenwatch.inputs.sim.profile import load_profile
from tokenwatch.inputs.sim.rack_sim import RackSimulation, SimSettings
from tokenwatch.sources.loadgen_detail import DetailLogParser

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


def test_the_badge_says_decided_valid_with_loadgens_own_figure_once_its_result_is_read() -> None:
    """The GB300 NVL72 rack's own Server detail log (LoadGen: VALID, 868,278 completed tokens/s), read by the
    live parser into a run that has not ended yet: LoadGen's word and figure, exact, no band."""
    log = LOADGEN / "nvidia-gb300-nvl72-server" / "mlperf_log_detail.txt"
    core = RackCore()
    core.ingest(RunStarted(0.0, "gb300", "Server", ("node01",), 72, None, None, "live", 0.0))
    parser = DetailLogParser("node01")
    for event in parser.feed(log.read_bytes(), 1.0) + parser.close(1.0):
        if not isinstance(event, NodeStatus):  # the run goes on: the verdict is decided, not final
            core.ingest(event)
    snap = core.snapshot(2.0)
    assert not snap.ended
    assert badge_text(snap) == "DECIDED VALID 868,278"
    assert snap.verdict is not None
    assert snap.verdict.forecast.decided == "LoadGen wrote VALID"
