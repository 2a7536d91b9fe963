"""The header panel: what is running, how far it is, and the rack's throughput in large digits."""

from __future__ import annotations

import math

from rich.style import Style
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.css.query import NoMatches
from textual.reactive import reactive
from textual.widget import Widget
from textual.widgets import Static

from tokenwatch.core.snapshot import RackSnapshot
from tokenwatch.formatting import DASH, group, kilowatts, printable
from tokenwatch.tui.palette import palette
from tokenwatch.tui.widgets.big_figure import BigFigure
from tokenwatch.tui.widgets.progress_line import ProgressLine, RunProgress
from tokenwatch.tui.widgets.stat_columns import StatColumns


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
    """

    snapshot: reactive[RackSnapshot | None] = reactive(None, always_update=True)
    badge: reactive[str] = reactive("SIM")

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self._shown: dict[str, str | Text] = {}

    def compose(self) -> ComposeResult:
        with Horizontal(id="title-row"):
            yield Static(self.badge, id="badge")
            yield Static("waiting for a run…", id="title")
            yield Static("", id="state")
        with Horizontal(id="figure-row"):
            yield BigFigure("-", id="rate")
            yield Static("tok/s\nnow", id="rate-unit")
            yield StatColumns(id="stats")
        yield ProgressLine(id="progress")

    def watch_badge(self) -> None:
        self._sync_badge()

    def on_mount(self) -> None:
        self._sync_badge()
        if self.snapshot is not None:
            self.watch_snapshot(self.snapshot)

    def _sync_badge(self) -> None:
        """Also called with every snapshot: a badge set before the children mounted still shows."""
        try:
            widget = self.query_one("#badge", Static)
        except NoMatches:
            return
        self._set("#badge", self.badge)
        widget.set_class(self.badge.startswith("LIVE"), "-live")
        widget.set_class(self.badge.startswith("REPLAY"), "-replay")

    def watch_snapshot(self, snap: RackSnapshot | None) -> None:
        if snap is None or not self.is_mounted:
            return
        self._sync_badge()
        run, agg = snap.run, snap.aggregate
        started = bool(run.nodes)
        pal = palette(self.app)
        title = f"{printable(run.name)} · {run.scenario}" if started else printable(run.name)
        if started:
            title += f" · {len(run.nodes)} nodes × {run.gpus_per_node} GPUs"
        self._set("#title", title)
        state = Text()
        if snap.ended:
            state.append(f"■ ended: {printable(snap.end_reason)}", style=pal.muted)
        elif started:
            state.append("● running", style=pal.good)
        self._set("#state", state)

        final = snap.ended and math.isfinite(agg.tokens_per_s_cumulative)
        rate = agg.tokens_per_s_cumulative if final else agg.tokens_per_s
        self.query_one("#rate", BigFigure).value = group(rate) if math.isfinite(rate) else "-"
        self._set("#rate-unit", "tok/s\nfinal" if final else "tok/s\nnow")

        up_style = pal.good if agg.nodes_up == agg.nodes else pal.bad
        nodes = Text(f"{agg.nodes_up}/{agg.nodes} up", style=up_style + Style(bold=True))
        samples = group(agg.samples_done)
        if run.total_samples:
            samples += f" / {group(run.total_samples)}"
        per_gpu = (
            f"{group(agg.per_gpu_tokens_per_s)} tok/s" if math.isfinite(agg.per_gpu_tokens_per_s) else DASH
        )
        tpj = f"{agg.tokens_per_joule:.2f}" if math.isfinite(agg.tokens_per_joule) else DASH
        self.query_one(StatColumns).pairs = (
            ("per GPU", per_gpu),
            ("power", kilowatts(agg.power_w)),
            ("nodes", nodes),
            ("run mean", f"{group(agg.tokens_per_s_cumulative)} tok/s"),
            ("tok/J", tpj),
            ("samples", samples),
            ("GPUs", f"{agg.gpus_reporting}/{agg.gpus} reporting"),
            ("energy", f"{agg.energy_j / 3.6e6:,.1f} kWh"),
        )
        self.query_one(ProgressLine).progress = RunProgress(
            snap.t, snap.run.nominal_duration_s, snap.progress_pct, snap.eta_s, snap.ended
        )

    def _set(self, selector: str, content: str | Text) -> None:
        """Update a line only when it changed (most header lines stay the same between refreshes)."""
        if self._shown.get(selector) != content:
            self._shown[selector] = content
            self.query_one(selector, Static).update(content)
