"""The fleet table and a rack's own view, against figures worked out here from the events themselves.

Runs: the seeded simulator's ``--racks`` with 4 nodes per rack (a fraction of a second each); the racks
are grouped here from the node order, independently of the core's grouping.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np
import pytest

from tests.core.fleet.fleet_runs import GPUS, expected_rack, facts_at, fleet_events, rack_events
from tokenwatch.base.events import Event, RunStarted
from tokenwatch.core import Alert, RackCore
from tokenwatch.core._run_info import RunInfo
from tokenwatch.core.fleet.rack_groups import rack_groups
from tokenwatch.core.snapshot import Later

PER_RACK = 4
RACKS = 3
FAULTS = "node06:down@40-70"  # rack02's second node


def run_info(nodes: int, gpus: int = 4, **meta: Any) -> RunInfo:
    names = tuple(f"n{i:02d}" for i in range(nodes))
    return RunInfo("r", "Offline", "sim", names, gpus, None, None, 0.0, meta)


@pytest.mark.parametrize(
    ("run", "names", "counts", "problem"),
    [
        (run_info(36), ("rack01", "rack02"), [18, 18], ""),  # 72 GPUs a rack: 18 nodes of 4
        (run_info(20, gpus=8), ("rack01", "rack02", "rack03"), [9, 9, 2], ""),
        (run_info(6, nodes_per_rack=2), ("rack01", "rack02", "rack03"), [2, 2, 2], ""),
        (run_info(5, racks=["a", "a", "b", "b", "b"]), ("a", "b"), [2, 3], ""),
        (run_info(4, nodes_per_rack=2, racks=["a", "b", "a", "b"]), ("rack01", "rack02"), [2, 2], "a's"),
        (run_info(4, nodes_per_rack=2, racks=["a", "b"]), ("rack01", "rack02"), [2, 2], "one rack name"),
        (run_info(2, nodes_per_rack=1, racks=["a", ""]), ("rack01", "rack02"), [1, 1], "non-empty"),
        (run_info(18), ("rack01",), [18], ""),
    ],
)
def test_racks_group_by_label_by_declared_size_or_by_72_gpus(
    run: RunInfo, names: tuple[str, ...], counts: list[int], problem: str
) -> None:
    groups = rack_groups(run)
    assert groups.names == names
    assert groups.count.tolist() == counts
    assert groups.first.tolist() == np.concatenate(([0], np.cumsum(counts)[:-1])).tolist()
    assert problem in groups.problem
    assert bool(groups.problem) == bool(problem)


def test_a_racks_label_list_that_cannot_be_used_is_said_once() -> None:
    core = RackCore()
    start = RunStarted(
        0.0, "r", "Offline", ("a", "b", "c"), 4, None, None, "live", 0.0, {"racks": ["x", "y"]}
    )
    core.ingest(start)
    warnings = [a.message for a in core.snapshot().alerts if a.kind == "warning"]
    assert warnings == ["racks grouped by size: meta racks is not one rack name per node (3 nodes)"]


# ---------------------------------------------------------------- the figures, from the events themselves
@pytest.fixture(scope="module")
def offline_fleet() -> list[Event]:
    return fleet_events(RACKS, PER_RACK, duration_s=120.0, faults=FAULTS)


@pytest.mark.parametrize("t", [30.0, 60.0, 100.0])
def test_the_fleet_tables_figures_equal_the_events_grouped_by_rack(
    offline_fleet: list[Event], t: float
) -> None:
    core = RackCore()
    for ev in offline_fleet:
        if ev.t > t:
            break
        core.ingest(ev)
    fleet = core.snapshot().fleet
    assert fleet is not None
    start = offline_fleet[0]
    assert isinstance(start, RunStarted)
    facts = facts_at(offline_fleet, t)
    assert fleet.racks == ("rack01", "rack02", "rack03")
    for r in range(RACKS):
        mine = slice(r * PER_RACK, (r + 1) * PER_RACK)
        want = expected_rack(facts[mine], t)
        assert fleet.nodes_total[r] == PER_RACK
        assert fleet.nodes_up[r] == want["nodes_up"]
        assert fleet.gpus[r] == PER_RACK * GPUS
        assert fleet.tokens_per_s[r] == pytest.approx(want["tokens_per_s"], rel=1e-9)
        assert fleet.per_gpu_tokens_per_s[r] == pytest.approx(want["per_gpu"], rel=1e-9)
        assert fleet.power_w[r] == pytest.approx(want["power_w"], rel=1e-9)
        assert fleet.tokens_per_joule[r] == pytest.approx(want["tokens_per_joule"], rel=1e-9)
        assert fleet.spread_pct[r] == pytest.approx(want["spread_pct"], rel=1e-9)
        assert fleet.worst_node[r] == start.nodes[mine][want["worst"]]
        assert fleet.worst_delta_pct[r] == pytest.approx(want["worst_delta_pct"], rel=1e-9)
        assert fleet.worst_cause[r] == ""
        assert list(fleet.nodes_of(r)) == list(range(r * PER_RACK, (r + 1) * PER_RACK))
    down_now = 40.0 <= t < 70.0
    assert fleet.nodes_up.tolist() == [4, 3 if down_now else 4, 4]
    assert fleet.state == ("up", "up", "up")


# ---------------------------------------------------------------- a rack as a run of its own
def same(a: Any, b: Any, path: str = "") -> list[str]:
    """Where two snapshots (or parts) differ: exact, NaN equal to NaN. A node table's columns made when
    first read (:class:`Later`) are read and compared like the others."""
    if isinstance(a, Later):
        return same(a.get(), b.get(), path.removesuffix(".later"))
    if dataclasses.is_dataclass(a) and not isinstance(a, type):
        return [
            d
            for f in dataclasses.fields(a)
            for d in same(getattr(a, f.name), getattr(b, f.name), f"{path}.{f.name}")
        ]
    if isinstance(a, np.ndarray):
        ok = a.shape == b.shape and np.array_equal(a, b, equal_nan=a.dtype.kind == "f")
        return [] if ok else [path]
    if isinstance(a, dict):
        if a.keys() != b.keys():
            return [path]
        return [d for k in a for d in same(a[k], b[k], f"{path}[{k}]")]
    if isinstance(a, tuple | list):
        if len(a) != len(b):
            return [path]
        return [d for k, (x, y) in enumerate(zip(a, b, strict=True)) for d in same(x, y, f"{path}[{k}]")]
    if isinstance(a, float) and math.isnan(a):
        return [] if isinstance(b, float) and math.isnan(b) else [path]
    return [] if a == b else [path]


@pytest.mark.parametrize(("scenario", "t"), [("Offline", 60.0), ("Server", 90.0), ("Offline", math.inf)])
def test_a_racks_snapshot_is_the_snapshot_of_a_run_of_its_nodes_alone(scenario: str, t: float) -> None:
    """rack02 of the fleet, against a core fed only rack02's events (node06 down from 40 s to 70 s):
    every figure, node row, GPU, latency, the timeline, the verdict with its history, and at the end the
    summary and banner are the same. What differs is said: the run's meta names the rack and its fleet,
    energy is summed in another order, and the rack-wide verdict alerts belong to the fleet."""
    events = fleet_events(RACKS, PER_RACK, scenario=scenario, duration_s=120.0, faults=FAULTS)
    fleet, alone = RackCore(), RackCore()
    for ev in events:
        if ev.t <= t:
            fleet.ingest(ev)
    for ev in rack_events(events, PER_RACK, PER_RACK, "rack02"):
        if ev.t <= t:
            alone.ingest(ev)
    got, want = fleet.rack_snapshot("rack02"), alone.snapshot()
    start = events[0]
    assert isinstance(start, RunStarted)
    assert got is not None
    assert got.fleet is None
    assert want.fleet is None
    assert got.run.meta == {**want.run.meta, "rack": "rack02", "fleet": start.name}

    # Its nodes' alerts are its own; of the run-wide ones, the settings check (said once for the whole
    # run, naming the first node) is the run's, and the verdict's and SLA's are the fleet's.
    # (A straggler is judged against the fleet's median node: when it is raised and cleared is the
    # fleet's judgement, so those alerts are left out here.)
    def mine(alerts: tuple[Alert, ...]) -> list[Alert]:
        return [a for a in alerts if a.node and a.kind != "straggler"]

    assert mine(got.alerts) == mine(want.alerts)
    fleet_kinds = ("verdict", "margin_", "sla_")
    assert {a.kind for a in got.alerts if not a.node} == {
        a.kind for a in want.alerts if not a.node and not a.kind.startswith(fleet_kinds)
    }
    differ = set(same(got, want)) - {".run.meta", ".alerts", ".active_alerts"}
    differ -= {p for p in differ if p.startswith((".alerts[", ".active_alerts["))}
    # A straggler's cause hint, like the straggler itself, is judged against the fleet's nodes (its
    # peers' typical clock and rate), so when it began may differ from a run of the rack alone.
    differ -= {p for p in differ if p.startswith((".nodes.causes[", ".nodes.cause_text["))}
    # Energy, and what is divided by it, is summed node by node in another order: equal to rounding.
    energy = {".aggregate.energy_j", ".summary.power_mean_w", ".summary.tokens_per_joule"}
    energy |= {".run_figures.power_mean_w", ".run_figures.tokens_per_joule"}
    assert differ <= energy
    for path in differ:
        a, b = got, want
        for part in path.strip(".").split("."):
            a, b = getattr(a, part), getattr(b, part)
        assert a == pytest.approx(b, rel=1e-12)
    assert got.nodes.names == tuple(f"node{i:02d}" for i in range(5, 9))
    if math.isinf(t):
        assert got.ended
        assert got.summary is not None
        assert got.banner == want.banner
    # The fleet table's projected verdict of rack02 is the rack's own forecast at the last verdict tick.
    table = fleet.snapshot().fleet
    assert table is not None
    assert want.verdict is not None
    history = want.verdict.history
    assert history.times.size
    if not math.isinf(t):
        assert table.projected_tokens_per_s[1] == pytest.approx(history.value[-1], rel=1e-12)
        assert np.array_equal(table.projected_valid[1:2], history.valid[-1:], equal_nan=True)
    else:
        assert want.verdict.forecast.valid is not None
        assert table.projected_valid[1] == float(want.verdict.forecast.valid)


def test_a_run_of_one_rack_has_no_fleet_and_unknown_racks_have_no_snapshot(
    offline_fleet: list[Event],
) -> None:
    core = RackCore()
    for ev in rack_events(offline_fleet, 0, PER_RACK, "rack01"):
        if ev.t <= 20:
            core.ingest(ev)
    assert core.snapshot().fleet is None
    assert core.racks == ()
    assert core.rack_snapshot("rack01") is None
    fleet = RackCore()
    assert fleet.rack_snapshot("rack01") is None  # no run yet
    for ev in offline_fleet:
        if ev.t <= 20:
            fleet.ingest(ev)
    assert fleet.racks == ("rack01", "rack02", "rack03")
    assert fleet.rack_snapshot("rack04") is None


def test_the_racks_forecasts_are_kept_in_the_state_so_a_replays_keyframe_has_them(
    offline_fleet: list[Event],
) -> None:
    core = RackCore()
    for ev in offline_fleet:
        if ev.t <= 50:
            core.ingest(ev)
    twin = core.clone()
    for ev in offline_fleet:
        if 50 < ev.t <= 80:
            core.ingest(ev)
            twin.ingest(ev)
    a, b = core.snapshot().fleet, twin.snapshot().fleet
    assert a is not None
    assert b is not None
    assert np.array_equal(a.projected_tokens_per_s, b.projected_tokens_per_s)
    assert np.isfinite(a.projected_tokens_per_s).all()


def test_a_rack_whose_every_node_is_down_is_down_with_no_figures() -> None:
    faults = ",".join(f"node{i:02d}:down@30" for i in range(9, 13))  # all of rack03
    core = RackCore()
    for ev in fleet_events(RACKS, PER_RACK, duration_s=120.0, faults=faults):
        if ev.t <= 50:
            core.ingest(ev)
    fleet = core.snapshot().fleet
    assert fleet is not None
    assert fleet.state == ("up", "up", "down")
    assert fleet.nodes_up.tolist() == [4, 4, 0]
    assert math.isnan(fleet.tokens_per_s[2])
    assert math.isnan(fleet.power_w[2])
    assert math.isnan(fleet.spread_pct[2])
    assert fleet.worst_node[2] == ""
    assert np.isfinite(fleet.tokens_per_s[:2]).all()
