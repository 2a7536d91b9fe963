"""A fleet known rack by rack (watched through Prometheus) projects the sum of its racks' published
projections on every surface, and makes no forecast of its node-level counters at a snapshot.

That forecast (over the 18,000 nodes of 1,000 racks, ~70 % of a snapshot's time after a round) was
replaced by the racks' projection on the board, yet the header's clock and the energy to finish still
read its projected end. Here the nodes' counters are read as an alerting pass reads them (every node,
every 6 s), so a node-level forecast would have figures and an end to project.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from tests.core.fleet.fleet_runs import prometheus_fleet_started
from tokenwatch.base.events import RACK_FIGURES, ProgressBatch, RackFiguresBatch, RunStarted
from tokenwatch.core import RackCore
from tokenwatch.core.snapshot_json import snapshot_json

RACKS = ("rack01", "rack02", "rack03")
NODES = 4
COL = {name: i for i, name in enumerate(RACK_FIGURES)}
PROJECTED = (1_000_000.0, 1_100_000.0, 900_000.0)
NOMINAL_S = 600.0
SAMPLES = 2_400  # the run's samples: a node-level forecast projects an end from them


def started() -> RunStarted:
    return prometheus_fleet_started(RACKS, NODES, NOMINAL_S, SAMPLES)


def figures(t: float) -> RackFiguresBatch:
    values = np.full((len(RACKS), len(RACK_FIGURES)), np.nan)
    for r in range(len(RACKS)):
        values[r, [COL["nodes_total"], COL["nodes_up"], COL["nodes_running"]]] = NODES
        values[r, COL["gpus"]] = NODES * 4
        values[r, COL["tokens_per_s"]] = 950_000.0
        values[r, COL["power_w"]] = 90_000.0
        values[r, COL["projected_tokens_per_s"]] = PROJECTED[r]
        values[r, COL["projected_valid"]] = 1.0
    return RackFiguresBatch(t, RACKS, values, np.zeros(len(RACKS), bool), ("",) * 3, ("",) * 3)


def watched(until_s: float) -> RackCore:
    core = RackCore()
    core.ingest(started())
    n = len(RACKS) * NODES
    t = 2.0
    while t <= until_s:
        core.ingest(figures(t))
        if t % 6.0 == 0.0:  # the alerting pass: every node's counters
            samples = np.full(n, int(t), np.int64)
            core.ingest(ProgressBatch(t, np.arange(n, dtype=np.int64), samples, samples * 400))
        t += 2.0
    return core


@pytest.mark.parametrize("at_s", [37.0, 48.0])
def test_every_surface_reads_the_racks_projection_and_no_node_forecast_is_made(at_s: float) -> None:
    core = watched(at_s)
    snap = core.snapshot(at_s)
    assert snap.verdict is not None
    band = snap.verdict.forecast.tokens_per_s
    assert band is not None
    assert band.value == pytest.approx(sum(PROJECTED))
    assert snap.verdict.forecast.end_s is None  # the racks publish no end
    # The header's clock: the run's nominal end, not one projected from the nodes' counters.
    assert snap.clock.end_kind == "nominal"
    assert snap.clock.end_s == NOMINAL_S
    assert snap.verdict.energy_to_finish_j is None
    assert snapshot_json(snap)["verdict"]["projected"]["tokens_per_s"] == pytest.approx(sum(PROJECTED))
    # No forecast of the node-level state was made for this snapshot (its memo holds the verdict tick's).
    memo = core.state.verdict.forecast_memo
    assert memo is None or memo[0] != (at_s, core.state.version)


def test_the_node_level_forecast_would_have_projected_an_end() -> None:
    """The counters above are enough for a node-level forecast to project an end: what the fleet's
    surfaces no longer show."""
    from tokenwatch.core.verdict import current_forecast

    core = watched(48.0)
    fc = current_forecast(core.state, 48.0)
    assert fc.end_s is not None
    assert math.isfinite(fc.end_s.value)
