"""A node's share of the rack's throughput, its GPUs' clock-event reasons over time, and its recent
per-GPU series (power, clocks, HBM, temperature).

Every series is drawn as the core gives it: a point with no fresh reading is a gap, never the last
value carried on, and the value at the right is the newest point's (a dash once the data has ended).
Each metric's bars stretch over the core's value scale, never narrower than the metric's minimum span
(:func:`tokenwatch.core.views.value_scale`), so noise does not look like a difference.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from rich.text import Text
from textual.app import RenderResult
from textual.geometry import Size
from textual.widget import Widget

from tokenwatch.base import throttle
from tokenwatch.base.formatting import DASH, format_clock
from tokenwatch.core.nan_math import finite_range
from tokenwatch.core.node_history import NodeHistory
from tokenwatch.core.views import value_scale
from tokenwatch.frontends.tui.charts import sparkline
from tokenwatch.frontends.tui.palette import Palette, palette

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
# One letter per point for the clock-event reasons that slow a GPU, the most severe first when several
# are set; "·" none, "-" only reasons that do not slow it (idle, application clocks, sync boost).
REASON_LETTERS: tuple[tuple[int, str, str], ...] = (
    (throttle.HW_POWER_BRAKE_SLOWDOWN, "B", "power brake"),
    (throttle.HW_SLOWDOWN, "H", "HW slowdown"),
    (throttle.HW_THERMAL_SLOWDOWN | throttle.SW_THERMAL_SLOWDOWN, "T", "thermal"),
    (throttle.SW_POWER_CAP, "P", "power cap"),
)
REASON_KEY = "  ".join(f"{letter} {name}" for _, letter, name in REASON_LETTERS) + "  · none"


@dataclass(frozen=True, slots=True)
class TimelineMark:
    """A moment to mark on one metric's timelines: run time ``t`` (s), the GPU it concerns (None: all of
    the node's), and a short label (``throttle since``, ``limit ▼ 1,200 W``)."""

    t: float
    metric: str
    gpu: int | None
    label: str


def mark_row(times: np.ndarray, marks: Sequence[TimelineMark], width: int) -> str:
    """One row as wide as the sparklines: ``▼`` over the point at or after each mark's time (the newest
    ``width`` points, right-aligned as the sparklines are), each label beside its arrow where it fits; a
    mark older than the shown points is ``◀`` at their left edge (it began before them)."""
    row = [" "] * width
    shown = times[-width:]
    offset = width - len(shown)
    at_column: dict[int, list[str]] = {}
    for mark in sorted(marks, key=lambda m: m.t):
        if not len(shown) or mark.t > shown[-1]:
            continue
        col = offset + int(np.searchsorted(shown, mark.t))
        row[col] = "▼" if mark.t >= shown[0] else "◀"
        who = f"GPU{mark.gpu} " if mark.gpu is not None else ""
        said = f"{who}{mark.label} {format_clock(mark.t)}"
        if said not in at_column.setdefault(col, []):  # marks at one moment share one arrow
            at_column[col].append(said)
    for col, words in at_column.items():  # labels after their arrow, else before it; never over another
        label = " " + " · ".join(words)
        start = col + 1 if col + 1 + len(label) <= width else col - len(label)
        if start >= 0 and all(c == " " for c in row[start : start + len(label)]):
            row[start : start + len(label)] = label
    return "".join(row)


def reason_letter(mask: int) -> str:
    for bits, letter, _ in REASON_LETTERS:
        if mask & bits:
            return letter
    return "-" if mask else "·"


def reason_row(masks: np.ndarray, present: np.ndarray, width: int) -> str:
    """The newest ``width`` points as letters (a gap where the GPU had no reading), right-aligned."""
    letters = [
        reason_letter(int(m)) if ok else " " for m, ok in zip(masks[-width:], present[-width:], strict=True)
    ]
    return "".join(letters).rjust(width)


def _fmt(value: float, divisor: float, decimals: int) -> str:
    return f"{value / divisor:,.{decimals}f}" if math.isfinite(value) else DASH


def _newest(values: np.ndarray) -> float:
    """The newest point, NaN included: a series whose data has ended has no value now."""
    return float(values[-1]) if len(values) else math.nan


def _sparkline_row(
    text: Text, pal: Palette, label: str, values: np.ndarray, lo: float, hi: float, width: int, now: str
) -> None:
    """One line: the label, the series as a sparkline on the scale lo..hi, its newest value."""
    text.append(f"{label:<{_LABEL}}", style=pal.muted)
    text.append(sparkline(values, lo, hi, width), style=pal.bar)
    text.append(f"{now:>{_VALUE}}\n", style="bold" if now != DASH else pal.muted)


class GpuTimelines(Widget):
    """Call ``update_history``; one sparkline per GPU per metric on a shared scale, then the reasons."""

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
        self.references: Mapping[str, float] = {}
        self.marks: tuple[TimelineMark, ...] = ()

    def update_history(
        self,
        history: NodeHistory,
        references: Mapping[str, float] | None = None,
        marks: Sequence[TimelineMark] = (),
    ) -> None:
        """``references``: per metric, the limit or capacity its minimum span is a fraction of (the
        power limit, the HBM capacity; :func:`tokenwatch.core.views.scale_reference`). ``marks``: moments
        to mark (a cause hint's start, a power-limit change) above their metric's rows."""
        lines_before = self._line_count()
        self.history = history
        self.references = references or {}
        self.marks = tuple(marks)
        self.refresh(layout=self._line_count() != lines_before)

    def _gpus(self) -> int:
        history = self.history
        if history is None or not history.gpu_series:
            return 0
        return int(next(iter(history.gpu_series.values())).shape[0])

    def _line_count(self) -> int:
        if self.history is None:
            return 1
        gpus = self._gpus()
        marked = len({m.metric for m in self.marks} & {key for key, *_ in SERIES})
        return 3 + len(SERIES) * (gpus + 2) + (gpus + 3) + marked

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
        # Scales are over the points on screen (the newest `width`), not the whole window kept.
        share = history.share_pct[-width:]
        now_share = _newest(share)
        _sparkline_row(
            text,
            pal,
            "share",
            share,
            *finite_range(share),
            width,
            f"{now_share:.2f} %" if math.isfinite(now_share) else DASH,
        )
        rate = history.tokens_per_s[-width:]
        now_rate = _newest(rate)
        _sparkline_row(
            text,
            pal,
            "tok/s",
            rate,
            *finite_range(rate),
            width,
            f"{now_rate:,.0f}" if math.isfinite(now_rate) else DASH,
        )
        self._reasons(text, pal, history, width)
        for key, title, unit, divisor, decimals in SERIES:
            series = history.gpu_series.get(key)
            if series is None:
                continue
            series = series[:, -width:]
            scale = value_scale(key, series, self.references.get(key, math.nan))
            span = f"{_fmt(scale.low, divisor, decimals)} – {_fmt(scale.high, divisor, decimals)} {unit}"
            if scale.widened:
                span += f", min span {_fmt(scale.min_span, divisor, decimals)}"
            text.append(f"\n{title} ", style=pal.header)
            text.append(f"({span})\n", style=pal.muted)
            marks = [m for m in self.marks if m.metric == key]
            if marks:  # the moment evidence began, or a limit changed, over the rows that show it
                text.append(" " * _LABEL)
                text.append(f"{mark_row(history.times, marks, width)}\n", style=pal.warn)
            for g in range(series.shape[0]):
                row = series[g]
                now = _fmt(_newest(row), divisor, decimals)
                _sparkline_row(text, pal, f"GPU{g}", row, scale.low, scale.high, width, now)
        return text

    def _reasons(self, text: Text, pal: Palette, history: NodeHistory, width: int) -> None:
        """Per GPU, the clock-event reasons at each point; at the right, the newest point's by letter."""
        text.append("\nClock-event reasons ", style=pal.header)
        text.append(f"({REASON_KEY})\n", style=pal.muted)
        reasons = history.throttle_reasons
        clock = history.gpu_series.get("sm_clock_mhz")
        for g in range(reasons.shape[0]):
            masks = reasons[g]
            present = np.isfinite(clock[g]) if clock is not None else np.ones(len(masks), bool)
            text.append(f"{f'GPU{g}':<{_LABEL}}", style=pal.muted)
            for ch in reason_row(masks, present, width):
                text.append(ch, style=pal.muted if ch in " ·-" else (pal.text if ch == "P" else pal.warn))
            now = reason_letter(int(masks[-1])) if len(masks) and present[-1] else DASH
            text.append(f"{now:>{_VALUE}}\n", style=pal.muted if now in (DASH, "·", "-", "P") else pal.warn)
        names = self._newest_names(history)
        text.append(f"now: {names}\n" if names else "now: no reason that slows a GPU\n", style=pal.muted)

    @staticmethod
    def _newest_names(history: NodeHistory) -> str:
        """``GPU0,1 hw_slowdown, sw_thermal_slowdown; GPU2,3 sw_power_cap``: the newest point's reasons
        by name, GPUs with the same reasons together."""
        reasons = history.throttle_reasons
        if not reasons.shape[1]:
            return ""
        by_mask: dict[int, list[str]] = {}
        for g in range(reasons.shape[0]):
            mask = int(reasons[g, -1])
            if mask:
                by_mask.setdefault(mask, []).append(str(g))
        return "; ".join(
            f"GPU{','.join(gpus)} {', '.join(throttle.reason_names(mask))}" for mask, gpus in by_mask.items()
        )
