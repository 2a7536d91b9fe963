"""The fleet's racks grouped by site and row: each group's figures are its racks' rows summed as the
fleet sums racks, checked against sums worked out here from the board's rack rows, at every tick of a
simulated fleet with a node down and a rack silenced; and on hand-made tables (stale, down, INVALID,
no projection) against figures written out by hand."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from tests.core.fleet.test_fleet_state import batch, figures, started
from tokenwatch.base.events import Event
from tokenwatch.core import RackCore
from tokenwatch.core.fleet.groups import FleetGroups, GroupTable, fleet_groups, groups_json
from tokenwatch.core.fleet.table import FleetTable
from tokenwatch.inputs.sim.faults import parse_faults
from tokenwatch.inputs.sim.profile import load_profile
from tokenwatch.inputs.sim.rack_places import places_problem, sim_rack_places
from tokenwatch.inputs.sim.rack_sim import RackSimulation, SimSettings

PER_RACK = 3


def grouped_fleet(
    racks: int, sites: int, rows: int, faults: str = "", duration_s: float = 90.0
) -> list[Event]:
    """A simulated fleet of ``racks`` racks of three nodes, placed as ``sim --sites/--rows`` places them."""
    profile = load_profile("gb300-nvl72")
    profile = dataclasses.replace(
        profile,
        name="grouped",
        nodes=PER_RACK * racks,
        total_samples=profile.total_samples * PER_RACK * racks // profile.nodes,
    )
    meta = {"nodes_per_rack": PER_RACK, "rack_places": sim_rack_places(racks, sites, rows)}
    settings = SimSettings(
        profile,
        seed=5,
        duration_s=duration_s,
        faults=parse_faults(faults, profile.node_names()) if faults else (),
        extra_meta=meta,
    )
    return list(RackSimulation(settings).events())


def core_at_end(events: list[Event]) -> RackCore:
    core = RackCore()
    for ev in events:
        core.ingest(ev)
    return core


def sums_by_hand(table: FleetTable, members: list[int]) -> dict[str, float]:
    """A group's figures from its racks' rows, in plain Python."""
    tokens = [float(table.tokens_per_s[r]) for r in members if math.isfinite(table.tokens_per_s[r])]
    power = [float(table.power_w[r]) for r in members if math.isfinite(table.power_w[r])]
    gpus = sum(int(table.gpus[r]) for r in members)
    token_sum = sum(tokens) if tokens else math.nan
    power_sum = sum(power) if power else math.nan
    projected = [float(table.projected_tokens_per_s[r]) for r in members]
    valid = [float(table.projected_valid[r]) for r in members]
    return {
        "racks": len(members),
        "racks_up": sum(table.state[r] == "up" for r in members),
        "racks_stale": sum(table.state[r] == "stale" for r in members),
        "racks_down": sum(table.state[r] == "down" for r in members),
        "nodes": sum(int(table.nodes_total[r]) for r in members),
        "nodes_up": sum(int(table.nodes_up[r]) for r in members),
        "gpus": gpus,
        "tokens_per_s": token_sum,
        "power_w": power_sum,
        "per_gpu": token_sum / gpus if gpus else math.nan,
        "tpj": token_sum / power_sum if power_sum > 0 else math.nan,
        "projected": sum(projected) if all(math.isfinite(p) for p in projected) else math.nan,
        "valid": 0.0 if 0.0 in valid else (1.0 if all(v == 1.0 for v in valid) else math.nan),
        "stale": float(any(table.state[r] != "up" for r in members)),
    }


def as_figures(level: GroupTable, g: int) -> dict[str, float]:
    return {
        "racks": int(level.racks_total[g]),
        "racks_up": int(level.racks_up[g]),
        "racks_stale": int(level.racks_stale[g]),
        "racks_down": int(level.racks_down[g]),
        "nodes": int(level.nodes_total[g]),
        "nodes_up": int(level.nodes_up[g]),
        "gpus": int(level.gpus[g]),
        "tokens_per_s": float(level.tokens_per_s[g]),
        "power_w": float(level.power_w[g]),
        "per_gpu": float(level.per_gpu_tokens_per_s[g]),
        "tpj": float(level.tokens_per_joule[g]),
        "projected": float(level.projected_tokens_per_s[g]),
        "valid": float(level.projected_valid[g]),
        "stale": float(bool(level.projection_stale[g])),
    }


def assert_same(got: dict[str, float], want: dict[str, float], where: str) -> None:
    for key, value in want.items():
        if math.isnan(value):
            assert math.isnan(got[key]), f"{where} {key}: {got[key]} (want unknown)"
        else:
            assert got[key] == pytest.approx(value, rel=1e-12), f"{where} {key}"


def site_key(place: list[str]) -> str:
    return place[0]


def row_key(place: list[str]) -> str:
    return f"{place[0]}/{place[1]}" if place[0] else place[1]


def check_groups(table: FleetTable, groups: FleetGroups, places: dict[str, list[str]], where: str) -> int:
    """Every group of every level against its racks' rows; the groups' racks are the places given."""
    checked = 0
    for level, pick in ((groups.site, site_key), (groups.row, row_key)):
        if level is None:
            continue
        assert sorted(level.keys) == sorted({pick(places[r]) for r in table.racks})
        for g, key in enumerate(level.keys):
            members = [r for r, rack in enumerate(table.racks) if pick(places[rack]) == key]
            assert level.racks_of(g).tolist() == members
            assert_same(as_figures(level, g), sums_by_hand(table, members), f"{where} {level.level} {key}")
            checked += 1
    return checked


def test_every_group_is_its_racks_summed_at_every_tick() -> None:
    """Six racks in two sites of two rows; a node of rack02 goes down at 0:30, rack05's nodes all stop
    at 0:40 (the rack stale): at each second of the run the groups equal their racks' rows."""
    places = sim_rack_places(6, 2, 2)
    faults = "node04:down@30s,node13:stale@40s,node14:stale@40s,node15:stale@40s"
    events = grouped_fleet(6, 2, 2, faults)
    checked, t_next, saw_stale = 0, 1.0, False
    live = RackCore()
    for ev in events:
        if ev.t >= t_next and live.started:
            snap = live.snapshot(t_next)
            assert snap.fleet is not None
            assert snap.fleet_groups is not None
            checked += check_groups(snap.fleet, snap.fleet_groups, places, f"at {t_next:g} s")
            saw_stale = saw_stale or "stale" in snap.fleet.state
            t_next = math.floor(ev.t) + 1.0
        live.ingest(ev)
    assert saw_stale  # the silenced rack was judged stale on the way, and its groups said so
    assert checked > 80 * 6


def test_the_top_level_is_the_sites_then_each_sites_rows() -> None:
    core = core_at_end(grouped_fleet(7, 2, 2, duration_s=20.0))
    snap = core.snapshot()
    groups = snap.fleet_groups
    assert groups is not None
    assert groups.site is not None
    assert groups.row is not None
    assert groups.top is groups.site
    assert groups.site.keys == ("site01", "site02")
    assert groups.site.racks_total.tolist() == [4, 3]  # 7 racks dealt to two sites
    assert groups.row.keys == ("site01/row01", "site01/row02", "site02/row01", "site02/row02")
    assert groups.row.names == ("row01", "row02", "row01", "row02")
    assert groups.rows_of("site02").tolist() == [2, 3]
    rows = groups_json(groups)
    assert [r["kind"] for r in rows] == ["group"] * 6
    assert [(r["level"], r["site"], r["row"]) for r in rows][1:3] == [
        ("site", "site02", None),
        ("row", "site01", "row01"),
    ]


def test_rows_alone_are_the_top_level() -> None:
    core = core_at_end(grouped_fleet(5, 0, 2, duration_s=10.0))
    groups = core.snapshot().fleet_groups
    assert groups is not None
    assert groups.site is None
    assert groups.row is not None
    assert groups.top.keys == ("row01", "row02")
    assert groups.top.parent == ("", "")


def test_a_fleet_without_places_has_no_groups() -> None:
    core = core_at_end(grouped_fleet(3, 0, 0, duration_s=10.0))
    snap = core.snapshot()
    assert snap.fleet is not None
    assert snap.fleet_groups is None


def test_groups_of_a_fleet_known_rack_by_rack() -> None:
    """Through Prometheus: rack02 down, rack03 INVALID, rack04 never projected; by hand."""
    racks = ("rack01", "rack02", "rack03", "rack04")
    start = started(racks)
    places = {"rack01": ["a", "r1"], "rack02": ["a", "r1"], "rack03": ["b", "r1"], "rack04": ["b", "r2"]}
    core = RackCore()
    core.ingest(dataclasses.replace(start, meta={**start.meta, "rack_places": places}))
    rows = {r: figures(1000.0 * (i + 1), 400.0 * (i + 1)) for i, r in enumerate(racks)}
    rows["rack03"]["projected_valid"] = 0.0
    del rows["rack04"]["projected_tokens_per_s"], rows["rack04"]["projected_valid"]
    core.ingest(batch(5.0, rows, down=("rack02",)))
    snap = core.snapshot()
    assert snap.fleet is not None
    assert snap.fleet_groups is not None
    site = snap.fleet_groups.site
    assert site is not None
    a, b = site.index("a"), site.index("b")
    assert site.tokens_per_s[a] == 1000.0  # rack02 is down: its figures are not known
    assert site.nodes_up[a] == 2
    assert site.nodes_total[a] == 4
    assert (site.racks_up[a], site.racks_down[a]) == (1, 1)
    assert site.state(a) == "up"
    assert bool(site.projection_stale[a])
    assert site.tokens_per_s[b] == 7000.0
    assert site.power_w[b] == 2800.0
    assert site.tokens_per_joule[b] == 2.5
    assert site.per_gpu_tokens_per_s[b] == 7000.0 / 16
    assert site.projected_valid[b] == 0.0  # one INVALID rack makes its site INVALID
    assert math.isnan(site.projected_tokens_per_s[b])  # rack04 projects nothing yet
    assert site.slowest_rack[b] == "rack03"  # 3000 / 8 per GPU against rack04's 4000 / 8
    assert check_groups(snap.fleet, snap.fleet_groups, places, "batch") == 5


def test_places_that_do_not_fit_are_refused() -> None:
    assert places_problem(6, 2, 3) == ""
    assert "more rows" in places_problem(6, 2, 4)
    assert "more sites" in places_problem(3, 4, 0)
    assert "--racks 2" in places_problem(1, 0, 2)
    assert "1 or more" in places_problem(4, -1, 0)


def test_a_malformed_place_is_no_place() -> None:
    table_meta = {"rack_places": {"rack01": ["a"], "rack02": [1, 2], "rack03": "x"}}
    core = core_at_end(grouped_fleet(3, 0, 0, duration_s=5.0))
    snap = core.snapshot()
    assert snap.fleet is not None
    assert fleet_groups(snap.fleet, table_meta) is None
    half = {"rack_places": {"rack01": ["a", ""], "rack02": [1, 2]}}
    groups = fleet_groups(snap.fleet, half)
    assert groups is not None
    assert groups.site is not None
    assert groups.row is None
    assert groups.site.keys == ("(none)", "a")
    assert np.array_equal(groups.site.racks_total, [2, 1])
