"""Alerts and events from the core, each stamped with its run time: the active ones first (a node down
since minute 2 stays in sight at the end of the run), then the rest, newest first."""

from __future__ import annotations

from rich.segment import Segment
from rich.style import Style
from textual.geometry import Size
from textual.scroll_view import ScrollView
from textual.strip import Strip

from tokenwatch.base.formatting import elide_middle, format_clock, printable
from tokenwatch.core.alerts import Alert
from tokenwatch.core.snapshot import RackSnapshot
from tokenwatch.frontends.tui.line_pass import LinePass
from tokenwatch.frontends.tui.palette import Palette
from tokenwatch.frontends.tui.panel_css import panel_css


def alert_symbol(alert: Alert) -> str:
    """A symbol per severity, so the list reads without colour too."""
    if alert.severity == "critical":
        return "✗"
    if alert.severity == "warning":
        return "▲"
    return "✓" if alert.kind in ("up", "finished") or not alert.active else "·"


class AlertsPanel(LinePass, ScrollView, can_focus=True):
    DEFAULT_CSS = (
        panel_css("AlertsPanel", min_height=4)
        + """
    AlertsPanel { overflow-x: hidden; }
    """
    )

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.alerts: tuple[Alert, ...] = ()
        self.active = 0
        self._active_ids: set[int] = set()

    def on_mount(self) -> None:
        self.border_title = "Alerts & events"

    def update_snapshot(self, snap: RackSnapshot) -> None:
        active_ids = {id(alert) for alert in snap.active_alerts}
        alerts = snap.active_alerts + tuple(a for a in snap.alerts if id(a) not in active_ids)
        if alerts == self.alerts and active_ids == self._active_ids:
            return
        self.alerts = alerts
        self._active_ids = active_ids
        self.active = len(snap.active_alerts)
        self.border_title = f"Alerts & events · {self.active} active" if self.active else "Alerts & events"
        self.virtual_size = Size(self.size.width, max(1, len(self.alerts)))
        self.refresh()

    def _style(self, pal: Palette, alert: Alert) -> Style:
        active = id(alert) in self._active_ids  # a condition's start line stays in the log once it clears
        if alert.severity == "critical" and active:
            return pal.bad
        if alert.severity in ("critical", "warning") and active:
            return pal.warn
        if alert.severity == "warning":
            return pal.text
        return pal.muted

    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width
        base, pal = self.base, self.pal
        index = int(self.scroll_y) + y
        if not self.alerts:
            text = "no alerts: every node within range" if y == 0 else ""
            return Strip([Segment(text, base + pal.muted)]).adjust_cell_length(width, base)
        if index >= len(self.alerts):
            return Strip.blank(width, base)
        alert = self.alerts[index]
        style = self._style(pal, alert)
        stamp, symbol = f"{format_clock(alert.t)} ", f"{alert_symbol(alert)} "
        # Cut in the middle, not at the end: the figure near the start and the cause at the end both stay.
        message = elide_middle(printable(alert.message), width - len(stamp) - len(symbol))
        segs = [
            Segment(stamp, base + pal.muted),
            Segment(symbol, base + style),
            Segment(message, base + style),
        ]
        return Strip(segs).crop(0, width).adjust_cell_length(width, base)
