"""A node that goes stale and then reports again brings minutes of tokens in one reading: the rack's
timeline spreads them over its silence instead of drawing one point of many times the rack's rate (it
was 14.2 M tok/s for a 1.1 M tok/s rack). Checked against the simulator's raw progress events."""

from __future__ import annotations

import numpy as np

from tokenwatch.base.events import ProgressBatch
from tokenwatch.core import RackCore
from tokenwatch.core.run_history import run_history, spread_increases
from tokenwatch.inputs.sim.faults import parse_faults
from tokenwatch.inputs.sim.profile import load_profile
from tokenwatch.inputs.sim.rack_sim import RackSimulation, SimSettings

PROFILE = load_profile("gb300-nvl72")
NODES = PROFILE.node_names()
UNTIL_S = 420.0


def test_a_stale_nodes_catch_up_is_spread_over_its_silence() -> None:
    faults = parse_faults("node04:stale@2m-5m", NODES, 4)
    settings = SimSettings(PROFILE, seed=5, duration_s=900.0, faults=faults)
    core = RackCore()
    progress: list[ProgressBatch] = []
    for ev in RackSimulation(settings).events():
        if ev.t > UNTIL_S:
            break
        core.ingest(ev)
        if isinstance(ev, ProgressBatch):
            progress.append(ev)
    line = core.snapshot().timeline
    times, rates = line.times, line.tokens_per_s
    latest = np.zeros(len(NODES))  # each node's counter at the timeline's last point, as raw events say
    for ev in progress:
        if ev.t <= times[-1]:
            latest[ev.node_index] = ev.tokens_done
    assert times[0] < 120.0 < 300.0 < times[-1]
    # No point beyond what the rack can make: under 1.2x its mean rate over the whole stretch.
    mean_rate = latest.sum() / times[-1]
    assert np.nanmax(rates) < 1.2 * mean_rate, (np.nanmax(rates), mean_rate)
    # Nothing lost or added: the rates integrate to the tokens the raw events counted by the last point.
    made = np.nansum(rates[1:] * np.diff(times))
    first = float(core.state.history_tokens.view()[1][0].sum())
    assert abs(made + first - latest.sum()) <= 1e-6 * latest.sum()
    # The whole-run history (reports, exports) reads the same.
    history = run_history(core.state)
    np.testing.assert_allclose(history.rack_tokens_per_s[1:], rates[1:])


def test_a_reading_every_10_s_reads_as_its_rate_at_every_point() -> None:
    """A server that logs every 10 s, sampled at 1 s: 1,000 tok/s at every point (not 10,000 at one
    point in ten); a counter still standing at the end stays flat; a node that never moves stays 0."""
    times = np.arange(0.0, 41.0)
    logged = np.floor(times / 10.0) * 10_000.0  # +10,000 tokens at each 10-s line
    logged[35:] = logged[34]  # it stops at 30 s (the line at 40 s never comes)
    cumulative = np.column_stack([logged, np.zeros_like(times)])
    spread = spread_increases(times, cumulative)
    rates = np.diff(spread, axis=0)
    np.testing.assert_allclose(rates[:30, 0], 1_000.0)
    np.testing.assert_allclose(rates[30:, 0], 0.0)
    assert not spread[:, 1].any()
    assert spread[-1, 0] == logged[-1]
