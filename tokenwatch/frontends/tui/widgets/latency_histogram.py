"""TTFT / TPOT / end-to-end latency on a log axis, with p50/p90/p99 markers and the SLA line.

The core's fine log buckets are re-binned by the core (:func:`tokenwatch.core.views.display_histogram`)
onto one bucket per character column; this widget only places them. The axis has a tick at every
decade (and at the 2s and 5s where there is room), labelled where the label fits. ``l`` or a click on a
metric's name switches metric. With ``--baseline``, the baseline's histogram (scaled to the run's count, on
the same axis) is a line over the columns (``─``), its p99 in the legend.
"""

from __future__ import annotations

import math
import textwrap

import numpy as np
from rich.style import Style
from rich.text import Text
from textual import events
from textual.app import RenderResult
from textual.widget import Widget

from tokenwatch.base.events import LATENCY_METRICS, LatencyMetric
from tokenwatch.base.formatting import group, latency_figure, seconds_label, seconds_ms
from tokenwatch.core.baseline.display import overlay_histogram
from tokenwatch.core.baseline.view import BaselineLatency
from tokenwatch.core.snapshot import LatencyStats, RackSnapshot
from tokenwatch.core.views import display_histogram
from tokenwatch.frontends.tui.charts import column_rows, log_ticks
from tokenwatch.frontends.tui.palette import Palette, palette
from tokenwatch.frontends.tui.panel_css import panel_css

METRIC_NAMES: dict[LatencyMetric, str] = {"ttft": "TTFT", "tpot": "TPOT", "e2e": "End-to-end"}


def axis_lines(edges_lo_s: float, edges_hi_s: float, bins: int) -> tuple[str, str]:
    """The axis under a ``bins``-column log chart: a baseline with a mark at every tick (``┴`` decades,
    ``╵`` the 2s and 5s), and the labels centred under their marks, decades first, none overlapping."""
    lo, hi = math.log10(edges_lo_s), math.log10(edges_hi_s)
    marks = ["─"] * bins
    labels = [" "] * bins
    ticks = log_ticks(edges_lo_s, edges_hi_s)
    for major in (True, False):
        for value, is_major in ticks:
            if is_major != major:
                continue
            c = min(bins - 1, int((math.log10(value) - lo) / (hi - lo) * bins))
            marks[c] = "┴" if major else "╵"
            label = seconds_label(value, space="")
            start = min(max(0, c - len(label) // 2), bins - len(label))
            if start >= 0 and all(ch == " " for ch in labels[max(0, start - 1) : start + len(label) + 1]):
                labels[start : start + len(label)] = label
    return "".join(marks), "".join(labels)


class LatencyHistogram(Widget):
    DEFAULT_CSS = (
        panel_css("LatencyHistogram")
        + """
    LatencyHistogram { text-wrap: nowrap; text-overflow: clip; }
    """
    )

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.metric: LatencyMetric = "ttft"
        self.snapshot: RackSnapshot | None = None
        self._tab_spans: list[tuple[int, int, LatencyMetric]] = []

    def on_mount(self) -> None:
        self.border_title = "Latency"
        self.border_subtitle = "l: TTFT / TPOT / E2E"

    def update_snapshot(self, snap: RackSnapshot) -> None:
        self.snapshot = snap
        self.refresh()

    def cycle_metric(self) -> None:
        self.metric = LATENCY_METRICS[(LATENCY_METRICS.index(self.metric) + 1) % len(LATENCY_METRICS)]
        self.refresh()

    def show_metric(self, metric: LatencyMetric) -> None:
        self.metric = metric
        self.refresh()

    def on_click(self, event: events.Click) -> None:
        offset = event.get_content_offset(self)
        if offset is None or offset.y != 0:
            return
        for start, end, metric in self._tab_spans:
            if start <= offset.x < end:
                self.show_metric(metric)

    def _tabs(self, pal: Palette) -> Text:
        text = Text(no_wrap=True, overflow="crop")
        self._tab_spans = []
        for metric in LATENCY_METRICS:
            label = f" {METRIC_NAMES[metric]} "
            start = text.cell_len
            text.append(label, style=pal.cursor if metric == self.metric else pal.muted)
            self._tab_spans.append((start, text.cell_len, metric))
            text.append(" ")
        return text

    def render(self) -> RenderResult:
        pal = palette(self.app)
        width, height = self.content_size
        text = self._tabs(pal)
        snap = self.snapshot
        if snap is None:
            return text
        stats = snap.latency.get(self.metric)
        if stats is None or stats.count == 0:
            text.append("\n\n")
            if not snap.latency and snap.run.scenario == "Offline":
                message = (
                    "Offline run: no latency source. TTFT, TPOT and end-to-end histograms appear in "
                    "Server runs, or when the source reports per-query latencies."
                )
                text.append("\n".join(textwrap.wrap(message, max(20, width))), style=pal.muted)
            else:
                text.append(f"waiting for {METRIC_NAMES[self.metric]} data…", style=pal.muted)
            return text
        sla = snap.sla_s.get(self.metric, math.nan)
        text.append(
            f" n={group(stats.count)}  mean {seconds_ms(stats.mean)}  max {seconds_ms(stats.max)}",
            style=pal.muted,
        )
        reference = snap.baseline.latency.get(self.metric) if snap.baseline is not None else None
        if reference is not None and reference.count:
            text.append(f"  ─ baseline p99 {seconds_ms(reference.p99)}", style=pal.text)
        text.append("\n")
        self._chart(text, pal, stats, sla, width, max(1, height - 5), reference)
        return text

    def _chart(
        self,
        text: Text,
        pal: Palette,
        stats: LatencyStats,
        sla: float,
        width: int,
        rows: int,
        reference: BaselineLatency | None = None,
    ) -> None:
        include = (sla,) if math.isfinite(sla) else ()
        ref_counts = None
        if reference is not None and reference.count:
            hist, ref_counts = overlay_histogram(stats, reference, max(4, width), include)
        else:
            hist = display_histogram(stats, max(4, width), include_s=include)
        lo, hi = math.log10(hist.edges_s[0]), math.log10(hist.edges_s[-1])
        bins = len(hist.counts)

        def column(seconds: float) -> int:
            if not (math.isfinite(seconds) and seconds > 0):
                return -1
            return int((math.log10(seconds) - lo) / (hi - lo) * bins)

        styles = {"p50": pal.text, "p90": pal.accent, "p99": pal.warn, "SLA": pal.bad}
        markers = {
            column(stats.p50): ("p50", styles["p50"], "┆"),
            column(stats.p90): ("p90", styles["p90"], "┆"),
            column(stats.p99): ("p99", styles["p99"], "┆"),
        }
        if math.isfinite(sla):
            markers[column(sla)] = ("SLA", styles["SLA"], "┃")
        # Legend line: the marker values, each in its marker's colour.
        # LoadGen's exact figures as they are; the buckets' estimates marked "~" (they hold ~3 digits).
        for name, value in (("p50", stats.p50), ("p90", stats.p90), ("p99", stats.p99)):
            text.append(f"{name} ", style=styles[name])
            text.append(f"{latency_figure(value, not stats.exact)}   ", style="bold")
        if math.isfinite(sla):
            breach = stats.p99 > sla
            text.append(f"SLA {seconds_ms(sla)}", style=pal.bad)
            text.append(" ✗ p99 over" if breach else " ✓ p99 under", style=pal.bad if breach else pal.good)
        text.append("\n")
        counts = hist.counts
        top = float(counts.max()) if counts.size else 1.0
        if ref_counts is not None and ref_counts.size:
            top = max(top, float(ref_counts.max()))
        chart = column_rows(np.where(counts > 0, counts, np.nan), 0.0, top or 1.0, rows)
        ref_rows = np.full(len(counts), -1)
        if ref_counts is not None:  # the row the baseline's column reaches (the bar's own rounding)
            levels = np.round(ref_counts / (top or 1.0) * rows * 8)
            ref_rows = np.where(levels >= 1, rows - 1 - (levels - 1) // 8, -1).astype(int)
        across = pal.text + Style(bgcolor=pal.bar.color)
        for r, line in enumerate(chart):
            for c, ch in enumerate(line):
                if ref_rows[c] == r:  # the baseline's line: across a full bar on the bar's colour
                    text.append("─", style=across if ch == "█" else pal.text)
                elif ch == " " and c in markers:
                    _, style, glyph = markers[c]
                    text.append(glyph, style=style)
                elif c in markers and markers[c][0] == "SLA":
                    text.append(ch, style=pal.bad)
                else:
                    text.append(ch, style=pal.bar)
            text.append("\n")
        baseline, labels = axis_lines(float(hist.edges_s[0]), float(hist.edges_s[-1]), bins)
        text.append(baseline + "\n", style=pal.muted)
        text.append(labels, style=pal.muted)
