"""A fleet known rack by rack projects what its racks project, and a rack whose data stopped is not
extrapolated: its projection is marked stale on the board, in the headless line and in the JSONL.

The fleet's projection once read ``29,843k ±11330533…``: a forecast made of the few nodes fetched, whose
counters had counted since the run's start. Three racks' figures are fed as a fleet watch reads them
(one batch per 2 s); rack02's series go at 20 s (its exporter died).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from tests.core.fleet.fleet_runs import prometheus_fleet_started
from tokenwatch.base.events import RACK_FIGURES, RackFiguresBatch, RunStarted
from tokenwatch.core import RackCore
from tokenwatch.core.snapshot_json import snapshot_json
from tokenwatch.frontends.headless.headless import human_line
from tokenwatch.frontends.tui.widgets.fleet_board import FleetBoard

RACKS = ("rack01", "rack02", "rack03")
NODES = 4
COL = {name: i for i, name in enumerate(RACK_FIGURES)}
PROJECTED = (1_000_000.0, 1_100_000.0, 900_000.0)


def started() -> RunStarted:
    return prometheus_fleet_started(RACKS, NODES, 4800.0, None)


def batch(t: float, down: set[str]) -> RackFiguresBatch:
    values = np.full((len(RACKS), len(RACK_FIGURES)), np.nan)
    gone = np.array([rack in down for rack in RACKS])
    for r in range(len(RACKS)):
        values[r, COL["nodes_total"]] = NODES
        if gone[r]:
            continue
        values[r, [COL["nodes_up"], COL["nodes_running"], COL["gpus"]]] = (NODES, NODES, NODES * 4)
        values[r, COL["tokens_per_s"]] = 950_000.0 + r
        values[r, COL["power_w"]] = 90_000.0
        values[r, COL["projected_tokens_per_s"]] = PROJECTED[r]
        values[r, COL["projected_valid"]] = 1.0
    return RackFiguresBatch(t, RACKS, values, gone, ("",) * 3, ("",) * 3)


def fleet_at(t_end: float) -> RackCore:
    core = RackCore()
    core.ingest(started())
    t = 2.0
    while t <= t_end:
        core.ingest(batch(t, {"rack02"} if t >= 20.0 else set()))
        t += 2.0
    return core


def test_the_fleet_projects_the_sum_of_its_racks_with_no_band_they_do_not_publish() -> None:
    snap = fleet_at(16.0).snapshot(16.0)
    assert snap.verdict is not None
    band = snap.verdict.forecast.tokens_per_s
    assert band is not None
    assert band.value == pytest.approx(sum(PROJECTED))
    assert math.isnan(band.low)
    assert math.isnan(band.high)
    assert snap.verdict.valid is True
    record = snapshot_json(snap)
    assert [row["projection"] for row in record["fleet"]] == [
        {"tokens_per_s": p, "valid": True} for p in PROJECTED
    ]
    drill = fleet_at(16.0).rack_snapshot("rack02", 16.0)
    assert drill is not None
    assert drill.verdict is not None
    assert drill.verdict.forecast.tokens_per_s is not None
    assert drill.verdict.forecast.tokens_per_s.value == PROJECTED[1]


def test_a_rack_whose_data_stopped_has_its_projection_marked_stale_not_extrapolated() -> None:
    core = fleet_at(30.0)
    snap = core.snapshot(30.0)
    record = snapshot_json(snap)
    rows = {row["rack"]: row for row in record["fleet"]}
    assert rows["rack02"]["state"] == "down"
    assert rows["rack02"]["projection"] == "stale"
    assert rows["rack01"]["projection"] == {"tokens_per_s": PROJECTED[0], "valid": True}
    # The fleet's own projection: stale, said with the rack and since when; nothing extrapolated.
    assert snap.verdict is not None
    assert snap.verdict.forecast.tokens_per_s is None
    assert snap.verdict.forecast.stale == "rack02 down, no data since 00:18"
    assert record["verdict"]["stale"] == "rack02 down, no data since 00:18"
    assert record["verdict"]["projected"] is None
    assert "proj stale (rack02 down, no data since 00:18) UNDECIDED" in human_line(snap)
    # The rack's drill-down (``--rack rack02``) says the same.
    drill = core.rack_snapshot("rack02", 30.0)
    assert drill is not None
    assert "proj stale (rack02 down, no data since 00:18) UNDECIDED" in human_line(drill)
    assert snapshot_json(drill)["verdict"]["stale"] == "rack02 down, no data since 00:18"
    # The board's row.
    assert snap.fleet is not None
    cells = FleetBoard.cells(snap.fleet, snap.fleet.index("rack02"))
    assert (cells["verdict"], cells["proj"]) == ("◌ no data", "stale")
    assert FleetBoard.cells(snap.fleet, 0)["verdict"] == "✓ VALID"
