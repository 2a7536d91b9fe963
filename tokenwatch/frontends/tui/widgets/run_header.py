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

from tokenwatch.base.formatting import DASH, energy, format_clock, group, kilowatts, part_of, printable
from tokenwatch.core.energy import SOURCE_MARK
from tokenwatch.core.snapshot import RackSnapshot
from tokenwatch.frontends.tui.palette import palette
from tokenwatch.frontends.tui.widgets.big_figure import BigFigure
from tokenwatch.frontends.tui.widgets.end_banner import end_kind
from tokenwatch.frontends.tui.widgets.progress_line import ProgressLine, RunProgress
from tokenwatch.frontends.tui.widgets.stat_columns import StatColumns
from tokenwatch.frontends.tui.widgets.verdict_badge import VerdictBadge

_WIDE_BASELINE = 110  # columns from which the header says the baseline in full (time, finish gap)
_ROOMY_BASELINE = 190  # columns from which it also says what the compared figures cover, in counts


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
    RunHeader #progress-row { height: 1; }
    RunHeader #progress { width: 1fr; }
    RunHeader #vs-baseline { width: auto; margin-left: 2; display: none; }
    RunHeader #vs-baseline.-shown { display: block; }
    """

    snapshot: reactive[RackSnapshot | None] = reactive(None, always_update=True)
    badge: reactive[str] = reactive("SIM")

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self._shown: dict[str, str | Text] = {}
        self.loading_text = ""  # a slow start under way (show_loading)

    def compose(self) -> ComposeResult:
        with Horizontal(id="title-row"):
            yield Static(self.badge, id="badge")
            yield Static("waiting for a run…", id="title")
            yield Static("", id="state")
            yield VerdictBadge(id="verdict-badge")
        with Horizontal(id="figure-row"):
            yield BigFigure("-", id="rate")
            yield Static("tok/s\nnow", id="rate-unit")
            yield StatColumns(id="stats")
        with Horizontal(id="progress-row"):
            yield ProgressLine(id="progress")
            yield Static("", id="vs-baseline")  # --baseline: the run against it, and the finish gap

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
        run = snap.run
        started = bool(run.nodes)
        pal = palette(self.app)
        title = f"{printable(run.name)} · {run.scenario}" if started else printable(run.name)
        if started:
            title += f" · {len(run.nodes)} nodes × {run.gpus_per_node} GPUs"
        self._set("#title", title)
        state = Text()
        if snap.ended:
            interrupted = snap.end_reason == "interrupted"
            state.append(
                "■ INTERRUPTED" if interrupted else "■ ended", style=pal.bad if interrupted else pal.muted
            )
        elif started:
            state.append("● running", style=pal.good)
        self._set("#state", self._loading_state(state))
        self.query_one(StatColumns).pairs = (
            self._figures(snap) if snap.summary is None else self._result(snap)
        )
        end_word = {"complete": "done", "partial": "ended", "interrupted": "interrupted"}.get(
            end_kind(snap), ""
        )
        of = "samples" if snap.run.total_samples else "nominal"
        self.query_one(ProgressLine).progress = RunProgress(snap.clock, snap.progress_pct, of, end_word)
        self.query_one(VerdictBadge).show(snap)
        self._show_baseline(snap)

    def show_loading(self, text: str) -> None:
        """A slow start under way (the session's load, past its quiet half second): said in place of the
        run's state, ``⧗ reading the backlog of 18 nodes:  39 %``; "" when none."""
        if text == self.loading_text:
            return
        self.loading_text = text
        if self.snapshot is not None and self.is_mounted:
            self.watch_snapshot(self.snapshot)
        elif self.is_mounted:
            self._set("#state", self._loading_state(Text()))

    def _loading_state(self, state: Text) -> Text:
        if not self.loading_text:
            return state
        return Text(f"⧗ {printable(self.loading_text)}", style=palette(self.app).warn)

    def _show_baseline(self, snap: RackSnapshot) -> None:
        """``vs baseline -2.1 % at 41:07 · finish +01:32, proj -1.8 %`` (the core's words and figures)."""
        view = snap.baseline
        widget = self.query_one("#vs-baseline", Static)
        widget.set_class(view is not None, "-shown")
        if view is None:
            return
        pal = palette(self.app)
        text = Text(no_wrap=True, overflow="ellipsis")
        if view.refused:
            text.append(view.headline(), style=pal.warn)
        else:
            delta = view.delta_pct
            style = pal.bad if delta <= -1.0 else pal.good if delta >= 1.0 else pal.text
            wide = self.size.width >= _WIDE_BASELINE
            text.append("vs baseline " if wide else "vs base ", style=pal.muted)
            text.append(view.delta_text(), style=style + Style(bold=True))
            if wide:  # narrow screens keep the delta and leave the progress bar some room
                text.append(f" at {format_clock(view.t)}", style=pal.muted)
                text.append(f" · {view.finish_text()}", style=pal.text)
            if view.covers_brief:  # a node down or stale in either run: the figure covers part of it
                roomy = self.size.width >= _ROOMY_BASELINE  # else the node table's title says which
                text.append(f" · {view.covers_brief}" if roomy else " *", style=pal.warn)
        self._set("#vs-baseline", text)

    def _figures(self, snap: RackSnapshot) -> tuple[tuple[str, str | Text], ...]:
        """While the run goes: the figures of now (the last window), beside the run's mean so far."""
        agg = snap.aggregate
        pal = palette(self.app)
        rate = agg.tokens_per_s
        self.query_one("#rate", BigFigure).value = group(rate) if math.isfinite(rate) else "-"
        self._set("#rate-unit", "tok/s\nnow")
        per_gpu = (
            f"{group(agg.per_gpu_tokens_per_s)} tok/s" if math.isfinite(agg.per_gpu_tokens_per_s) else DASH
        )
        tpj = f"{agg.tokens_per_joule:.2f}" if math.isfinite(agg.tokens_per_joule) else DASH
        up_style = pal.good if agg.nodes_up == agg.nodes else pal.bad
        return (
            ("per GPU", per_gpu),
            ("power", kilowatts(agg.power_w)),
            ("nodes", Text(f"{part_of(agg.nodes_up, agg.nodes)} up", style=up_style + Style(bold=True))),
            ("run mean", f"{group(agg.tokens_per_s_cumulative)} tok/s"),
            ("tok/J", tpj),
            ("samples", self._samples(snap)),
            ("GPUs", self._reporting(snap)),
            # The mark says what the energy is: the GPUs' counters (∑) or integrated power (∫).
            (f"energy {SOURCE_MARK.get(agg.energy_source, '')}".rstrip(), energy(agg.energy_j)),
        )

    def _result(self, snap: RackSnapshot) -> tuple[tuple[str, str | Text], ...]:
        """Once the run has ended: every headline figure is a run figure (the summary's), not the last
        window's (which, at the end, is the drain of the last few nodes)."""
        summary = snap.summary
        assert summary is not None
        pal = palette(self.app)
        self.query_one("#rate", BigFigure).value = group(summary.tokens_per_s)
        self._set("#rate-unit", "tok/s\nfinal")
        finished = sum(state == "finished" for state in snap.nodes.state)
        total = len(snap.nodes.names)
        nodes_style = (pal.good if finished == total else pal.bad) + Style(bold=True)
        tpj = summary.tokens_per_joule
        return (
            ("per GPU", f"{group(summary.per_gpu_tokens_per_s)} tok/s"),
            ("mean power", kilowatts(summary.power_mean_w)),
            ("nodes", Text(f"{part_of(finished, total)} finished", style=nodes_style)),
            ("run time", format_clock(summary.duration_s)),
            # The mark says what the energy is: the GPUs' counters (∑) or integrated power (∫).
            (f"tok/J {SOURCE_MARK.get(summary.energy_source or '', '')}".rstrip(), _tpj(tpj)),
            ("samples", self._samples(snap)),
            ("GPUs", self._reporting(snap)),
            ("energy", energy(snap.aggregate.energy_j)),
        )

    @staticmethod
    def _samples(snap: RackSnapshot) -> str:
        samples = group(snap.aggregate.samples_done)
        return f"{samples} / {group(snap.run.total_samples)}" if snap.run.total_samples else samples

    def _reporting(self, snap: RackSnapshot) -> Text:
        """GPUs with a fresh reading, of all: a silent or down GPU is not reporting."""
        agg = snap.aggregate
        pal = palette(self.app)
        style = pal.text if agg.gpus_reporting == agg.gpus else pal.warn
        return Text(f"{part_of(agg.gpus_reporting, agg.gpus)} reporting", style=style + Style(bold=True))

    def _set(self, selector: str, content: str | Text) -> None:
        """Update a line only when it changed (most header lines stay the same between refreshes)."""
        if self._shown.get(selector) != content:
            self._shown[selector] = content
            self.query_one(selector, Static).update(content)


def _tpj(value: float | None) -> str:
    return f"{value:.2f}" if value is not None and math.isfinite(value) else DASH
