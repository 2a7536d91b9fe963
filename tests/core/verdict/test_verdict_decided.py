"""Decided beats projected: a node down for good turns the projection to DECIDED INVALID at the next verdict
tick once it is known lost, with the reason in a sentence and what stopping now saves; a node that comes
back is never decided."""

from __future__ import annotations

import re

import numpy as np

from tokenwatch.base.events import Event, RunEnded
from tokenwatch.core import RackCore
from tokenwatch.core.verdict._decided import LOST_AFTER_DOWN_S
from tokenwatch.core.verdict._json import verdict_json
from tokenwatch.inputs.sim.faults import parse_faults
from tokenwatch.inputs.sim.profile import load_profile
from tokenwatch.inputs.sim.rack_sim import RackSimulation, SimSettings
from tokenwatch.mlperf.forecast import Forecast

# 40 minutes: long enough for every node's share of the samples to meet min_queries (projected VALID).
DURATION_S = 2400.0
DOWN_AT_S = 300.0


def sim_events(faults: str) -> list[Event]:
    profile = load_profile("gb300-nvl72")
    settings = SimSettings(
        profile,
        scenario="Offline",
        seed=5,
        duration_s=DURATION_S,
        faults=parse_faults(faults, profile.node_names()),
    )
    return list(RackSimulation(settings).events())


def forecasts_by_tick(events: list[Event]) -> tuple[RackCore, list[tuple[float, Forecast]]]:
    """The forecast the snapshot carries at every verdict interval, once every event before it is in."""
    core = RackCore()
    seen: list[tuple[float, Forecast]] = []

    def take(t: float) -> None:
        view = core.snapshot(t).verdict
        assert view is not None
        seen.append((t, view.forecast))

    core.every(core.config.verdict_interval_s, take)
    for event in events:
        core.ingest(event)
    return core, seen


def test_a_node_down_for_good_decides_the_verdict_invalid_with_its_reason_and_saving() -> None:
    events = sim_events(f"node07:down@{DOWN_AT_S:g}s")
    core, ticks = forecasts_by_tick(events)
    interval = core.config.verdict_interval_s
    lost_at = DOWN_AT_S + LOST_AFTER_DOWN_S
    before = [fc for t, fc in ticks if t < lost_at]
    assert before
    assert not any(fc.decided for fc in before)
    # Until then warming up (no VALID from a ramp), then a projection (VALID once its band is stated,
    # then undecided as the outage widens the band), never INVALID. The first projection, its pace's
    # noise read from the few blocks past the ramp, may state no band: it is then undecided.
    projected = [fc for _, fc in ticks if not fc.warming_up]
    assert all(fc.valid is None for fc in before if fc.warming_up)
    stated = [fc.tokens_per_s is not None and fc.tokens_per_s.known for fc in projected]
    assert all(fc.valid is None for fc, known in zip(projected, stated, strict=True) if not known)
    assert next(fc for fc, known in zip(projected, stated, strict=True) if known).valid is True
    assert all(fc.valid is not False for fc in before)
    decided = [(t, fc) for t, fc in ticks if fc.decided]
    t, fc = decided[0]
    assert lost_at <= t <= lost_at + interval  # within one verdict tick of the down being known for good
    assert all(f.decided and f.valid is False for tt, f in ticks if tt >= t and tt < events[-1].t)
    profile = load_profile("gb300-nvl72")
    gpus = profile.nodes * profile.gpus_per_node
    match = re.fullmatch(
        r"cannot be VALID: node07 down since 05:00, its LoadGen cannot finish; "
        rf"stopping now saves (\d+) min x {gpus} GPUs",
        fc.decided,
    )
    assert match, fc.decided
    # Independently: the other 17 nodes ran on until the simulator ended the run (all of them finished).
    end = events[-1]
    assert isinstance(end, RunEnded)
    assert abs(int(match.group(1)) - (end.t - t) / 60.0) <= 1.0
    rule = fc.rule("every_node_finished")
    assert (rule.now, rule.limit, rule.ok) == (17.0, 18.0, False)


def test_a_decided_verdict_says_so_in_the_jsonl_and_the_alerts() -> None:
    events = sim_events(f"node07:down@{DOWN_AT_S:g}s")
    core = RackCore()
    lost_at = DOWN_AT_S + LOST_AFTER_DOWN_S + core.config.verdict_interval_s
    for event in events:
        if event.t > lost_at:
            break
        core.ingest(event)
    snap = core.snapshot()
    assert snap.verdict is not None
    out = verdict_json(snap.verdict)
    assert out["valid"] is False
    assert out["decided"].startswith("cannot be VALID: node07 down since 05:00")
    messages = [a.message for a in snap.active_alerts]
    assert "DECIDED INVALID: cannot be VALID: node07 down since 05:00, its LoadGen cannot finish" in messages
    assert not any(m.startswith("projected INVALID") for m in messages)


def test_a_node_that_comes_back_is_never_decided_and_the_run_ends_valid() -> None:
    # Down for nine minutes: a long outage, but under the grace; it comes back and finishes.
    back_at = DOWN_AT_S + LOST_AFTER_DOWN_S - 60.0
    core, ticks = forecasts_by_tick(sim_events(f"node07:down@{DOWN_AT_S:g}s-{back_at:g}s"))
    assert ticks
    assert not any(fc.decided for _, fc in ticks)
    states = np.array([fc.valid for t, fc in ticks if DOWN_AT_S < t < back_at], dtype=object)
    assert states.size
    assert False not in states.tolist()
    summary = core.summary()
    assert summary.verdict is not None
    assert summary.verdict.valid is True
