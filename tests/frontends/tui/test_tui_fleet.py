"""The fleet board: a replay of a 3-rack recording (18 gb300 nodes a rack, node40 of rack03 down from
0:30, node20 of rack02 slow from 0:10) paused at 1:00, the simulator's ``--racks``, Pilot keys, and SVG
snapshots of the board. The recording is made here from the seeded simulator (a fraction of a second).

Update the snapshots after an intended change with ``pytest tests/frontends/tui/test_tui_fleet.py
--snapshot-update`` and look at the new SVGs before committing them.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from textual.binding import Binding
from textual.pilot import Pilot

from tests.conftest import wait_until_async
from tests.core.fleet.fleet_runs import GPUS, expected_rack, facts_at, fleet_events
from tests.frontends.tui.apps import OFFLINE, ready, replay_app, settle
from tests.frontends.tui.recordings import write_recording
from tokenwatch.base.formatting import group
from tokenwatch.cli.parser import build_parser
from tokenwatch.cli.sim_settings import sim_settings
from tokenwatch.core import RackCore
from tokenwatch.core.snapshot import RackSnapshot
from tokenwatch.frontends.tui.app import TokenwatchApp
from tokenwatch.frontends.tui.keys import KEY_TABLE
from tokenwatch.frontends.tui.screens.dashboard import DashboardScreen
from tokenwatch.frontends.tui.screens.fleet_screen import FleetScreen
from tokenwatch.frontends.tui.screens.node_screen import NodeScreen
from tokenwatch.frontends.tui.theme_loader import shipped_dir
from tokenwatch.frontends.tui.widgets.end_banner import EndBanner
from tokenwatch.frontends.tui.widgets.fleet_board import SORT_KEYS, FleetBoard, fleet_order
from tokenwatch.frontends.tui.widgets.node_table import NodeTable
from tokenwatch.inputs.sim.collector import SimulatorCollector
from tokenwatch.session import Session

SIZE = (120, 40)
PER_RACK = 18
AT_S = 60.0
FAULTS = "node40:down@30,node20:slow@10"
SnapCompare = Callable[..., bool]


@pytest.fixture(scope="module")
def fleet_recording(tmp_path_factory: pytest.TempPathFactory) -> Path:
    events = fleet_events(3, PER_RACK, duration_s=120.0, faults=FAULTS)
    return write_recording(tmp_path_factory.mktemp("fleet") / "fleet.jsonl.zst", iter(events))


def board_of(app: TokenwatchApp) -> FleetBoard:
    screen = app.screen
    assert isinstance(screen, FleetScreen)
    return screen.query_one(FleetBoard)


async def open_dashboard(pilot: Pilot[None], app: TokenwatchApp, key: str, rack: str | None) -> RackSnapshot:
    """Press ``key`` on the board: the dashboard it opens shows ``rack`` (None: every node); its node
    table's snapshot once drawn."""
    await pilot.press(key)
    await pilot.pause()
    screen = app.screen
    assert isinstance(screen, DashboardScreen)
    assert screen.rack == rack
    app.refresh_data(force=True)
    await pilot.pause()
    snap = screen.query_one(NodeTable).snapshot
    assert snap is not None
    return snap


def row_text(board: FleetBoard, rack: str) -> str:
    """The rack's row as drawn on the screen (its strip's text)."""
    assert board.table is not None
    row = int(board._position[board.table.index(rack)])
    board.scroll_to(y=0, animate=False)
    return board.render_line(row + 1).text


async def test_a_fleet_replay_leads_with_the_board_and_its_rows_are_the_racks_figures(
    fleet_recording: Path,
) -> None:
    """Each rack's row (tokens/s, per GPU, spread, nodes up, power, tokens/J, worst node and how far
    it is below its rack's median) equals the recording's events grouped by rack here, and is drawn."""
    app = replay_app(fleet_recording, AT_S)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        board = board_of(app)
        table = board.table
        assert table is not None
        events = fleet_events(3, PER_RACK, duration_s=120.0, faults=FAULTS)
        facts = facts_at(events, AT_S)
        for r, rack in enumerate(("rack01", "rack02", "rack03")):
            want = expected_rack(facts[r * PER_RACK : (r + 1) * PER_RACK], AT_S)
            assert table.racks[r] == rack
            assert table.tokens_per_s[r] == pytest.approx(want["tokens_per_s"], rel=1e-9)
            assert table.per_gpu_tokens_per_s[r] == pytest.approx(want["per_gpu"], rel=1e-9)
            assert table.spread_pct[r] == pytest.approx(want["spread_pct"], rel=1e-9)
            assert table.nodes_up[r] == want["nodes_up"]
            assert table.power_w[r] == pytest.approx(want["power_w"], rel=1e-9)
            assert table.tokens_per_joule[r] == pytest.approx(want["tokens_per_joule"], rel=1e-9)
            assert table.worst_node[r] == f"node{r * PER_RACK + want['worst'] + 1:02d}"
            assert table.worst_delta_pct[r] == pytest.approx(want["worst_delta_pct"], rel=1e-9)
            text = row_text(board, rack)
            assert text.startswith(rack)
            assert group(want["tokens_per_s"]) in text
            assert f"{want['nodes_up']}/{PER_RACK}" in text
            assert f"{want['spread_pct']:.1f}%" in text
            assert f"{want['worst_delta_pct']:+.1f}%" in text
        assert table.worst_node[1] == "node20"  # the slow one
        assert table.gpus.tolist() == [PER_RACK * GPUS] * 3
        assert np.isfinite(table.projected_tokens_per_s).all()


async def test_a_rack_with_a_down_node_shows_it_on_the_board_and_in_its_dashboard(
    fleet_recording: Path,
) -> None:
    app = replay_app(fleet_recording, AT_S)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        board = board_of(app)
        assert board.table is not None
        assert board.table.nodes_up.tolist() == [18, 18, 17]
        assert "17/18" in row_text(board, "rack03")
        assert "18/18" in row_text(board, "rack01")
        assert board.border_title == "Fleet · 3 racks · 53/54 nodes up"
        await pilot.press("end")
        rows = await open_dashboard(pilot, app, "enter", "rack03")
        i = rows.nodes.index("node40")
        assert rows.nodes.state[i] == "down"
        assert rows.aggregate.nodes_up == 17
        assert [s.name for s in rows.stopped_nodes] == ["node40"]


async def test_s_sorts_the_board_shift_s_reverses_and_the_cursor_stays_on_its_rack(
    fleet_recording: Path,
) -> None:
    app = replay_app(fleet_recording, AT_S)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        board = board_of(app)
        table = board.table
        assert table is not None
        assert board.sort_key == "rack"
        keys = []
        for _ in SORT_KEYS:
            await pilot.press("s")
            keys.append(board.sort_key)
        assert keys == [*SORT_KEYS[1:], SORT_KEYS[0]]
        while board.sort_key != "now":
            await pilot.press("s")
        rates = table.tokens_per_s.tolist()
        slowest_first = [table.racks[i] for i in sorted(range(3), key=lambda i: rates[i])]
        assert [table.racks[i] for i in board._order] == slowest_first
        await pilot.press("S")
        assert board.descending
        assert [table.racks[i] for i in board._order] == slowest_first[::-1]
        while board.sort_key != "nodes":
            await pilot.press("s")
        assert table.racks[board._order[0]] == "rack03"  # the rack with a node down first
        assert board.cursor_rack == "rack03"  # a new order is read from the top


def test_the_board_order_puts_missing_figures_last_whatever_the_direction() -> None:
    core = RackCore()
    faults = ",".join(f"node{i:02d}:down@20" for i in range(37, 55))  # all of rack03
    for ev in fleet_events(3, PER_RACK, duration_s=120.0, faults=faults):
        if ev.t <= 40:
            core.ingest(ev)
    table = core.snapshot().fleet
    assert table is not None
    assert math.isnan(table.tokens_per_s[2])
    for descending in (False, True):
        assert fleet_order(table, "now", descending)[-1] == 2
    assert table.state[2] == "down"
    assert FleetBoard.cells(table, 2)["nodes"] == "DOWN"


async def test_enter_opens_the_racks_dashboard_with_its_18_nodes_and_escape_returns(
    fleet_recording: Path,
) -> None:
    app = replay_app(fleet_recording, AT_S)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        board = board_of(app)
        await pilot.press("down")
        assert board.cursor_rack == "rack02"
        snap = await open_dashboard(pilot, app, "enter", "rack02")
        assert snap.nodes.names == tuple(f"node{i:02d}" for i in range(19, 37))
        assert snap.run.name.endswith("· rack02")
        assert snap.aggregate.gpus == PER_RACK * GPUS
        core_rack = app.session.core.rack_snapshot("rack02")
        assert core_rack is not None
        assert snap.aggregate.tokens_per_s == core_rack.aggregate.tokens_per_s
        # A node of the rack opens as usual, and [ ] steps through the rack's nodes only.
        await pilot.press("enter")
        await pilot.pause()
        node_screen = app.screen
        assert isinstance(node_screen, NodeScreen)
        assert node_screen.nodes == snap.nodes.names
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, DashboardScreen)
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, FleetScreen)
        assert board_of(app).cursor_rack == "rack02"


async def test_a_shows_every_node_of_the_fleet_with_a_heatmap_row_per_rack(fleet_recording: Path) -> None:
    app = replay_app(fleet_recording, AT_S)
    async with app.run_test(size=(200, 60)) as pilot:
        await settle(pilot, app)
        snap = await open_dashboard(pilot, app, "a", None)
        assert len(snap.nodes.names) == 3 * PER_RACK
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, FleetScreen)


async def test_sim_racks_leads_with_the_board() -> None:
    """``tokenwatch sim --racks 3``: the simulator says its racks (18 nodes each) and the board leads."""
    args = build_parser().parse_args(["sim", "--racks", "3", "--duration", "1m", "--speed", "0"])
    settings = sim_settings(args)
    assert settings.extra_meta == {"nodes_per_rack": 18}
    session = Session(RackCore(), [SimulatorCollector(settings, speed=0)], flush_interval_s=None)
    app = TokenwatchApp(session, mode="sim", speed=0, theme_dirs=[shipped_dir()])
    async with app.run_test(size=SIZE) as pilot:
        await wait_until_async(
            lambda: isinstance(app.screen, FleetScreen) and session.core.ended,
            "the board on screen and the run's end",
            pause=pilot.pause,
        )
        app.refresh_data(force=True)
        await pilot.pause()
        table = board_of(app).table
        assert table is not None
        assert table.racks == ("rack01", "rack02", "rack03")
        assert table.nodes_total.tolist() == [18, 18, 18]
        assert table.first_node.tolist() == [0, 18, 36]


async def test_a_run_of_one_rack_keeps_the_dashboard() -> None:
    app = replay_app(OFFLINE, 300)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        assert isinstance(app.screen, DashboardScreen)
        assert app.latest.fleet is None
        assert not app.screen.check_action("back_to_fleet", ())
        await pilot.press("escape")
        assert isinstance(app.screen, DashboardScreen)


def test_every_fleet_binding_is_in_the_key_table() -> None:
    listed = " ".join(key for _, keys in KEY_TABLE for key, _ in keys)
    for owner in (FleetScreen, FleetBoard, DashboardScreen):
        for binding in owner.BINDINGS:
            assert isinstance(binding, Binding)
            for key in binding.key.split(","):
                if key in ("up", "down", "pageup", "pagedown", "home", "end"):
                    continue  # the board's movement keys (listed together)
                assert key in listed, key


# ---------------------------------------------------------------- snapshots
@pytest.mark.parametrize("size", [(120, 40), (200, 60)], ids=["120x40", "200x60"])
def test_snapshot_of_the_fleet_board(
    snap_compare: SnapCompare, fleet_recording: Path, size: tuple[int, int]
) -> None:
    """3 racks at 1:00: rack03 17/18 nodes up (node40 down), rack02's worst node node20 (slow); at
    200x60 the fleet's throughput and alerts beside the board."""
    app = replay_app(fleet_recording, AT_S)
    assert snap_compare(app, terminal_size=size, run_before=ready(app))


async def test_a_refresh_in_the_gap_while_a_screen_is_taken_down_is_no_crash(fleet_recording: Path) -> None:
    """On a loaded machine the refresh timer can fire while the board's widgets are half gone (a screen
    being replaced): the refresh is skipped and the next draws what is there, never a traceback (a
    replay of 8 racks crashed with "No nodes match 'EndBanner' on FleetScreen")."""
    app = replay_app(fleet_recording, AT_S)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        board = app.screen
        assert isinstance(board, FleetScreen)
        await board.query_one(EndBanner).remove()  # the gap: one of its widgets already gone
        app.refresh_data(force=True)  # raised NoMatches from inside the timer's callback
        await pilot.pause()
        await board.mount(EndBanner(id="end-banner"), before=1)
        app.refresh_data(force=True)  # the next refresh draws the screen as it is
        await pilot.pause()
        assert board.query_one(EndBanner).snapshot is app.latest
