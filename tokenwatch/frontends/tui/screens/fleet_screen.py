"""The main screen of a run of more than one rack: the header, then one row per rack (the fleet board),
the fleet's throughput and its alerts; placed by fleet_screen.tcss.

Enter on a rack opens the ordinary dashboard of that rack (fed the core's snapshot of the rack's nodes
alone); Escape there comes back here. The screen hands each panel the latest snapshot and turns keys
into board or replay actions.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Container
from textual.widget import AwaitMount
from textual.widgets import Footer

from tokenwatch.core.snapshot import RackSnapshot
from tokenwatch.frontends.tui.screens.dashboard import DashboardScreen
from tokenwatch.frontends.tui.screens.replay_screen import ReplayScreen
from tokenwatch.frontends.tui.widgets.alerts_panel import AlertsPanel
from tokenwatch.frontends.tui.widgets.end_banner import EndBanner
from tokenwatch.frontends.tui.widgets.fleet_board import FleetBoard
from tokenwatch.frontends.tui.widgets.replay_bar import ReplayBar, ReplayState
from tokenwatch.frontends.tui.widgets.run_header import RunHeader
from tokenwatch.frontends.tui.widgets.throughput_timeline import ThroughputTimeline

if TYPE_CHECKING:
    from tokenwatch.inputs.replay.player import ReplayPlayer


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
    ]

    def __init__(self, *, player: ReplayPlayer | None = None, badge: str = "SIM") -> None:
        super().__init__()
        self._has_player = player is not None
        self.badge = badge

    def compose(self) -> ComposeResult:
        yield RunHeader(id="header")
        yield EndBanner(id="end-banner")
        if self._has_player:
            yield ReplayBar(id="replay-bar")
        with Container(id="fleet-body"):
            yield FleetBoard(id="board")
            yield ThroughputTimeline(id="fleet-timeline")
            yield AlertsPanel(id="fleet-alerts")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one(RunHeader).badge = self.badge
        self.query_one("#fleet-timeline").can_focus = True
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
            self.query_one(FleetBoard).update_fleet(snap.fleet)
        self.query_one(ThroughputTimeline).snapshot = snap
        self.query_one(AlertsPanel).update_snapshot(snap)
        if replay is not None and self._has_player:
            self.query_one(ReplayBar).state = replay

    # ------------------------------------------------------------------ keys
    def action_sort_next(self) -> None:
        self.query_one(FleetBoard).cycle_sort()

    def action_sort_reverse(self) -> None:
        self.query_one(FleetBoard).reverse_sort()

    def action_open_rack(self) -> None:
        self.query_one(FleetBoard).action_open_rack()

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
