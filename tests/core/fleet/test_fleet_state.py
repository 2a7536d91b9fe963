"""A fleet known rack by rack (RackFiguresBatch): the board's rows, rack states, the header and timeline
of such a run, checked against figures worked out here from the batch's own numbers."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tokenwatch.base.events import RACK_FIGURES, Event, Heartbeat, RackFiguresBatch, RunStarted
from tokenwatch.core import CoreConfig, RackCore

COL = {name: i for i, name in enumerate(RACK_FIGURES)}
RACKS = ("rack01", "rack02", "rack03")


def started(racks: tuple[str, ...] = RACKS, nodes_per_rack: int = 2) -> RunStarted:
    nodes = tuple(f"{r}/n{k}" for r in racks for k in range(nodes_per_rack))
    layout = [[r, i * nodes_per_rack, nodes_per_rack] for i, r in enumerate(racks)]
    meta = {"fleet": {"source": "prometheus", "racks": layout}}
    return RunStarted(0.0, "fleet", "Offline", nodes, 4, None, None, "live", 1.7e9, meta)


def batch(t: float, rows: dict[str, dict[str, float]], down: tuple[str, ...] = ()) -> RackFiguresBatch:
    racks = tuple(rows)
    values = np.full((len(racks), len(RACK_FIGURES)), np.nan)
    for i, rack in enumerate(racks):
        for name, value in rows[rack].items():
            values[i, COL[name]] = value
    worst = tuple(f"n{i}" for i in range(len(racks)))
    causes = tuple("throttling" if i == 1 else "" for i in range(len(racks)))
    return RackFiguresBatch(t, racks, values, np.array([r in down for r in racks]), worst, causes)


def figures(
    tokens: float, power: float, *, nodes: int = 2, up: int = 2, running: int = 2
) -> dict[str, float]:
    return {
        "nodes_total": nodes,
        "nodes_up": up,
        "nodes_running": running,
        "gpus": nodes * 4,
        "tokens_per_s": tokens,
        "power_w": power,
        "mean_max_tokens_per_s": tokens / 2 * 1.1,
        "mean_min_tokens_per_s": tokens / 2,
        "worst_tokens_per_s": tokens / 2 * 0.9,
        "median_tokens_per_s": tokens / 2,
        "projected_tokens_per_s": tokens * 0.98,
        "projected_valid": 1.0,
    }


def test_the_boards_rows_are_the_racks_figures() -> None:
    core = RackCore()
    core.ingest(started())
    rows = {"rack01": figures(1000.0, 500.0), "rack02": figures(2000.0, 800.0), "rack03": figures(0.0, 0.0)}
    rows["rack03"]["nodes_running"] = 1  # one running node: no worst against a median
    core.ingest(batch(5.0, rows))
    table = core.snapshot().fleet
    assert table is not None
    assert table.racks == RACKS
    assert table.state == ("up", "up", "up")
    assert table.tokens_per_s.tolist() == [1000.0, 2000.0, 0.0]
    assert table.per_gpu_tokens_per_s.tolist() == [1000.0 / 8, 2000.0 / 8, 0.0]
    assert table.tokens_per_joule[:2].tolist() == [2.0, 2.5]
    assert math.isnan(table.tokens_per_joule[2])  # no power: no tokens per joule
    assert table.spread_pct[0] == pytest.approx(10.0)
    assert table.worst_delta_pct[0] == pytest.approx(-10.0)
    assert table.worst_node[:2] == ("n0", "n1")
    assert table.worst_cause[:2] == ("", "throttling")
    assert table.worst_node[2] == "" and math.isnan(table.worst_delta_pct[2])  # noqa: PT018
    assert table.projected_valid.tolist() == [1.0, 1.0, 1.0]
    assert list(table.nodes_of(1)) == [2, 3]


def test_a_down_rack_keeps_its_size_and_loses_its_figures() -> None:
    core = RackCore()
    core.ingest(started())
    rows = {r: figures(1000.0, 500.0) for r in RACKS}
    core.ingest(batch(5.0, rows, down=("rack02",)))
    table = core.snapshot().fleet
    assert table is not None
    assert table.state == ("up", "down", "up")
    assert table.nodes_total.tolist() == [2, 2, 2]
    assert table.nodes_up.tolist() == [2, 0, 2]
    assert math.isnan(table.tokens_per_s[1])
    snap = core.snapshot()
    assert snap.aggregate.tokens_per_s == 2000.0  # the header: the racks that answer
    assert snap.aggregate.nodes == 6
    assert snap.aggregate.nodes_up == 4


def test_a_rack_silent_past_three_intervals_is_stale() -> None:
    core = RackCore(CoreConfig(stale_after_s=5.0))
    core.ingest(started())
    rows = {r: figures(1000.0, 500.0) for r in RACKS}
    core.ingest(batch(10.0, rows))
    core.ingest(batch(20.0, rows))  # the fleet's interval: 10 s
    core.ingest(batch(30.0, {"rack01": rows["rack01"], "rack02": rows["rack02"]}))
    core.ingest(Heartbeat(49.0))
    table = core.snapshot().fleet
    assert table is not None
    assert table.state == ("up", "up", "up")  # rack03 silent 29 s: within 3 x 10 s
    core.ingest(Heartbeat(51.0))
    table = core.snapshot().fleet
    assert table is not None
    assert table.state[2] == "stale"
    assert math.isnan(table.tokens_per_s[2])


def test_a_rack_never_named_in_the_meta_is_added_when_it_appears() -> None:
    core = RackCore()
    core.ingest(started(("rack01",)))
    core.ingest(batch(5.0, {"rack01": figures(10.0, 1.0), "rack09": figures(20.0, 2.0)}))
    table = core.snapshot().fleet
    assert table is not None
    assert table.racks == ("rack01", "rack09")
    assert table.node_count.tolist() == [2, 0]  # rack09's nodes are not in the run


def test_the_timeline_is_the_fleets_sums() -> None:
    core = RackCore()
    core.ingest(started())
    for k in range(1, 7):
        core.ingest(batch(5.0 * k, {r: figures(100.0 * k, 10.0) for r in RACKS}))
    timeline = core.snapshot().timeline
    assert timeline.times.tolist() == [5.0 * k for k in range(1, 7)]
    assert timeline.tokens_per_s.tolist() == [300.0 * k for k in range(1, 7)]
    assert timeline.power_w.tolist() == [30.0] * 6


def test_a_run_without_rack_figures_has_no_fleet_from_them() -> None:
    core = RackCore()
    core.ingest(started())
    assert core.snapshot().fleet is None
    assert core.state.fleet_figures is None


def test_a_replay_of_the_events_gives_the_same_board() -> None:
    a, b = RackCore(), RackCore()
    events: list[Event] = [
        started(),
        batch(5.0, {r: figures(1000.0, 500.0) for r in RACKS}, down=("rack03",)),
    ]
    for event in events:
        a.ingest(event)
    twin = a.clone()
    for event in events:
        b.ingest(event)
    for core in (twin, b):
        table = core.snapshot().fleet
        assert table is not None
        assert table.state == ("up", "up", "down")
        assert table.tokens_per_s[:2].tolist() == [1000.0, 1000.0]


@pytest.mark.parametrize("fleet", [True, False])
def test_a_fleets_nodes_never_read_raise_no_stale_alerts(fleet: bool) -> None:
    """Rack figures alone (a backfill, or the racks off screen) say nothing of a node's silence; a run
    of the same nodes that is not a fleet's does call them stale."""
    core = RackCore(CoreConfig(stale_after_s=5.0))
    run = started()
    core.ingest(run if fleet else RunStarted(0.0, "r", "Offline", run.nodes, 4, None, None, "live", 1.7e9))
    rows = {r: figures(1000.0, 500.0) for r in RACKS}
    for k in range(1, 13):
        core.ingest(batch(5.0 * k, rows) if fleet else Heartbeat(5.0 * k))
    stale = [a for a in core.snapshot().alerts if a.kind == "stale"]
    assert len(stale) == (0 if fleet else len(run.nodes))
