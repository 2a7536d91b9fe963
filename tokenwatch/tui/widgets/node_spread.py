"""Each node's measured mean against the median node, and the spread in the published rack-table form."""

from __future__ import annotations

import math

import numpy as np
from rich.text import Text
from textual.app import RenderResult
from textual.reactive import reactive
from textual.widget import Widget

from tokenwatch.core.snapshot import RackSnapshot
from tokenwatch.core.views import spread_vs_median_pct
from tokenwatch.formatting import group, printable
from tokenwatch.tui.charts import hbar, hbar_left
from tokenwatch.tui.palette import palette

_SCALES_PCT = (1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0)


def bar_scale_pct(deviations: np.ndarray) -> float:
    """The smallest of 1/2/5/10/20/50/100 % that holds every node's deviation."""
    finite = np.abs(deviations[np.isfinite(deviations)])
    worst = float(finite.max()) if finite.size else 0.0
    return next((s for s in _SCALES_PCT if worst <= s), _SCALES_PCT[-1])


class NodeSpreadPanel(Widget):
    DEFAULT_CSS = """
    NodeSpreadPanel {
        text-wrap: nowrap;
        text-overflow: clip;
        border: round $primary 50%;
        border-title-color: $primary;
        height: 1fr;
        min-height: 6;
    }
    """

    snapshot: reactive[RackSnapshot | None] = reactive(None, always_update=True)

    def on_mount(self) -> None:
        self.border_title = "Node spread · mean tok/s vs median"

    def render(self) -> RenderResult:
        snap = self.snapshot
        width, height = self.content_size
        spread = snap.node_spread if snap is not None else None
        if snap is None or spread is None or spread.nodes == 0:
            return Text("waiting for node results…", style="dim")
        pal = palette(self.app)
        text = Text(no_wrap=True, overflow="crop")
        summary = [
            ("Max single-node", group(spread.max, 1)),
            ("Min single-node", group(spread.min, 1)),
            ("Average single-node", group(spread.mean, 1)),
            ("Median single-node", group(spread.median, 1)),
            ("Spread (max-min)/min", f"{spread.spread_pct:.1f} %"),
        ]
        names = snap.nodes.names
        if height >= len(names) + len(summary) + 2:
            for label, value in summary:
                text.append(f"{label:<22}", style=pal.muted)
                text.append(f"{value:>12}\n", style="bold")
        else:  # compact: the same five figures flowed over as few lines as the width allows
            used = 0
            for label, value in summary:
                short = label.split()[0].lower()
                if used and used + len(short) + len(value) + 3 > width:
                    text.append("\n")
                    used = 0
                text.append(f"{short} ", style=pal.muted)
                text.append(f"{value}  ", style="bold")
                used += len(short) + len(value) + 3
            text.append("\n")
        room = max(0, height - len(text.plain.splitlines()))
        deviation = spread_vs_median_pct(snap)
        order = np.arange(len(names))
        if len(names) > room:  # the slowest nodes are the ones to see
            order = np.lexsort((order, np.where(np.isfinite(deviation), deviation, np.inf)))[
                : max(0, room - 1)
            ]
        scale = bar_scale_pct(deviation)
        label_w = max(len(printable(n)) for n in names) + 2
        half = max(2, (width - label_w - 10) // 2)
        for i in order.tolist():
            self._bar_line(text, snap, i, float(deviation[i]), scale, label_w, half)
        if len(order) < len(names):
            text.append(f"… slowest {len(order)} of {len(names)} shown (±{scale:g}% scale)", style=pal.muted)
        else:
            low, high = f"-{scale:g}%", f"+{scale:g}%"
            text.append(f"{'':{label_w}}{low:<{half}}│{high:>{half}}", style=pal.muted)
        return text

    def _bar_line(
        self, text: Text, snap: RackSnapshot, i: int, dev: float, scale: float, label_w: int, half: int
    ) -> None:
        pal = palette(self.app)
        rows = snap.nodes
        down = rows.state[i] == "down"
        slow = bool(rows.straggler[i])
        mark = "✗" if down else ("▼" if slow else " ")
        text.append(
            f"{mark}{printable(rows.names[i]):<{label_w - 1}}",
            style=pal.bad if down else (pal.warn if slow else pal.text),
        )
        if not math.isfinite(dev):
            text.append(f"{'':{half}}│{'':{half}}  —\n", style=pal.muted)
            return
        fraction = min(1.0, abs(dev) / scale)
        dev = round(dev, 1) or 0.0  # no "-0.0%"
        style = pal.bad if down else (pal.warn if slow else pal.bar)  # colour only for real trouble
        if dev < 0:
            text.append(hbar_left(fraction, half), style=style)
            text.append("│", style=pal.muted)
            text.append(" " * half)
        else:
            text.append(" " * half)
            text.append("│", style=pal.muted)
            text.append(hbar(fraction, half), style=style)
        text.append(f" {dev:+5.1f}%\n", style=style if down or slow else pal.text)
