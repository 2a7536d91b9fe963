"""One node in detail: per-GPU timelines, its share of the rack's throughput and its recent log lines."""

from __future__ import annotations

import math
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Log, Static

from tokenwatch.core.node_history import NodeHistory
from tokenwatch.core.snapshot import RackSnapshot
from tokenwatch.formatting import DASH, format_clock, group, printable
from tokenwatch.tui.palette import palette
from tokenwatch.tui.widgets.gpu_timelines import GpuTimelines
from tokenwatch.tui.widgets.node_table import STATUS_LABEL, node_condition


class NodeScreen(Screen[None]):
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
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#node-log-panel").border_title = "Log"
        self.query_one("#node-series").border_title = "Per-GPU timelines"
        self._redraw()  # at once: a finished or paused replay sends no new snapshot by itself

    def _redraw(self) -> None:
        refresh = getattr(self.app, "refresh_data", None)
        if refresh is not None:
            refresh(force=True)

    def action_step(self, delta: int) -> None:
        if self.node in self.nodes:
            self.node = self.nodes[(self.nodes.index(self.node) + delta) % len(self.nodes)]
            self._log_shown = None
            self.query_one("#node-log", Log).clear()
            self._redraw()

    def show_snapshot(self, snap: RackSnapshot, history: NodeHistory | None) -> None:
        self._title(snap, history)
        if history is not None:
            self.query_one(GpuTimelines).update_history(history)
            self._log(history)

    def _title(self, snap: RackSnapshot, history: NodeHistory | None) -> None:
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
        good = condition in ("up", "finished")
        text.append(f"  {STATUS_LABEL[condition]}", style=pal.good if good else pal.bad)
        if rows.reason[i]:
            text.append(f" ({printable(rows.reason[i])})", style=pal.muted)
        delta = rows.delta_vs_median_pct[i]
        share = history.share_pct[-1] if history is not None and len(history.share_pct) else math.nan
        for label, value in (
            ("now", f"{group(rows.tokens_per_s[i])} tok/s"),
            ("mean", f"{group(rows.mean_tokens_per_s[i])} tok/s"),
            ("vs median", f"{delta:+.1f}%" if math.isfinite(delta) else DASH),
            ("share", f"{share:.2f}%" if math.isfinite(share) else DASH),
            ("progress", f"{rows.progress_pct[i]:.0f}%" if math.isfinite(rows.progress_pct[i]) else DASH),
            ("run time", format_clock(snap.t)),
        ):
            text.append(f"   {label} ", style=pal.muted)
            text.append(value, style="bold")
        self.query_one("#node-title", Static).update(text)

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
