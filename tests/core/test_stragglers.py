"""Straggler alerts do not flap on noise: a node is judged against the noise its own rate
shows, so a healthy run raises nothing, and an injected slowdown is still caught within about a minute.

Before, the default demo run flagged node13 (4.4 % below the median by its drawn figure) three minutes
in, for good, and a 10-minute Server run raised and cleared the same node every few minutes.
"""

from __future__ import annotations

import pytest

from tokenwatch.core import Alert, RackCore
from tokenwatch.inputs.sim.faults import parse_faults
from tokenwatch.inputs.sim.profile import load_profile
from tokenwatch.inputs.sim.rack_sim import RackSimulation, SimSettings

GB300 = load_profile("gb300-nvl72")


def straggler_alerts(scenario: str, duration_s: float | None, seed: int, faults: str = "") -> list[Alert]:
    """Every straggler alert raised (not cleared) in the run, oldest first."""
    settings = SimSettings(
        GB300,
        scenario=scenario,  # type: ignore[arg-type]
        seed=seed,
        duration_s=duration_s,
        faults=parse_faults(faults, GB300.node_names()),
    )
    core = RackCore()
    for event in RackSimulation(settings).events():
        core.ingest(event)
    assert core.ended
    return [a for a in core.state.alerts.log if a.kind == "straggler" and a.active]


def test_the_default_demo_run_raises_no_straggler() -> None:
    """`tokenwatch` = the gb300-nvl72 simulator, 80 minutes, seed 0, no fault."""
    assert straggler_alerts("Offline", None, seed=0) == []


@pytest.mark.parametrize("seed", [0, 1, 2, 3, 4, 5])
def test_a_healthy_server_run_raises_no_straggler(seed: int) -> None:
    """Poisson arrivals: a node's 60-s rate wobbles by ~1 %; none of that is a straggler."""
    assert straggler_alerts("Server", 600.0, seed) == []


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_healthy_offline_runs_of_other_seeds_raise_none(seed: int) -> None:
    """Seeds 2 and 3 draw a node 4.8 % below the median: near the 5 % threshold, within its noise."""
    assert straggler_alerts("Offline", 1800.0, seed) == []


@pytest.mark.parametrize(
    ("scenario", "duration_s", "start_s"), [("Offline", 1200.0, 300.0), ("Server", 600.0, 180.0)]
)
@pytest.mark.parametrize("seed", [0, 3])
def test_an_injected_slowdown_is_caught_promptly_and_once(
    scenario: str, duration_s: float, start_s: float, seed: int
) -> None:
    """node11 at 80 % from start_s for five minutes: raised within 75 s (the 60-s window must see it, then
    15 s of hold), once, and only for node11."""
    end_s = start_s + 300.0
    raised = straggler_alerts(scenario, duration_s, seed, f"node11:slow@{start_s:g}s-{end_s:g}s")
    assert [a.node for a in raised] == ["node11"]
    assert start_s < raised[0].t <= start_s + 75.0
