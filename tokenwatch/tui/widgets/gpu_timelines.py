"""A node's recent per-GPU series (power, clocks, HBM, temperature) and its share of the rack's throughput."""

from __future__ import annotations

import math

import numpy as np
from rich.text import Text
from textual.app import RenderResult
from textual.geometry import Size
from textual.widget import Widget

from tokenwatch.core.nan_math import finite_range
from tokenwatch.core.node_history import NodeHistory
from tokenwatch.formatting import DASH, format_clock
from tokenwatch.tui.charts import sparkline
from tokenwatch.tui.palette import Palette, palette

# metric -> (title, unit, divisor, decimals)
SERIES: tuple[tuple[str, str, str, float, int], ...] = (
    ("power_w", "Power", "W", 1.0, 0),
    ("sm_clock_mhz", "SM clock", "MHz", 1.0, 0),
    ("mem_clock_mhz", "Memory clock", "MHz", 1.0, 0),
    ("hbm_used_mib", "HBM used", "GiB", 1024.0, 1),
    ("temp_c", "Temperature", "°C", 1.0, 0),
)
_LABEL = 7
_VALUE = 10


def _fmt(value: float, divisor: float, decimals: int) -> str:
    return f"{value / divisor:,.{decimals}f}" if math.isfinite(value) else DASH


def _sparkline_row(
    text: Text, pal: Palette, label: str, values: np.ndarray, lo: float, hi: float, width: int, now: str
) -> None:
    """One line: the label, the series as a sparkline on the scale lo..hi, its newest value."""
    text.append(f"{label:<{_LABEL}}", style=pal.muted)
    text.append(sparkline(values, lo, hi, width), style=pal.bar)
    text.append(f"{now:>{_VALUE}}\n", style="bold")


class GpuTimelines(Widget):
    """Set ``history`` (a :class:`NodeHistory`); one sparkline per GPU per metric, on a shared scale."""

    DEFAULT_CSS = """
    GpuTimelines {
        text-wrap: nowrap;
        text-overflow: clip;
        height: auto;
        padding: 0 1;
    }
    """

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.history: NodeHistory | None = None

    def update_history(self, history: NodeHistory) -> None:
        lines_before = self._line_count()
        self.history = history
        self.refresh(layout=self._line_count() != lines_before)

    def _line_count(self) -> int:
        if self.history is None:
            return 1
        gpus = next(iter(self.history.gpu_series.values())).shape[0] if self.history.gpu_series else 0
        return 3 + len(SERIES) * (gpus + 2)

    def get_content_height(self, _container: Size, _viewport: Size, _width: int) -> int:
        return self._line_count()

    def render(self) -> RenderResult:
        history = self.history
        pal = palette(self.app)
        if history is None:
            return Text("waiting for data…", style=pal.muted)
        width = max(8, self.content_size.width - _LABEL - _VALUE - 1)
        text = Text(no_wrap=True, overflow="crop")
        shown = history.times[-width:]
        window = f"last {format_clock(shown[-1] - shown[0])}" if len(shown) >= 2 else "no samples yet"
        text.append(f"Throughput share of the rack ({window})\n", style=pal.header)
        share = history.share_pct
        now_share = f"{share[-1]:.2f} %" if len(share) and math.isfinite(share[-1]) else DASH
        _sparkline_row(text, pal, "share", share, *finite_range(share), width, now_share)
        rate = history.tokens_per_s
        now_rate = f"{rate[-1]:,.0f}" if len(rate) and math.isfinite(rate[-1]) else DASH
        _sparkline_row(text, pal, "tok/s", rate, *finite_range(rate), width, now_rate)
        for key, title, unit, divisor, decimals in SERIES:
            series = history.gpu_series.get(key)
            if series is None:
                continue
            lo, hi = finite_range(series)
            scale = f"{_fmt(lo, divisor, decimals)} – {_fmt(hi, divisor, decimals)} {unit}"
            text.append(f"\n{title} ", style=pal.header)
            text.append(f"({scale})\n", style=pal.muted)
            for g in range(series.shape[0]):
                row = series[g]
                last = row[np.isfinite(row)]
                now = _fmt(float(last[-1]), divisor, decimals) if last.size else DASH
                _sparkline_row(text, pal, f"GPU{g}", row, lo, hi, width, now)
        return text
