"""Nodes x GPUs coloured by one metric (racks x node slots for multi-rack runs), with a legend and range.

Cells carry their value when there is room and a shade glyph when there is not, so the picture does
not depend on colour alone. A GPU with no fresh value has no colour: its cell says why (down, stale,
never reported). The colours stretch over the core's value scale (:func:`tokenwatch.core.views.value_scale`),
which is never narrower than the metric's minimum span, so noise on a healthy rack stays one colour;
the legend shows the scale and that span. Drawn line by line: a 64-rack grid costs only its visible rows.
"""

from __future__ import annotations

import math
from typing import ClassVar

from rich.segment import Segment
from rich.style import Style
from textual.geometry import Size
from textual.scroll_view import ScrollView
from textual.strip import Strip

from tokenwatch.base.formatting import DASH, printable
from tokenwatch.core.snapshot import DOWN_GPU, NEVER_REPORTED, STALE_GPU, RackSnapshot
from tokenwatch.core.views import HEAT_METRICS, MIN_SPANS, NO_NODE, HeatGrid, heat_grid
from tokenwatch.frontends.tui.line_pass import LinePass
from tokenwatch.frontends.tui.palette import Palette
from tokenwatch.frontends.tui.panel_css import panel_css

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
# Why a cell has no value, as a word (cells 5 wide or more) and as a glyph (narrower cells).
SILENT_WORD = {STALE_GPU: "stale", DOWN_GPU: "down", NEVER_REPORTED: "never", NO_NODE: ""}
SILENT_GLYPH = {STALE_GPU: "◌", DOWN_GPU: "✗", NEVER_REPORTED: "·", NO_NODE: " "}
_SILENT_KEY = "✗ down  ◌ stale  · never reported"


def format_value(metric: str, value: float) -> str:
    if not math.isfinite(value):
        return DASH
    shown = value / HEAT_LABELS[metric][2]
    return f"{shown:,.1f}" if metric == "hbm_used_mib" else f"{shown:,.0f}"


class GpuHeatmap(LinePass, ScrollView, can_focus=True):
    DEFAULT_CSS = (
        panel_css("GpuHeatmap")
        + """
    GpuHeatmap { overflow-x: hidden; }
    """
    )

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
        grid = self.grid
        kind = "nodes × GPUs"
        if grid is not None and grid.rows_are_racks:
            kind = (
                f"racks × node slots, {'hottest GPU' if self.metric == 'temp_c' else 'mean of GPUs'} per node"
            )
        self.border_title = f"GPU heatmap · {label} ({unit}) · {kind}"
        # Narrow cells show a silent GPU as a glyph: the key says which.
        glyphs = grid is not None and self._geometry(self.scrollable_content_region.width)[1] < 5
        self.border_subtitle = f"{_SILENT_KEY} · m: next metric" if glyphs else "m: next metric"

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
        """``1,312 ████ 1,452 W · min span 140 W (10 % of the power limit)``: the colours' scale, and
        the span it is never narrower than (the note shortens, then goes, when the line is short)."""
        grid = self.grid
        assert grid is not None
        scale = grid.scale
        _, unit, _ = HEAT_LABELS[self.metric]
        low, high = format_value(self.metric, scale.low), format_value(self.metric, scale.high)
        span = format_value(self.metric, scale.min_span)
        basis = MIN_SPANS[self.metric].basis if self.metric in MIN_SPANS else ""
        notes = [f" · min span {span} {unit} ({basis})", f" · min span {span} {unit}", ""]
        if not (math.isfinite(scale.min_span) and scale.min_span > 0):
            notes = [""]
        fixed = len(low) + len(high) + len(unit) + 3
        note = next((n for n in notes if fixed + 8 + len(n) <= width), "")
        steps = max(8, min(16, width - fixed - len(note)))
        segs = [Segment(f"{low} ", base + pal.text)]
        for k in range(steps):
            segs.append(Segment("█", base + pal.heat_fg[int(k / (steps - 1) * (len(pal.heat_fg) - 1))]))
        segs.append(Segment(f" {high} {unit}", base + pal.text))
        segs.append(Segment(note, base + pal.muted))
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
        fractions = grid.scale.fraction(grid.values[row])
        for value, fraction, code in zip(grid.values[row], fractions, grid.freshness[row], strict=True):
            if not math.isfinite(value):
                # No colour for a value that is not there: the cell says why (a fresh GPU that does
                # not report this metric: a dash).
                why = (SILENT_WORD if cell_w >= 5 else SILENT_GLYPH).get(int(code), DASH)
                style = pal.bad if code == DOWN_GPU else pal.muted
                segs.append(Segment(why.center(cell_w)[:cell_w] + " ", base + style))
                continue
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
            self._titles()
