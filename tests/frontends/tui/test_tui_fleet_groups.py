"""The fleet board of racks that stand in sites and rows: a replay of a 6-rack recording placed as
``sim --racks 6 --sites 2 --rows 2`` places it (node40 of rack03 down from 0:30), paused at 1:00. The
board leads with one row per site, each equal to its group in the core's snapshot and to its racks'
rows summed here; Enter goes down a level (a site's rows, a row's racks, a rack's dashboard) and
Escape back up, the cursor on the group it left. An SVG snapshot of the sites' board.

Update the snapshot after an intended change with ``pytest tests/frontends/tui/test_tui_fleet_groups.py
--snapshot-update -n 0`` and look at the new SVG before committing it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from textual.pilot import Pilot
from textual.strip import Strip

from tests.core.fleet.fleet_runs import fleet_events
from tests.frontends.tui.apps import core_until, ready, replay_app, settle
from tests.frontends.tui.recordings import write_recording
from tokenwatch.base.events import RunStarted
from tokenwatch.base.formatting import group
from tokenwatch.core.fleet.groups import FleetGroups
from tokenwatch.frontends.tui.app import TokenwatchApp
from tokenwatch.frontends.tui.screens.dashboard import DashboardScreen
from tokenwatch.frontends.tui.screens.fleet_screen import FleetScreen, level_view
from tokenwatch.frontends.tui.widgets.fleet_board import FleetBoard
from tokenwatch.frontends.tui.widgets.group_board import GroupBoard
from tokenwatch.inputs.sim.rack_places import sim_rack_places

SIZE = (120, 40)
PER_RACK = 6
AT_S = 60.0
SnapCompare = Callable[..., bool]


@pytest.fixture(scope="module")
def grouped_recording(tmp_path_factory: pytest.TempPathFactory) -> Path:
    events = fleet_events(6, PER_RACK, duration_s=120.0, faults="node16:down@30")
    start = events[0]
    assert isinstance(start, RunStarted)
    events[0] = dataclasses.replace(start, meta={**start.meta, "rack_places": sim_rack_places(6, 2, 2)})
    return write_recording(tmp_path_factory.mktemp("groups") / "groups.jsonl.zst", iter(events))


def fleet_screen(app: TokenwatchApp) -> FleetScreen:
    screen = app.screen
    assert isinstance(screen, FleetScreen)
    return screen


def shown_rows(board: GroupBoard | FleetBoard) -> list[str]:
    """The first cell of each row drawn, top to bottom."""
    board.scroll_to(y=0, animate=False)
    return [board.render_line(y + 1).text.split()[0] for y in range(len(board._order))]


def path_of(screen: FleetScreen) -> tuple[str, ...]:
    """The level the board shows (read afresh: keys change it)."""
    return screen.path


async def press(pilot: Pilot[None], app: TokenwatchApp, key: str) -> None:
    await pilot.press(key)
    await pilot.pause()
    app.refresh_data(force=True)
    await pilot.pause()


async def test_the_board_leads_with_the_sites_and_enter_goes_down_a_level(grouped_recording: Path) -> None:
    app = replay_app(grouped_recording, AT_S)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        screen = fleet_screen(app)
        groups_board, racks_board = screen.query_one(GroupBoard), screen.query_one(FleetBoard)
        assert groups_board.display
        assert not racks_board.display
        assert shown_rows(groups_board) == ["site01", "site02"]
        snap = app.latest
        assert snap.fleet is not None
        assert snap.fleet_groups is not None
        sites = snap.fleet_groups.site
        assert sites is not None
        # Each site's row: its group's figures, which are its racks' rows summed (worked out here).
        for g, site in enumerate(("site01", "site02")):
            cells = GroupBoard.cells(sites, g)
            racks = [r for r in range(len(snap.fleet)) if r // 3 == g]
            tokens = float(np.nansum(snap.fleet.tokens_per_s[racks]))
            assert cells["group"] == site
            assert cells["now"] == group(tokens)
            up = int(snap.fleet.nodes_up[racks].sum())
            assert cells["nodes"] == f"{up}/{PER_RACK * 3}"
            line = groups_board.render_line(1 + int(groups_board._position[g])).text
            assert group(tokens) in line
        assert GroupBoard.cells(sites, 0)["nodes"] == "17/18"  # node16 of rack03, site01, is down
        # Down a level: site01's rows; then row02 of site01: its racks alone; then a rack's dashboard.
        await press(pilot, app, "enter")
        assert path_of(screen) == ("site01",)
        assert shown_rows(groups_board) == ["row01", "row02"]
        assert "site01 · 2 rows" in str(groups_board.border_title)
        await press(pilot, app, "down")
        await press(pilot, app, "enter")
        assert path_of(screen) == ("site01", "site01/row02")
        assert racks_board.display
        assert not groups_board.display
        assert shown_rows(racks_board) == ["rack03"]  # site01's three racks: rack01 and rack02 in row01
        assert str(racks_board.border_title).startswith("site01 · row02 · 1 racks · 5/6 nodes up")
        await press(pilot, app, "enter")
        dashboard = app.screen
        assert isinstance(dashboard, DashboardScreen)
        assert dashboard.rack == "rack03"
        # Back up, level by level, the cursor on the group just left.
        await press(pilot, app, "escape")
        assert fleet_screen(app) is screen
        assert path_of(screen) == ("site01", "site01/row02")
        await press(pilot, app, "escape")
        assert path_of(screen) == ("site01",)
        assert groups_board.cursor_key == "site01/row02"
        await press(pilot, app, "escape")
        assert path_of(screen) == ()
        assert groups_board.cursor_key == "site01"
        assert not screen.check_action("up_level", ())
        await press(pilot, app, "escape")  # at the top: nowhere to go, nothing happens
        assert fleet_screen(app) is screen


async def test_s_sorts_the_groups_by_the_next_column(grouped_recording: Path) -> None:
    app = replay_app(grouped_recording, AT_S)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        board = fleet_screen(app).query_one(GroupBoard)
        await press(pilot, app, "s")
        assert board.sort_key == "racks"
        await press(pilot, app, "s")
        assert board.sort_key == "nodes"
        # site01 has a node down: fewer nodes up of all, first in ascending order.
        assert shown_rows(board) == ["site01", "site02"]
        await press(pilot, app, "S")
        assert shown_rows(board) == ["site02", "site01"]


def test_a_level_that_is_gone_is_left_for_the_one_above(grouped_recording: Path) -> None:

    snap = core_until(grouped_recording, AT_S).snapshot()
    groups = snap.fleet_groups
    assert isinstance(groups, FleetGroups)
    assert level_view(groups, ("site09",)).path == ()
    view = level_view(groups, ("site02", "site01/row01"))  # a row of another site
    assert view.path == ("site02",)
    assert view.rows is not None
    assert view.rows.tolist() == [2, 3]
    racks = level_view(groups, ("site02", "site02/row02")).racks
    assert racks is not None
    assert racks.tolist() == [5]  # site02: rack04, rack05 in row01, rack06 in row02
    assert level_view(None, ("site01",)).level is None  # no groups: the racks, all of them


def test_snapshot_of_the_sites_board(snap_compare: SnapCompare, grouped_recording: Path) -> None:
    """6 racks at 1:00 in two sites of three racks: site01 with 17/18 nodes up (node16 down)."""
    app = replay_app(grouped_recording, AT_S)
    assert snap_compare(app, terminal_size=SIZE, run_before=ready(app))


async def test_a_new_snapshot_redraws_only_the_rows_that_changed(grouped_recording: Path) -> None:
    """Paused: a refresh with the same figures draws no line of the sites' board again (before, all of
    its lines, most of them blank); one site's throughput changed: that site's line alone, showing it."""
    app = replay_app(grouped_recording, AT_S)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        board = fleet_screen(app).query_one(GroupBoard)
        drawn: list[int] = []
        draw = board.render_line

        def counted(y: int) -> Strip:
            drawn.append(y)
            return draw(y)

        board.render_line = counted  # type: ignore[method-assign]
        board.refresh()
        await pilot.pause()
        assert len(drawn) >= board.scrollable_content_region.height > 3  # every line, once
        drawn.clear()
        app.refresh_data(force=True)  # the same figures (paused)
        await pilot.pause()
        assert drawn == []
        level, rows = board.level, board.rows
        assert level is not None
        changed = int(board._order[1])
        tokens = level.tokens_per_s.copy()
        tokens[changed] = 1_234_567.0
        board.update_groups(dataclasses.replace(level, tokens_per_s=tokens), rows, board.scope)
        await pilot.pause()
        assert drawn == [2]  # the header, then the first row, then this one
        assert group(1_234_567.0) in board.render_line(2).text
        assert group(1_234_567.0) not in board.render_line(1).text
