"""The main screen of a run of more than one rack: the header, then one row per rack (the fleet board),
the fleet's throughput and its alerts; placed by fleet_screen.tcss.

Enter on a rack opens the ordinary dashboard of that rack (fed the core's snapshot of the rack's nodes
alone); Escape there comes back here. A fleet whose racks stand in sites or rows leads with one row
per group instead (:class:`GroupBoard`): Enter goes down a level (a site's rows, a row's racks, then a
rack's dashboard) and Escape back up (:func:`level_view` says what each level shows). The screen hands
each panel the latest snapshot and turns keys into board or replay actions.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

import numpy as np
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Container
from textual.widget import AwaitMount

from tokenwatch.core.fleet.groups import FleetGroups, GroupTable
from tokenwatch.core.fleet.table import FleetTable
from tokenwatch.core.snapshot import RackSnapshot
from tokenwatch.frontends.tui.screens.dashboard import DashboardScreen
from tokenwatch.frontends.tui.screens.replay_screen import ReplayScreen
from tokenwatch.frontends.tui.widgets.alerts_panel import AlertsPanel
from tokenwatch.frontends.tui.widgets.end_banner import EndBanner
from tokenwatch.frontends.tui.widgets.fleet_board import FleetBoard
from tokenwatch.frontends.tui.widgets.group_board import GroupBoard
from tokenwatch.frontends.tui.widgets.kept_footer import KeptFooter
from tokenwatch.frontends.tui.widgets.replay_bar import ReplayBar, ReplayState
from tokenwatch.frontends.tui.widgets.run_header import RunHeader
from tokenwatch.frontends.tui.widgets.throughput_timeline import ThroughputTimeline

if TYPE_CHECKING:
    from tokenwatch.inputs.replay.player import ReplayPlayer


@dataclass(frozen=True, slots=True)
class LevelView:
    """What the board shows at a level: groups (``level`` and the ``rows`` of it) or racks (``racks``:
    the fleet table's rack indexes, None for all); ``path`` the level as it stands (a level that is
    no longer there is left for the nearest one above); ``scope`` heads the board."""

    path: tuple[str, ...]
    scope: str
    level: GroupTable | None = None
    rows: np.ndarray | None = None
    racks: np.ndarray | None = None


def level_view(groups: FleetGroups | None, path: tuple[str, ...]) -> LevelView:
    """The level at ``path`` (the group keys walked down from the top: a site, then one of its rows)."""
    if groups is None:
        return LevelView((), "Fleet")
    top = groups.top
    if not path or path[0] not in top.keys:
        return LevelView((), "Fleet", top, np.arange(len(top)))
    first = top.index(path[0])
    scope = top.names[first]
    rows = groups.row
    if top.level == "site" and rows is not None:
        if len(path) < 2 or path[1] not in rows.keys or rows.parent[rows.index(path[1])] != path[0]:
            return LevelView(path[:1], scope, rows, groups.rows_of(path[0]))
        row = rows.index(path[1])
        return LevelView(path[:2], f"{scope} · {rows.names[row]}", racks=rows.racks_of(row))
    return LevelView(path[:1], scope, racks=top.racks_of(first))


class FleetScreen(ReplayScreen):
    CSS_PATH = "fleet_screen.tcss"
    # Textual types these as instance attributes, so no ClassVar here (mypy would object).
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (180, "-wide")]  # noqa: RUF012
    VERTICAL_BREAKPOINTS = [(0, "-short"), (30, "-mid"), (50, "-tall")]  # noqa: RUF012

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("s", "sort_next", "Sort"),
        Binding("S", "sort_reverse", "Reverse sort", show=False),
        Binding("enter", "open_rack", "Rack", show=False),
        Binding("a", "all_nodes", "All nodes"),
        Binding("escape", "up_level", "Up a level"),
    ]

    def __init__(self, *, player: ReplayPlayer | None = None, badge: str = "SIM") -> None:
        super().__init__()
        self._has_player = player is not None
        self.badge = badge
        self.path: tuple[str, ...] = ()  # the group keys walked down from the top (a site, its row)
        self._fleet: tuple[FleetTable, FleetGroups | None] | None = None

    def compose(self) -> ComposeResult:
        yield RunHeader(id="header")
        yield EndBanner(id="end-banner")
        if self._has_player:
            yield ReplayBar(id="replay-bar")
        with Container(id="fleet-body"):
            with Container(id="boards"):
                yield GroupBoard(id="groups")
                yield FleetBoard(id="board")
            yield ThroughputTimeline(id="fleet-timeline")
            yield AlertsPanel(id="fleet-alerts")
        yield KeptFooter()

    def on_mount(self) -> None:
        self.query_one(RunHeader).badge = self.badge
        self.query_one("#fleet-timeline").can_focus = True
        self.query_one(GroupBoard).display = False
        self.set_focus(self.query_one(FleetBoard), scroll_visible=False)
        self.call_after_refresh(self.redraw_now)

    def on_screen_resume(self) -> None:
        self.redraw_now()  # back from a rack or a dialog: do not wait for the timer

    # ------------------------------------------------------------------ data in
    def show_snapshot(self, snap: RackSnapshot, badge: str, replay: ReplayState | None) -> None:
        if not self.is_mounted:
            return  # just switched to: it draws itself once mounted
        header = self.query_one(RunHeader)
        header.badge = badge
        header.snapshot = snap
        self.query_one(EndBanner).snapshot = snap
        if snap.fleet is not None:
            self._fleet = (snap.fleet, snap.fleet_groups)
            self._show_level()
        self.query_one(ThroughputTimeline).snapshot = snap
        self.query_one(AlertsPanel).update_snapshot(snap)
        if replay is not None and self._has_player:
            self.query_one(ReplayBar).state = replay

    def _show_level(self, cursor: str | None = None) -> None:
        """The board of the level at :attr:`path`: the groups, or the racks (all, or one group's)."""
        if self._fleet is None:
            return
        table, groups = self._fleet
        view = level_view(groups, self.path)
        self.path = view.path
        group_board, rack_board = self.query_one(GroupBoard), self.query_one(FleetBoard)
        on_groups = view.level is not None
        if view.level is not None and view.rows is not None:
            if cursor is not None:
                group_board.cursor_key = cursor
            group_board.update_groups(view.level, view.rows, view.scope)
        else:
            rack_board.update_fleet(table, view.racks, view.scope)
        if group_board.display != on_groups:
            group_board.display, rack_board.display = on_groups, not on_groups
            shown = group_board if on_groups else rack_board
            self.set_focus(shown, scroll_visible=False)
            shown.scroll_to(y=0, animate=False)

    def _board(self) -> GroupBoard | FleetBoard:
        """The board on screen."""
        groups = self.query_one(GroupBoard)
        return groups if groups.display else self.query_one(FleetBoard)

    # ------------------------------------------------------------------ keys
    def action_sort_next(self) -> None:
        self._board().cycle_sort()

    def action_sort_reverse(self) -> None:
        self._board().reverse_sort()

    def action_open_rack(self) -> None:
        self._board().open_cursor_row()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "up_level":
            return bool(self.path)  # at the top, escape has nowhere to go
        return super().check_action(action, parameters)

    def action_up_level(self) -> None:
        """Back up a level, the cursor on the group just left."""
        if not self.path:
            return
        left = self.path[-1]
        self.path = self.path[:-1]
        self._show_level(cursor=left)
        self.refresh_bindings()

    def on_group_board_group_selected(self, message: GroupBoard.GroupSelected) -> None:
        self.path = (*self.path, message.key)
        self._show_level()
        self.refresh_bindings()

    def action_all_nodes(self) -> None:
        """The dashboard of every node of the fleet (its heatmap a row per rack)."""
        self.open_dashboard(None)

    def open_dashboard(self, rack: str | None) -> AwaitMount:
        """Push the dashboard of ``rack`` (None: of every node). One dashboard serves every rack, made
        and mounted once: a dashboard's mount is ~250 ms of Textual's time (its widgets, styles and
        layout), and one dropped at escape leaves ~10,000 objects for the garbage collector to walk."""
        name = "fleet-all-nodes" if rack is None else "fleet-rack"
        app = self.app
        if not app.is_screen_installed(name):
            badge = self.query_one(RunHeader).badge
            app.install_screen(DashboardScreen(player=self.player, badge=badge, over_fleet=True), name)
        screen = app.get_screen(name)
        assert isinstance(screen, DashboardScreen)
        screen.rack = rack
        return app.push_screen(name)

    def on_fleet_board_rack_selected(self, message: FleetBoard.RackSelected) -> None:
        table = self.query_one(FleetBoard).table
        if table is None or message.rack not in table.racks:
            return
        if not table.node_count[table.index(message.rack)]:  # a fleet known only rack by rack
            self.notify(f"no per-node data for {message.rack}", title="Fleet", severity="warning")
            return
        self.open_dashboard(message.rack)

    # ------------------------------------------------------------------ replay bar
    def on_replay_bar_seek_requested(self, message: ReplayBar.SeekRequested) -> None:
        if self.player is not None:
            self.player.seek(message.t)
            self.redraw_now()
