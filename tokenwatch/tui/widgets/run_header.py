"""The header panel: what is running, how far it is, and the rack's throughput in large digits."""

from __future__ import annotations

import math

from rich.style import Style
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.reactive import reactive
from textual.widget import Widget
from textual.widgets import Static

from tokenwatch.core.snapshot import RackSnapshot
from tokenwatch.formatting import DASH, format_clock, group, kilowatts
from tokenwatch.tui.charts import hbar
from tokenwatch.tui.palette import palette
from tokenwatch.tui.widgets.big_figure import BigFigure


def stat_columns(pairs: list[tuple[str, str | Text]], width: int, rows: int = 3) -> Text:
    """Label/value pairs laid out column by column, ``rows`` high, as many columns as fit ``width``."""
    cells = [
        (label, value if isinstance(value, Text) else Text(value, style="bold")) for label, value in pairs
    ]
    columns = [cells[i : i + rows] for i in range(0, len(cells), rows)]
    widths = [
        max(len(label) for label, _ in col) + 1 + max(v.cell_len for _, v in col) + 2 for col in columns
    ]
    while len(columns) > 1 and sum(widths) > width:
        columns, widths = columns[:-1], widths[:-1]
    text = Text(no_wrap=True, overflow="crop")
    for r in range(rows):
        if r:
            text.append("\n")
        for col, col_width in zip(columns, widths, strict=True):
            if r >= len(col):
                continue
            label, value = col[r]
            label_w = max(len(lbl) for lbl, _ in col) + 1
            text.append(f"{label:<{label_w}}", style="dim")
            text.append_text(value)
            text.append(" " * max(0, col_width - label_w - value.cell_len))
    return text


class RunHeader(Widget):
    """Set ``badge`` (``SIM x10``, ``LIVE``, ``REPLAY x30``) and ``snapshot``; the header does the rest."""

    DEFAULT_CSS = """
    RunHeader {
        height: 5;
        background: $panel;
        padding: 0 1;
    }
    RunHeader #title-row { height: 1; }
    RunHeader #badge {
        width: auto;
        background: $accent;
        color: $background;
        text-style: bold;
        padding: 0 1;
        margin-right: 1;
    }
    RunHeader #badge.-live { background: $success; }
    RunHeader #badge.-replay { background: $primary; }
    RunHeader #title { width: 1fr; text-style: bold; text-wrap: nowrap; text-overflow: ellipsis; }
    RunHeader #state { width: auto; margin-left: 1; }
    RunHeader #figure-row { height: 3; }
    RunHeader #rate { margin-right: 1; }
    RunHeader #rate-unit { width: 7; color: $text-muted; }
    RunHeader #stats { width: 1fr; }
    RunHeader #progress { height: 1; }
    """

    snapshot: reactive[RackSnapshot | None] = reactive(None, always_update=True)
    badge: reactive[str] = reactive("SIM")

    def compose(self) -> ComposeResult:
        with Horizontal(id="title-row"):
            yield Static(self.badge, id="badge")
            yield Static("waiting for a run…", id="title")
            yield Static("", id="state")
        with Horizontal(id="figure-row"):
            yield BigFigure("-", id="rate")
            yield Static("tok/s\nnow", id="rate-unit")
            yield Static("", id="stats")
        yield Static("", id="progress")

    def watch_badge(self, badge: str) -> None:
        if not self.is_mounted:
            return
        widget = self.query_one("#badge", Static)
        widget.update(badge)
        widget.set_class(badge.startswith("LIVE"), "-live")
        widget.set_class(badge.startswith("REPLAY"), "-replay")

    def on_mount(self) -> None:
        self.watch_badge(self.badge)
        if self.snapshot is not None:
            self.watch_snapshot(self.snapshot)

    def on_resize(self) -> None:
        if self.snapshot is not None:
            self.watch_snapshot(self.snapshot)

    def watch_snapshot(self, snap: RackSnapshot | None) -> None:
        if snap is None or not self.is_mounted:
            return
        run, agg = snap.run, snap.aggregate
        started = bool(run.nodes)
        pal = palette(self.app)
        title = f"{run.name} · {run.scenario}" if started else run.name
        if started:
            title += f" · {len(run.nodes)} nodes × {run.gpus_per_node} GPUs"
        self.query_one("#title", Static).update(title)
        state = Text()
        if snap.ended:
            state.append(f"■ ended: {snap.end_reason}", style=pal.muted)
        elif started:
            state.append("● running", style=pal.good)
        self.query_one("#state", Static).update(state)

        final = snap.ended and math.isfinite(agg.tokens_per_s_cumulative)
        rate = agg.tokens_per_s_cumulative if final else agg.tokens_per_s
        self.query_one("#rate", BigFigure).value = group(rate) if math.isfinite(rate) else "-"
        self.query_one("#rate-unit", Static).update("tok/s\nfinal" if final else "tok/s\nnow")

        up_style = pal.good if agg.nodes_up == agg.nodes else pal.bad
        nodes = Text(f"{agg.nodes_up}/{agg.nodes} up", style=up_style + Style(bold=True))
        samples = group(agg.samples_done)
        if run.total_samples:
            samples += f" / {group(run.total_samples)}"
        per_gpu = (
            f"{group(agg.per_gpu_tokens_per_s)} tok/s" if math.isfinite(agg.per_gpu_tokens_per_s) else DASH
        )
        tpj = f"{agg.tokens_per_joule:.2f}" if math.isfinite(agg.tokens_per_joule) else DASH
        stats = stat_columns(
            [
                ("per GPU", per_gpu),
                ("power", kilowatts(agg.power_w)),
                ("nodes", nodes),
                ("run mean", f"{group(agg.tokens_per_s_cumulative)} tok/s"),
                ("tok/J", tpj),
                ("samples", samples),
                ("GPUs", f"{agg.gpus_reporting}/{agg.gpus} reporting"),
                ("energy", f"{agg.energy_j / 3.6e6:,.1f} kWh"),
            ],
            self.query_one("#stats", Static).content_size.width or 80,
        )
        self.query_one("#stats", Static).update(stats)
        self.query_one("#progress", Static).update(self._progress_line(snap))

    def _progress_line(self, snap: RackSnapshot) -> Text:
        pal = palette(self.app)
        nominal = snap.run.nominal_duration_s
        clock = f"{format_clock(snap.t)} / {format_clock(nominal) if nominal else '--:--'}"
        pct = snap.progress_pct
        eta = (
            "done"
            if snap.ended
            else (f"ETA {format_clock(snap.eta_s)}" if snap.eta_s is not None else "ETA --:--")
        )
        tail = f" {pct:5.1f}%  {eta}" if pct is not None else f"  {eta}"
        width = max(0, self.content_size.width - len(clock) - len(tail) - 4)
        text = Text(no_wrap=True, overflow="crop")
        text.append(clock, style="bold")
        text.append("  ▕")
        text.append(hbar((pct or 0.0) / 100.0, width), style=pal.bar)
        text.append("▏")
        text.append(tail)
        return text
