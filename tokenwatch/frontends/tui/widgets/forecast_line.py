"""The forecast over time: the projected tokens/s at each verdict tick with its band, on the run's time axis.

Each column is one stretch of run time: ``░`` spans the band stated then, ``━`` marks the projection.
The vertical scale centres on the latest projection (its labels: the share above and below it) and spans
a few of its bands, so the line shows how the forecast settled; a point off the scale is drawn at the
edge as ▲ or ▼.
"""

from __future__ import annotations

import math

import numpy as np
from rich.text import Text
from textual.app import RenderResult
from textual.reactive import reactive
from textual.widget import Widget

from tokenwatch.base.formatting import format_clock
from tokenwatch.core.verdict.view import VerdictView
from tokenwatch.frontends.tui.charts import pick_columns
from tokenwatch.frontends.tui.palette import palette

_AXIS = 6
_MIN_SPAN = 0.01  # the scale spans at least +-1 % of the projection
_MAX_SPAN = 0.5


class ForecastLine(Widget):
    DEFAULT_CSS = """
    ForecastLine {
        width: 1fr;
        min-width: 16;
        height: 1fr;
        text-wrap: nowrap;
        text-overflow: clip;
    }
    """

    view: reactive[VerdictView | None] = reactive(None, always_update=True)
    nominal_s: reactive[float] = reactive(0.0)

    def render(self) -> RenderResult:
        view = self.view
        pal = palette(self.app)
        width, height = self.content_size
        history = view.history if view is not None else None
        if history is None or not np.isfinite(history.value).any():
            warming = view is not None and view.forecast.warming_up
            return Text(
                f"forecast over time: {'warming up' if warming else 'waiting for progress'}…", style=pal.muted
            )
        chart_w, chart_h = max(1, width - _AXIS - 1), max(1, height - 1)
        t_end = max(self.nominal_s, float(history.times[-1]))
        value = pick_columns(history.times, history.value, 0.0, t_end, chart_w)
        low = pick_columns(history.times, history.low, 0.0, t_end, chart_w)
        high = pick_columns(history.times, history.high, 0.0, t_end, chart_w)
        latest = history.value[np.isfinite(history.value)][-1]
        half = float(history.high[-1] - history.low[-1]) / 2 if np.isfinite(history.high[-1]) else 0.0
        # A few bands wide, at least +-1 %; at most +-50 % (a wider band's edges are drawn at the border).
        span = min(max(3.0 * half, _MIN_SPAN * abs(latest)), _MAX_SPAN * abs(latest)) or _MIN_SPAN
        lo, hi = latest - span, latest + span

        def row_of(v: float) -> int:  # top row 0; NaN for no value
            return round((hi - v) / (hi - lo) * (chart_h - 1)) if math.isfinite(v) else -1

        grid = [[" "] * chart_w for _ in range(chart_h)]
        for c in range(chart_w):
            if not math.isfinite(value[c]):
                continue
            top, bottom = row_of(high[c]), row_of(low[c])
            for r in range(max(0, top), min(chart_h - 1, bottom) + 1):
                grid[r][c] = "░"
            r = row_of(value[c])
            grid[min(chart_h - 1, max(0, r))][c] = "▲" if r < 0 else "▼" if r > chart_h - 1 else "━"
        text = Text(no_wrap=True, overflow="crop")
        for r, cells in enumerate(grid):
            offset = 100.0 * span / latest if latest else math.nan
            shown = f"{offset:.1f}" if offset < 10 else f"{offset:.0f}"
            label = f"+{shown}%" if r == 0 else f"-{shown}%" if r == chart_h - 1 else ""
            text.append(f"{label:>{_AXIS}}", style=pal.muted)
            text.append("▕", style=pal.muted)
            for ch in cells:
                text.append(ch, style=pal.accent if ch == "━" else pal.muted if ch == "░" else pal.warn)
            text.append("\n")
        axis = f"{format_clock(0)}{format_clock(t_end):>{max(0, chart_w - 5)}}"
        text.append(" " * (_AXIS + 1) + axis[:chart_w], style=pal.muted)
        return text
