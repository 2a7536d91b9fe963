"""Nodes x GPUs coloured by one metric (racks x node slots for multi-rack runs), with a legend and range.

Cells carry their value when there is room and a shade glyph when there is not, so the picture does
not depend on colour alone. Drawn line by line: a 64-rack grid costs only its visible rows.
"""

from __future__ import annotations

import math
from typing import ClassVar

from rich.segment import Segment
from rich.style import Style
from textual.geometry import Size
from textual.scroll_view import ScrollView
from textual.strip import Strip

from tokenwatch.core.snapshot import RackSnapshot
from tokenwatch.core.views import HEAT_METRICS, HeatGrid, heat_grid
from tokenwatch.formatting import DASH, printable
from tokenwatch.tui.line_pass import LinePass
from tokenwatch.tui.palette import Palette

# metric -> (label, unit, divisor for display)
HEAT_LABELS: dict[str, tuple[str, str, float]] = {
    "power_w": ("Power", "W", 1.0),
    "sm_clock_mhz": ("SM clock", "MHz", 1.0),
    "mem_clock_mhz": ("Memory clock", "MHz", 1.0),
    "hbm_used_mib": ("HBM used", "GiB", 1024.0),
    "hbm_busy_pct": ("HBM busy", "%", 1.0),
    "temp_c": ("Temperature", "°C", 1.0),
    "util_pct": ("Utilization", "%", 1.0),
}
_SHADES = "░▒▓█"
_HEAD_LINES = 2  # legend + column labels stay put while the rows scroll


def format_value(metric: str, value: float) -> str:
    if not math.isfinite(value):
        return DASH
    shown = value / HEAT_LABELS[metric][2]
    return f"{shown:,.1f}" if metric == "hbm_used_mib" else f"{shown:,.0f}"


class GpuHeatmap(LinePass, ScrollView, can_focus=True):
    DEFAULT_CSS = """
    GpuHeatmap {
        overflow-x: hidden;
        border: round $primary 50%;
        border-title-color: $primary;
        height: 1fr;
        min-height: 6;
    }
    """

    METRICS: ClassVar[tuple[str, ...]] = HEAT_METRICS

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.metric = HEAT_METRICS[0]
        self.snapshot: RackSnapshot | None = None
        self.grid: HeatGrid | None = None

    def on_mount(self) -> None:
        self._titles()

    def _titles(self) -> None:
        label, unit, _ = HEAT_LABELS[self.metric]
        kind = "racks × node slots" if self.grid is not None and self.grid.rows_are_racks else "nodes × GPUs"
        self.border_title = f"GPU heatmap · {label} ({unit}) · {kind}"
        self.border_subtitle = "m: next metric"

    def update_snapshot(self, snap: RackSnapshot) -> None:
        self.snapshot = snap
        self._regrid()

    def cycle_metric(self) -> None:
        self.metric = HEAT_METRICS[(HEAT_METRICS.index(self.metric) + 1) % len(HEAT_METRICS)]
        self._regrid()

    def _regrid(self) -> None:
        if self.snapshot is not None:
            self.grid = heat_grid(self.snapshot, self.metric)
            self.virtual_size = Size(self.size.width, len(self.grid.row_labels) + _HEAD_LINES)
        self._titles()
        self.refresh()

    def _geometry(self, width: int) -> tuple[int, int]:
        """(label width, cell width)."""
        grid = self.grid
        assert grid is not None
        label_w = max((len(printable(r)) for r in grid.row_labels), default=4) + 1
        cols = max(1, len(grid.col_labels))
        cell_w = max(1, min(8, (width - label_w) // cols - 1))
        return label_w, cell_w

    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width
        base = self.base
        grid = self.grid
        if grid is None or not grid.row_labels:
            text = "waiting for GPU telemetry…" if y == 0 else ""
            return Strip([Segment(text, base + Style(dim=True))]).adjust_cell_length(width, base)
        pal = self.pal
        if y == 0:
            return self._legend(pal, base, width)
        label_w, cell_w = self._geometry(width)
        if y == 1:
            segs = [Segment(" " * label_w, base)]
            for label in grid.col_labels:
                shown = label[-cell_w:] if cell_w < len(label) else label
                segs.append(Segment(shown.center(cell_w) + " ", base + pal.muted))
            return Strip(segs).adjust_cell_length(width, base)
        row = int(self.scroll_y) + y - _HEAD_LINES
        if row >= len(grid.row_labels):
            return Strip.blank(width, base)
        return self._row(grid, row, pal, base, width, label_w, cell_w)

    def _legend(self, pal: Palette, base: Style, width: int) -> Strip:
        grid = self.grid
        assert grid is not None
        _, unit, _ = HEAT_LABELS[self.metric]
        segs = [Segment(f"{format_value(self.metric, grid.low)} ", base + pal.text)]
        steps = 16
        for k in range(steps):
            segs.append(Segment("█", base + pal.heat_fg[int(k / (steps - 1) * (len(pal.heat_fg) - 1))]))
        segs.append(Segment(f" {format_value(self.metric, grid.high)} {unit}", base + pal.text))
        if grid.rows_are_racks:
            how = "hottest GPU per node" if self.metric == "temp_c" else "node mean of its GPUs"
            segs.append(Segment(f"  ({how})", base + pal.muted))
        return Strip(segs).adjust_cell_length(width, base)

    def _row(
        self, grid: HeatGrid, row: int, pal: Palette, base: Style, width: int, label_w: int, cell_w: int
    ) -> Strip:
        label = printable(grid.row_labels[row])
        snap = self.snapshot
        down = (
            snap is not None
            and not grid.rows_are_racks
            and row < len(snap.nodes.state)
            and snap.nodes.state[row] in ("down", "stale")
        )
        segs = [Segment(f"{label:<{label_w}}", base + (pal.bad if down else pal.text))]
        span = grid.high - grid.low
        for value in grid.values[row]:
            if not math.isfinite(value):
                segs.append(Segment(DASH.center(cell_w) + " ", base + pal.muted))
                continue
            fraction = (value - grid.low) / span if span > 0 else 0.5
            if cell_w >= 5:  # the value itself on its colour, cells apart
                text = format_value(self.metric, value).rjust(cell_w)[-cell_w:]
                segs.append(Segment(text, base + pal.heat_style(fraction)))
                segs.append(Segment(" ", base))
            else:  # too narrow for digits: the colour as a glyph whose density also tells the level
                text = _SHADES[min(3, int(fraction * 4))] * cell_w + " "
                segs.append(Segment(text, base + pal.heat_fg_style(fraction)))
        return Strip(segs).adjust_cell_length(width, base)

    def on_resize(self) -> None:
        if self.grid is not None:
            self.virtual_size = Size(self.size.width, len(self.grid.row_labels) + _HEAD_LINES)
