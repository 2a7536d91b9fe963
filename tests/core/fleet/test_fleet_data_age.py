"""How old each rack's figures are, for a fleet known rack by rack from a server that may stop answering:
the board says it where a rack is stale or down (``no data for 1m05s``), and nothing for a rack that is up
or a fleet known node by node."""

from __future__ import annotations

import math

import numpy as np

from tokenwatch.base.events import RACK_FIGURES, Heartbeat, RackFiguresBatch, RunStarted
from tokenwatch.core import CoreConfig, RackCore
from tokenwatch.frontends.tui.widgets.fleet_board import FleetBoard, data_age

RACKS = ("rack01", "rack02", "rack03")


def started() -> RunStarted:
    nodes = tuple(f"{r}/n{k}" for r in RACKS for k in range(2))
    meta = {"fleet": {"source": "prometheus", "racks": [[r, 2 * i, 2] for i, r in enumerate(RACKS)]}}
    return RunStarted(0.0, "fleet", "Offline", nodes, 4, None, None, "live", 1.7e9, meta)


def batch(t: float, racks: tuple[str, ...], down: tuple[str, ...] = ()) -> RackFiguresBatch:
    values = np.full((len(racks), len(RACK_FIGURES)), np.nan)
    values[:, RACK_FIGURES.index("nodes_total")] = 2.0
    values[:, RACK_FIGURES.index("tokens_per_s")] = 1000.0
    flags = np.array([r in down for r in racks])
    return RackFiguresBatch(t, racks, values, flags, ("",) * len(racks), ("throttling",) * len(racks))


def test_each_racks_data_age_and_what_the_board_says_of_it() -> None:
    """rack01 answers to the end; rack02's figures came last at 10 s, then the server said its series
    are gone (down, in every batch since); rack03 was last heard of at 10 s (stale once silent past three
    10-s intervals). At 75 s: ages 5, 65 and 65 s: a down rack's age is since it last had figures."""
    core = RackCore(CoreConfig(stale_after_s=5.0))
    core.ingest(started())
    core.ingest(batch(10.0, RACKS))
    for t in (20.0, 30.0, 40.0, 50.0, 60.0, 70.0):
        core.ingest(batch(t, ("rack01", "rack02"), down=("rack02",)))
    core.ingest(Heartbeat(75.0))
    table = core.snapshot().fleet
    assert table is not None
    assert table.state == ("up", "down", "stale")
    assert table.data_age_s is not None
    assert table.data_age_s.tolist() == [75.0 - 70.0, 75.0 - 10.0, 75.0 - 10.0]
    causes = [FleetBoard.cells(table, i)["cause"] for i in range(3)]
    assert causes == [table.worst_cause[0], "no data for 1m05s", "no data for 1m05s"]  # up: its own cause


def test_the_words_for_an_age() -> None:
    assert data_age(math.nan) == "no data yet"
    assert data_age(0.4) == "no data for 0s"
    assert data_age(59.9) == "no data for 59s"
    assert data_age(3600 + 61) == "no data for 61m01s"
