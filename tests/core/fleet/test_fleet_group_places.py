"""Where a fleet's racks stand is kept by the fleet's state, not by the groups module: two runs watched in
one process each group by their own places; a rack that appears after the start (the server lists it
later) joins its site and row where the run's places name it, and the "(none)" group where they do not,
its figures counted there, never lost; the snapshot's groups are those made afresh from the same table."""

from __future__ import annotations

import dataclasses

import numpy as np

from tests.core.fleet.test_fleet_groups import check_groups
from tests.core.fleet.test_fleet_state import batch, figures, started
from tokenwatch.core import RackCore
from tokenwatch.core.fleet.groups import NO_LABEL, fleet_groups

DECLARED = ("rack01", "rack02", "rack03")


def watched(places: dict[str, list[str]]) -> RackCore:
    """A fleet known rack by rack, its three declared racks placed by ``places``."""
    start = started(DECLARED)
    core = RackCore()
    core.ingest(dataclasses.replace(start, meta={**start.meta, "rack_places": places}))
    return core


def test_two_runs_in_one_process_keep_their_own_places() -> None:
    first = watched({"rack01": ["a", ""], "rack02": ["a", ""], "rack03": ["b", ""]})
    second = watched({"rack01": ["x", ""], "rack02": ["y", ""], "rack03": ["y", ""]})
    rows = {r: figures(1000.0, 400.0) for r in DECLARED}
    for t in (5.0, 10.0):  # each snapshot of one run between two of the other
        for core, keys, sizes in ((first, ("a", "b"), [2, 1]), (second, ("x", "y"), [1, 2])):
            core.ingest(batch(t, rows))
            groups = core.snapshot().fleet_groups
            assert groups is not None
            assert groups.site is not None
            assert groups.site.keys == keys
            assert groups.site.racks_total.tolist() == sizes


def test_a_rack_that_appears_later_joins_its_place_or_none() -> None:
    """rack04 is placed by the run's places though the first batches lack it; rack05 is named by neither:
    once they come, rack04 counts in site b and rack05 in "(none)", each group its racks summed."""
    places = {"rack01": ["a", "r1"], "rack02": ["a", "r2"], "rack03": ["b", "r1"], "rack04": ["b", "r1"]}
    core = watched(places)
    rows = {r: figures(1000.0 * (i + 1), 400.0) for i, r in enumerate(DECLARED)}
    core.ingest(batch(5.0, rows))
    before = core.snapshot().fleet_groups
    assert before is not None
    assert before.site is not None
    assert before.site.racks_total.tolist() == [2, 1]
    rows |= {"rack04": figures(7000.0, 500.0), "rack05": figures(9000.0, 600.0)}
    core.ingest(batch(10.0, rows))
    snap = core.snapshot()
    table, groups = snap.fleet, snap.fleet_groups
    assert table is not None
    assert groups is not None
    assert groups.site is not None
    assert table.racks == (*DECLARED, "rack04", "rack05")
    assert groups.site.keys == (NO_LABEL, "a", "b")
    assert groups.site.racks_total.tolist() == [1, 2, 2]
    b = groups.site.index("b")
    assert groups.site.tokens_per_s[b] == 3000.0 + 7000.0  # rack03 and rack04
    assert groups.site.tokens_per_s[groups.site.index(NO_LABEL)] == 9000.0  # rack05's, not lost
    assert groups.row is not None
    assert f"{NO_LABEL}/{NO_LABEL}" in groups.row.keys
    every = {**places, "rack05": ["", ""]}
    assert (
        check_groups(
            table, groups, {k: [v[0] or NO_LABEL, v[1] or NO_LABEL] for k, v in every.items()}, "later"
        )
        == 3 + 4
    )


def test_the_kept_groups_are_the_groups_made_afresh() -> None:
    core = watched({"rack01": ["a", "r1"], "rack02": ["a", "r2"], "rack03": ["b", "r1"]})
    core.ingest(batch(5.0, {r: figures(1000.0, 400.0) for r in DECLARED}))
    core.ingest(batch(10.0, {"rack01": figures(1500.0, 450.0), "rack02": figures(900.0, 300.0)}))
    snap = core.snapshot(60.0)  # rack03 stale by now
    assert snap.fleet is not None
    kept, fresh = snap.fleet_groups, fleet_groups(snap.fleet, snap.run.meta)
    assert kept is not None
    assert fresh is not None
    for a, b in ((kept.site, fresh.site), (kept.row, fresh.row)):
        assert a is not None
        assert b is not None
        for field in dataclasses.fields(a):
            x, y = getattr(a, field.name), getattr(b, field.name)
            if isinstance(x, np.ndarray):
                assert np.array_equal(x, y, equal_nan=True), field.name
            else:
                assert x == y, field.name
