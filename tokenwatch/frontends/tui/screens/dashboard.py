"""The main screen: header, throughput, alerts, nodes, spread, heatmap, latency; placed by dashboard.tcss.

The screen only hands each panel the latest snapshot (attributes down) and turns keys into panel or
replay actions; the panels never see an event.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.widget import Widget

from tokenwatch.core.snapshot import RackSnapshot
from tokenwatch.frontends.tui.screens.node_screen import NodeScreen
from tokenwatch.frontends.tui.screens.replay_screen import ReplayScreen
from tokenwatch.frontends.tui.widgets.alerts_panel import AlertsPanel
from tokenwatch.frontends.tui.widgets.end_banner import EndBanner
from tokenwatch.frontends.tui.widgets.gpu_heatmap import GpuHeatmap
from tokenwatch.frontends.tui.widgets.kept_footer import KeptFooter
from tokenwatch.frontends.tui.widgets.latency_histogram import LatencyHistogram
from tokenwatch.frontends.tui.widgets.node_spread import NodeSpreadPanel
from tokenwatch.frontends.tui.widgets.node_table import NodeTable
from tokenwatch.frontends.tui.widgets.replay_bar import ReplayBar, ReplayState
from tokenwatch.frontends.tui.widgets.run_header import RunHeader
from tokenwatch.frontends.tui.widgets.throughput_timeline import ThroughputTimeline
from tokenwatch.frontends.tui.widgets.verdict_panel import VerdictPanel

if TYPE_CHECKING:
    from tokenwatch.inputs.replay.player import ReplayPlayer


class DashboardScreen(ReplayScreen):
    CSS_PATH = "dashboard.tcss"
    # Textual types these as instance attributes, so no ClassVar here (mypy would object).
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (120, "-medium"), (180, "-wide")]  # noqa: RUF012
    VERTICAL_BREAKPOINTS = [(0, "-short"), (50, "-tall")]  # noqa: RUF012

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("s", "sort_next", "Sort"),
        Binding("S", "sort_reverse", "Reverse sort", show=False),
        Binding("m", "heat_metric", "Heatmap"),
        Binding("l", "latency_metric", "Latency"),
        Binding("enter", "open_node", "Node", show=False),
        Binding("escape", "back_to_fleet", "Fleet"),
    ]

    def __init__(
        self,
        *,
        player: ReplayPlayer | None = None,
        badge: str = "SIM",
        rack: str | None = None,
        over_fleet: bool = False,
    ) -> None:
        """``rack``: one rack of a fleet; ``over_fleet``: opened from the fleet board (a rack, or every
        node of the fleet), where escape goes back to."""
        super().__init__()
        self._has_player = player is not None
        self.badge = badge
        self.rack = rack
        self.over_fleet = over_fleet or rack is not None

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "back_to_fleet":
            return self.over_fleet  # a run of one rack: this is the bottom screen
        return super().check_action(action, parameters)

    def action_back_to_fleet(self) -> None:
        self.app.pop_screen()

    def compose(self) -> ComposeResult:
        yield RunHeader(id="header")
        yield EndBanner(id="end-banner")
        if self._has_player:
            yield ReplayBar(id="replay-bar")
        with VerticalScroll(id="body", can_focus=False):  # tab goes panel to panel, scrolling to each
            yield VerdictPanel(id="verdict")
            yield ThroughputTimeline(id="timeline")
            yield AlertsPanel(id="alerts")
            yield NodeTable(id="nodes")
            yield NodeSpreadPanel(id="spread")
            yield GpuHeatmap(id="heatmap")
            yield LatencyHistogram(id="latency")
        yield KeptFooter()

    def on_mount(self) -> None:
        self.query_one(RunHeader).badge = self.badge
        for widget_id in ("#timeline", "#spread", "#latency"):
            self.query_one(widget_id).can_focus = True
        self.set_focus(self.query_one(NodeTable), scroll_visible=False)  # keep the body at its top
        self.call_after_refresh(self.redraw_now)

    def on_screen_resume(self) -> None:
        self.redraw_now()  # back from the node screen or a dialog: do not wait for the timer

    # ------------------------------------------------------------------ data in
    def show_snapshot(self, snap: RackSnapshot, badge: str, replay: ReplayState | None) -> None:
        header = self.query_one(RunHeader)
        header.badge = badge
        header.snapshot = snap
        self.query_one(EndBanner).snapshot = snap
        self.query_one(VerdictPanel).snapshot = snap
        self.query_one(ThroughputTimeline).snapshot = snap
        self.query_one(AlertsPanel).update_snapshot(snap)
        self.query_one(NodeTable).update_snapshot(snap)
        self.query_one(NodeSpreadPanel).snapshot = snap
        self.query_one(GpuHeatmap).update_snapshot(snap)
        self.query_one(LatencyHistogram).update_snapshot(snap)
        if replay is not None and self._has_player:
            self.query_one(ReplayBar).state = replay

    # ------------------------------------------------------------------ panel keys
    def action_sort_next(self) -> None:
        self.query_one(NodeTable).cycle_sort()

    def action_sort_reverse(self) -> None:
        self.query_one(NodeTable).reverse_sort()

    def action_heat_metric(self) -> None:
        heatmap = self.query_one(GpuHeatmap)
        if self._brought_into_view(heatmap):
            return
        heatmap.cycle_metric()

    def action_latency_metric(self) -> None:
        histogram = self.query_one(LatencyHistogram)
        if self._brought_into_view(histogram):
            return
        histogram.cycle_metric()

    def _brought_into_view(self, panel: Widget) -> bool:
        """Scrolls the body to ``panel`` where less than half of it is on screen (a layout that scrolls
        keeps the heatmap and the latency panel below the first screen): True when it did, so the key's
        first press shows the panel rather than change, out of sight, what it shows."""
        body = self.query_one("#body")
        shown = body.region.intersection(panel.region).height
        if shown * 2 >= min(panel.region.height, body.region.height):
            return False
        body.scroll_to_widget(panel, animate=False, top=True)
        return True

    def action_open_node(self) -> None:
        self.query_one(NodeTable).action_open_node()

    def on_node_table_node_selected(self, message: NodeTable.NodeSelected) -> None:
        snap = self.query_one(NodeTable).snapshot
        nodes = snap.nodes.names if snap is not None else (message.node,)
        self.app.push_screen(NodeScreen(message.node, nodes))

    # ------------------------------------------------------------------ replay bar
    def on_replay_bar_seek_requested(self, message: ReplayBar.SeekRequested) -> None:
        if self.player is not None:
            self.player.seek(message.t)
            self.redraw_now()
