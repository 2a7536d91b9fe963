"""Each node's measured mean against the median node, and the spread in the published rack-table form.

Once the run has ended the panel is the run's result: the summary in the published-table form (which
nodes it covers included) on top, the node bars below it as room allows. Down and stale nodes are
listed apart with their last mean and why they stopped: they are not part of the running rack's spread.
"""

from __future__ import annotations

import math

import numpy as np
from rich.text import Text
from textual.app import RenderResult
from textual.reactive import reactive
from textual.widget import Widget

from tokenwatch.base.formatting import group, printable
from tokenwatch.core.snapshot import RackSnapshot
from tokenwatch.core.views import spread_vs_median_pct
from tokenwatch.frontends.tui.charts import hbar, hbar_left
from tokenwatch.frontends.tui.palette import Palette, palette
from tokenwatch.frontends.tui.panel_css import panel_css
from tokenwatch.frontends.tui.widgets.run_summary import summary_text

_SCALES_PCT = (1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0)
_STOPPED = ("down", "stale")
LIVE_TITLE = "Node spread · mean tok/s vs median"
RESULT_TITLE = "Run result · published rack table"
INTERRUPTED_TITLE = "Run result, INTERRUPTED: up to the interrupt · published rack table"


def bar_scale_pct(deviations: np.ndarray) -> float:
    """The smallest of 1/2/5/10/20/50/100 % that holds every node's deviation."""
    finite = np.abs(deviations[np.isfinite(deviations)])
    worst = float(finite.max()) if finite.size else 0.0
    return next((s for s in _SCALES_PCT if worst <= s), _SCALES_PCT[-1])


class NodeSpreadPanel(Widget):
    DEFAULT_CSS = (
        panel_css("NodeSpreadPanel")
        + """
    NodeSpreadPanel { text-wrap: nowrap; text-overflow: clip; }
    """
    )

    snapshot: reactive[RackSnapshot | None] = reactive(None, always_update=True)

    def on_mount(self) -> None:
        self.border_title = LIVE_TITLE

    def watch_snapshot(self, snap: RackSnapshot | None) -> None:
        if snap is None or snap.summary is None:
            self.border_title = LIVE_TITLE
        else:
            self.border_title = INTERRUPTED_TITLE if snap.end_reason == "interrupted" else RESULT_TITLE

    def render(self) -> RenderResult:
        snap = self.snapshot
        width, height = self.content_size
        if snap is None or (snap.summary is None and snap.node_spread.nodes == 0):
            return Text("waiting for node results…", style="dim")
        pal = palette(self.app)
        names = snap.nodes.names
        stopped = [i for i, state in enumerate(snap.nodes.state) if state in _STOPPED]
        running = [i for i in range(len(names)) if i not in set(stopped)]
        if snap.summary is not None:  # the result: its flags and warnings already name stopped nodes
            text = summary_text(snap.summary, pal, width, height)
            stopped = []
        else:
            text = self._spread_figures(snap, pal, width, full=height >= len(names) + 7)
        room = max(0, height - len(text.plain.splitlines()) - len(stopped))
        self._bars(text, snap, pal, running, room, width)
        for i in stopped:
            self._stopped_line(text, snap, pal, i, width)
        return text

    @staticmethod
    def _spread_figures(snap: RackSnapshot, pal: Palette, width: int, *, full: bool) -> Text:
        spread = snap.node_spread
        text = Text(no_wrap=True, overflow="crop")
        summary = [
            ("Max single-node", group(spread.max, 1)),
            ("Min single-node", group(spread.min, 1)),
            ("Average single-node", group(spread.mean, 1)),
            ("Median single-node", group(spread.median, 1)),
            ("Spread (max-min)/min", f"{spread.spread_pct:.1f} %"),
        ]
        if full:
            for label, value in summary:
                text.append(f"{label:<22}", style=pal.muted)
                text.append(f"{value:>12}\n", style="bold")
            return text
        used = 0  # compact: the same five figures flowed over as few lines as the width allows
        for label, value in summary:
            short = label.split()[0].lower()
            if used and used + len(short) + len(value) + 3 > width:
                text.append("\n")
                used = 0
            text.append(f"{short} ", style=pal.muted)
            text.append(f"{value}  ", style="bold")
            used += len(short) + len(value) + 3
        text.append("\n")
        return text

    def _bars(
        self, text: Text, snap: RackSnapshot, pal: Palette, running: list[int], room: int, width: int
    ) -> None:
        """One bar per running (or finished) node against the median; the slowest when room is short."""
        names = snap.nodes.names
        if not running or room < 2:
            return
        deviation = spread_vs_median_pct(snap)
        order = np.array(running)
        if len(order) > room:  # the slowest nodes are the ones to see
            keyed = np.where(np.isfinite(deviation[order]), deviation[order], np.inf)
            order = order[np.lexsort((order, keyed))][: max(0, room - 1)]
        scale = bar_scale_pct(deviation[np.array(running)])
        label_w = max(len(printable(n)) for n in names) + 2
        half = max(2, (width - label_w - 10) // 2)
        for i in order.tolist():
            self._bar_line(text, snap, pal, i, float(deviation[i]), scale, label_w, half)
        if len(order) < len(running):
            text.append(
                f"… slowest {len(order)} of {len(running)} shown (±{scale:g}% scale)\n", style=pal.muted
            )
        else:
            low, high = f"-{scale:g}%", f"+{scale:g}%"
            text.append(f"{'':{label_w}}{low:<{half}}│{high:>{half}}\n", style=pal.muted)

    @staticmethod
    def _bar_line(
        text: Text,
        snap: RackSnapshot,
        pal: Palette,
        i: int,
        dev: float,
        scale: float,
        label_w: int,
        half: int,
    ) -> None:
        rows = snap.nodes
        slow = bool(rows.straggler[i])
        text.append(
            f"{'▼' if slow else ' '}{printable(rows.names[i]):<{label_w - 1}}",
            style=pal.warn if slow else pal.text,
        )
        if not math.isfinite(dev):
            text.append(f"{'':{half}}│{'':{half}}  —\n", style=pal.muted)
            return
        fraction = min(1.0, abs(dev) / scale)
        dev = round(dev, 1) or 0.0  # no "-0.0%"
        style = pal.warn if slow else pal.bar  # colour only for real trouble
        if dev < 0:
            text.append(hbar_left(fraction, half), style=style)
            text.append("│", style=pal.muted)
            text.append(" " * half)
        else:
            text.append(" " * half)
            text.append("│", style=pal.muted)
            text.append(hbar(fraction, half), style=style)
        text.append(f" {dev:+5.1f}%\n", style=style if slow else pal.text)

    @staticmethod
    def _stopped_line(text: Text, snap: RackSnapshot, pal: Palette, i: int, width: int) -> None:
        """A down or stale node, apart: its last measured mean and why it stopped."""
        rows = snap.nodes
        down = rows.state[i] == "down"
        line = Text(no_wrap=True, overflow="ellipsis")
        line.append(
            f"{'✗' if down else '◌'}{printable(rows.names[i])} {rows.state[i]}",
            style=pal.bad if down else pal.warn,
        )
        mean = rows.mean_tokens_per_s[i]
        line.append(
            f"  last mean {group(mean)} tok/s" if math.isfinite(mean) else "  no work", style=pal.text
        )
        if rows.reason[i]:
            line.append(f"  ({printable(rows.reason[i])})", style=pal.muted)
        line.truncate(max(1, width), overflow="ellipsis")
        text.append_text(line)
        text.append("\n")
