"""Aggregate tokens/s over the whole run so far, on the run's nominal time axis, steady mean marked; with
``--baseline``, the baseline's aggregate at the same run time as a line over the bars, drawn at its height to
an eighth of a row as the bars are and drawn low, mid or high in its cell (``▁``, ``─``, ``▔``)."""

from __future__ import annotations

import math

import numpy as np
from rich.style import Style
from rich.text import Text
from textual.app import RenderResult
from textual.reactive import reactive
from textual.widget import Widget

from tokenwatch.base.events import FloatArray
from tokenwatch.base.formatting import format_clock, group
from tokenwatch.core.nan_math import finite_range
from tokenwatch.core.snapshot import RackSnapshot
from tokenwatch.frontends.tui.charts import column_rows, line_cells, line_over_bars, pick_columns
from tokenwatch.frontends.tui.palette import palette

_AXIS = 7  # y-axis label width


def power_limit_columns(snap: RackSnapshot, t_end: float, width: int) -> set[int]:
    """The chart columns of the run's power-limit changes (the time axis marks them ▲)."""
    if not t_end > 0 or width <= 0:
        return set()
    return {min(width - 1, int(c.t / t_end * width)) for c in snap.power_limit_changes}


class ThroughputTimeline(Widget):
    DEFAULT_CSS = """
    ThroughputTimeline {
        text-wrap: nowrap;
        text-overflow: clip;
        height: 10;
        border: round $primary 50%;
        border-title-color: $primary;
        padding: 0 1 0 0;
    }
    """

    snapshot: reactive[RackSnapshot | None] = reactive(None, always_update=True)

    def on_mount(self) -> None:
        self.border_title = "Throughput · tok/s"

    def watch_snapshot(self, snap: RackSnapshot | None) -> None:
        parts = []
        if snap is not None and math.isfinite(snap.timeline.steady_mean_tokens_per_s):
            parts.append(f"steady mean {group(snap.timeline.steady_mean_tokens_per_s)} tok/s")
        if snap is not None and snap.baseline is not None and len(snap.baseline.timeline_times):
            parts.append(f"─ baseline {snap.baseline.name}")
        if snap is not None and snap.power_limit_changes:  # marked ▲ on the time axis
            last = snap.power_limit_changes[-1]
            parts.append(f"▲ power limit {'▼' if last.lowered else '▲'} {last.node} {format_clock(last.t)}")
        self.border_subtitle = " · ".join(parts)

    def render(self) -> RenderResult:
        snap = self.snapshot
        width, height = self.content_size
        if snap is None or len(snap.timeline.times) < 2:
            return Text("waiting for throughput data…", style="dim")
        pal = palette(self.app)
        line = snap.timeline
        chart_w, chart_h = max(1, width - _AXIS - 1), max(1, height - 1)
        nominal = snap.run.nominal_duration_s or 0.0
        t_end = max(nominal, float(line.times[-1]))
        columns = pick_columns(line.times, line.tokens_per_s, 0.0, t_end, chart_w)
        reference = self._baseline_columns(snap, t_end, chart_w)
        _, hi = finite_range(line.tokens_per_s, reference)
        hi = hi * 1.15 if math.isfinite(hi) and hi > 0 else 1.0  # head room: the mean row sits below the top
        rows = column_rows(columns, 0.0, hi, chart_h)
        mean = line.steady_mean_tokens_per_s
        mean_row = chart_h - 1 - int(mean / hi * chart_h) if math.isfinite(mean) else -1
        # The baseline's row and glyph in each column (row -1: none), placed at the bars' eighths.
        ref_rows, ref_glyphs = line_cells(reference, 0.0, hi, chart_h)
        text = Text(no_wrap=True, overflow="crop")
        labels = axis_labels(hi, chart_h)
        for r, row in enumerate(rows):
            label = "mean" if r == mean_row else labels[r]
            text.append(f"{label:>{_AXIS}}", style=pal.accent if r == mean_row else pal.muted)
            text.append("▕", style=pal.muted)
            if r == mean_row:  # the steady mean: a dashed line over empty cells, accent-coloured bar tops
                row, style = row.replace(" ", "╌"), pal.accent
            else:
                style = pal.bar
            on_row = ref_rows == r
            if on_row.any():
                _append_with_line(text, row, on_row, ref_glyphs, style, pal.text)
            else:
                text.append(row, style=style)
            text.append("\n")
        text.append(" " * (_AXIS + 1))
        axis = self._time_axis(t_end, chart_w)
        marks = power_limit_columns(snap, t_end, chart_w)
        if not marks:
            text.append(axis, style=pal.muted)
        for col, ch in enumerate(axis if marks else ""):
            text.append("▲" if col in marks else ch, style=pal.warn if col in marks else pal.muted)
        return text

    @staticmethod
    def _baseline_columns(snap: RackSnapshot, t_end: float, width: int) -> FloatArray:
        """The baseline's rack tokens/s per column (NaN where it has none), on the run's axis."""
        view = snap.baseline
        if view is None or not len(view.timeline_times):
            return np.full(width, np.nan)
        return pick_columns(view.timeline_times, view.timeline_tokens_per_s, 0.0, t_end, width)

    @staticmethod
    def _time_axis(t_end: float, width: int) -> str:
        """0:00 on the left, the axis end on the right, the middle between when it fits."""
        left, right, mid = format_clock(0), format_clock(t_end), format_clock(t_end / 2)
        axis = [" "] * width
        for pos, label in ((0, left), (width - len(right), right), ((width - len(mid)) // 2, mid)):
            if pos < 0 or pos + len(label) > width:
                continue
            if any(c != " " for c in axis[max(0, pos - 1) : pos + len(label) + 1]):
                continue
            axis[pos : pos + len(label)] = label
        return "".join(axis)


def _append_with_line(
    text: Text, row: str, on_line: np.ndarray, glyphs: list[str], style: Style, line_style: Style
) -> None:
    """``row`` with the baseline's line through the cells ``on_line`` (across a full bar on its colour)."""
    across = line_style + Style(bgcolor=style.color)
    for piece, kind in line_over_bars(row, on_line, glyphs):
        text.append(piece, style=style if kind == 0 else line_style if kind == 1 else across)


def axis_labels(hi: float, rows: int) -> list[str]:
    """The y-axis: each labelled row's top value (``1.3M``, ``1.1M`` ... ``0`` on the bottom row), about
    five labels whatever the height, in one unit and with the decimals that tell neighbours apart. The
    mean's row says ``mean`` instead, so a chart whose mean sits near the top still carries numbers."""
    scale, prefix = next(((s, p) for s, p in ((1e9, "G"), (1e6, "M"), (1e3, "k")) if hi >= s), (1.0, ""))
    step = max(1, round(rows / 5))
    decimals = 0 if hi / rows * step / scale >= 1 else 1 if hi / rows * step / scale >= 0.1 else 2
    labels = []
    for r in range(rows):
        if r == rows - 1:
            labels.append("0")
        elif r % step == 0 and rows - 1 - r >= step // 2:
            labels.append(f"{hi * (rows - r) / rows / scale:.{decimals}f}{prefix}")
        else:
            labels.append("")
    return labels
