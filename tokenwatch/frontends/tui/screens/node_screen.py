"""One node in detail: per-GPU timelines and clock-event reasons, its share of the rack's throughput and
its recent log lines. The replay keys work here too (pause to look closely)."""

from __future__ import annotations

import math
from typing import ClassVar

import numpy as np
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import Log, Static

from tokenwatch.base import throttle
from tokenwatch.base.formatting import DASH, format_clock, group, printable
from tokenwatch.core.node_history import NodeHistory
from tokenwatch.core.snapshot import RackSnapshot
from tokenwatch.core.views import scale_reference
from tokenwatch.frontends.tui.palette import palette
from tokenwatch.frontends.tui.screens.replay_screen import ReplayScreen
from tokenwatch.frontends.tui.widgets.gpu_timelines import SERIES, GpuTimelines, TimelineMark
from tokenwatch.frontends.tui.widgets.kept_footer import KeptFooter
from tokenwatch.frontends.tui.widgets.node_table import STATUS_LABEL, node_condition, tokens_per_joule_cell


class NodeScreen(ReplayScreen):
    CSS_PATH = "node_screen.tcss"

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "app.pop_screen", "Back"),
        Binding("left_square_bracket", "step(-1)", "Prev node"),
        Binding("right_square_bracket", "step(1)", "Next node"),
    ]

    def __init__(self, node: str, nodes: tuple[str, ...]) -> None:
        super().__init__()
        self.node = node
        self.nodes = nodes
        self._log_shown: tuple[float, int] | None = None  # (last line's t, count) on screen

    def compose(self) -> ComposeResult:
        yield Static("", id="node-title")
        with Horizontal(id="node-body"):
            with VerticalScroll(id="node-series"):
                yield GpuTimelines(id="timelines")
            with Vertical(id="node-log-panel"):
                yield Log(id="node-log", max_lines=500)
        yield KeptFooter()

    def on_mount(self) -> None:
        self.query_one("#node-log-panel").border_title = "Log"
        self.query_one("#node-series").border_title = "Per-GPU timelines"
        # Draw now: a paused replay sends no new data, so the refresh timer would never draw this screen.
        self.call_after_refresh(self.redraw_now)

    def on_screen_resume(self) -> None:
        self.redraw_now()

    def action_step(self, delta: int) -> None:
        if self.node in self.nodes:
            self.node = self.nodes[(self.nodes.index(self.node) + delta) % len(self.nodes)]
            self._log_shown = None
            self.query_one("#node-log", Log).clear()
            self.redraw_now()

    def show_snapshot(self, snap: RackSnapshot, history: NodeHistory | None, badge: str = "") -> None:
        self._title(snap, history, badge)
        if history is not None:
            references = {metric: scale_reference(snap, metric) for metric, *_ in SERIES}
            self.query_one(GpuTimelines).update_history(history, references, self._marks(snap))
            self._log(history)

    def _marks(self, snap: RackSnapshot) -> tuple[TimelineMark, ...]:
        """The moments to mark on the node's timelines: when its cause hint's evidence began (on the series
        that shows it, its GPU's row or every row), and its GPUs' power-limit changes (on power)."""
        rows = snap.nodes
        marks: list[TimelineMark] = []
        for change in snap.power_limit_changes:
            if change.node == self.node:
                label = f"limit {'▼' if change.lowered else '▲'} {group(change.new_w)} W"
                gpu = None if change.all_gpus else change.gpus[0]
                marks.append(TimelineMark(change.t, "power_w", gpu, label))
        if self.node in rows.names and rows.causes:
            cause = rows.causes[rows.index(self.node)]
            # A power-limit hint's moment is its change, already marked.
            if (
                cause is not None
                and cause.metric
                and cause.kind != "power_limit"
                and math.isfinite(cause.since_t)
            ):
                marks.append(TimelineMark(cause.since_t, cause.metric, cause.gpu, f"{cause.kind} since"))
        return tuple(marks)

    def _title(self, snap: RackSnapshot, history: NodeHistory | None, badge: str) -> None:
        """Three lines: who and how it is (status, why, throttle reasons, run time, replay state); its
        figures; why it is slow (its cause hint)."""
        pal = palette(self.app)
        text = Text(no_wrap=True, overflow="crop")
        text.append(f" {printable(self.node)} ", style=pal.cursor)
        rows = snap.nodes
        if self.node not in rows.names:
            text.append("  not in this run", style=pal.muted)
            self.query_one("#node-title", Static).update(text)
            return
        i = rows.index(self.node)
        condition = node_condition(rows, i)
        good = condition in ("up", "idle", "finished")
        text.append(f"  {STATUS_LABEL[condition]}", style=pal.good if good else pal.bad)
        if rows.reason[i] and not good:
            text.append(f" ({printable(rows.reason[i])})", style=pal.muted)
        reasons = self._limiting_reasons(snap, i)
        if reasons:
            text.append(f" [{reasons}]", style=pal.warn)
        text.append("   run time ", style=pal.muted)
        text.append(format_clock(snap.t), style="bold")
        if badge:
            text.append(f"   {badge}", style=pal.accent)
        delta = rows.delta_vs_median_pct[i]
        share = history.share_pct[-1] if history is not None and len(history.share_pct) else math.nan
        text.append("\n")
        for label, value in (
            ("now", f"{group(rows.tokens_per_s[i])} tok/s"),
            ("mean", f"{group(rows.mean_tokens_per_s[i])} tok/s"),
            ("vs median", f"{delta:+.1f}%" if math.isfinite(delta) else DASH),
            ("share", f"{share:.2f}%" if math.isfinite(share) else DASH),
            ("progress", f"{rows.progress_pct[i]:.0f}%" if math.isfinite(rows.progress_pct[i]) else DASH),
            ("tok/J", tokens_per_joule_cell(rows, i)),
        ):
            text.append(f" {label} ", style=pal.muted)
            text.append(value + "  ", style="bold")
        text.append("\n")
        self._cause_line(text, snap, i)
        self.query_one("#node-title", Static).update(text)

    def _cause_line(self, text: Text, snap: RackSnapshot, i: int) -> None:
        """Why it is slow (the cause hint, when it is a straggler), or that there is nothing to explain."""
        pal = palette(self.app)
        cause = snap.nodes.causes[i] if snap.nodes.causes else None
        text.append(" cause ", style=pal.muted)
        if cause is None:
            text.append("none: not a straggler", style=pal.muted)
            return
        text.append(cause.text, style=pal.warn)

    @staticmethod
    def _limiting_reasons(snap: RackSnapshot, i: int) -> str:
        """The clock-event reasons that slow the node's GPUs now (power cap, slowdowns), by name."""
        if not snap.gpus.throttle_reasons.size or not snap.nodes.throttling[i]:
            return ""
        mask = int(np.bitwise_or.reduce(snap.gpus.throttle_reasons[i])) & throttle.LIMITING_REASONS
        return ", ".join(throttle.reason_names(mask))

    def _log(self, history: NodeHistory) -> None:
        log = self.query_one("#node-log", Log)
        lines = history.log_lines
        panel = self.query_one("#node-log-panel")
        if not lines:
            if self._log_shown != (-1.0, 0):
                log.clear()
                log.write_lines(["No log lines for this node:", "no log source is configured."])
                self._log_shown = (-1.0, 0)
            panel.border_subtitle = ""
            return
        marker = (lines[-1][0], len(lines))
        if marker == self._log_shown:
            return
        log.clear()
        log.write_lines(f"{format_clock(t)}  {printable(line)}" for t, line in lines)
        self._log_shown = marker
        panel.border_subtitle = f"{len(lines)} recent lines"
