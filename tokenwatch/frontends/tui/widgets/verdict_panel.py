"""The MLPerf verdict panel, at the top of the dashboard: where the run will land, from its first minutes.

Left, in large type: the projected final LoadGen figure (tokens/s, tail included) with its band, the
projected end and the projected verdict; middle: each rule with ✓ / ✗ / ? and its margin
(:class:`VerdictRules`); right: the forecast over time (:class:`ForecastLine`). Once the run has ended it
shows the final figure and verdict (LoadGen's own where its detail log says).
"""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.reactive import reactive
from textual.widgets import Static

from tokenwatch.base.formatting import DASH, format_clock, group, printable, verdict_word
from tokenwatch.core.snapshot import RackSnapshot
from tokenwatch.frontends.tui.palette import palette
from tokenwatch.frontends.tui.widgets.big_figure import BigFigure
from tokenwatch.frontends.tui.widgets.forecast_line import ForecastLine
from tokenwatch.frontends.tui.widgets.verdict_rules import VerdictRules
from tokenwatch.mlperf.warm_up import WARMING_UP


class VerdictPanel(Horizontal):
    DEFAULT_CSS = """
    VerdictPanel {
        height: 9;
        border: round $accent 60%;
        border-title-color: $accent;
        border-title-style: bold;
        padding: 0 1;
    }
    VerdictPanel #projection { width: auto; min-width: 30; height: 1fr; }
    VerdictPanel #verdict-word { height: 1; text-style: bold; }
    VerdictPanel #projected { color: $accent; }
    VerdictPanel #band { height: 3; color: $text-muted; }
    """

    snapshot: reactive[RackSnapshot | None] = reactive(None, always_update=True)

    def compose(self) -> ComposeResult:
        with Vertical(id="projection"):
            yield Static("", id="verdict-word")
            yield BigFigure("-", id="projected")
            yield Static("", id="band")
        yield VerdictRules(id="rules")
        yield ForecastLine(id="forecast-line")

    def on_mount(self) -> None:
        self.border_title = "MLPerf verdict"

    def watch_snapshot(self, snap: RackSnapshot | None) -> None:
        if snap is None or not self.is_mounted:
            return
        view = snap.verdict
        rules = self.query_one(VerdictRules)
        # A decided verdict's reason (and what stopping now saves) goes under the rules, where it has the
        # panel's width: the left column's three lines keep the figure's band, end and energy.
        rules.why = view.forecast.decided if view is not None and not snap.ended else ""
        rules.view = view
        line = self.query_one(ForecastLine)
        line.nominal_s = snap.run.nominal_duration_s or 0.0
        line.view = view
        if view is None:
            return
        pal = palette(self.app)
        fc = view.forecast
        named = view.benchmark or (
            f"unknown benchmark {view.benchmark_named!r}" if view.benchmark_named else ""
        )
        parts = [p for p in ("MLPerf verdict", named, view.scenario) if p]
        self.border_title = " · ".join(parts)
        self.border_subtitle = (
            f"rules: {view.judged_by} settings" if view.judged_by else "no LoadGen settings"
        )
        note = snap.summary.left_out_note if snap.ended and snap.summary is not None else ""
        if note:  # which nodes MLPerf's figure has no result for, as every surface says it
            self.border_subtitle = Text(
                printable(note)
            )  # node names come from the source: no markup, no escapes
        final = snap.summary.verdict if snap.ended and snap.summary is not None else None
        valid = final.valid if final is not None else fc.valid
        word = Text()
        stage = "FINAL " if snap.ended else "DECIDED " if fc.decided else "PROJECTED "
        word.append(stage, style=pal.muted)
        word.append(verdict_word(valid), style=pal.good if valid else pal.bad if valid is False else pal.warn)
        if final is not None and final.judged_by.startswith("LoadGen"):
            word.append("  (LoadGen's own)", style=pal.muted)
        self.query_one("#verdict-word", Static).update(word)
        band = fc.tokens_per_s
        self.query_one(BigFigure).value = group(band.value) if band is not None else "-"
        if band is None and fc.stale:
            detail = f"no projection: {fc.stale}"
        elif band is None and fc.warming_up:
            detail = f"tok/s: {WARMING_UP}\nno projection while\nthe pace still climbs"
        elif band is None:
            detail = "waiting for progress on every node"
        elif snap.ended:
            detail = "tok/s, final: the nodes' sum"
        elif fc.decided and fc.valid is True and band.low == band.high:  # LoadGen's results: no band
            detail = "tok/s, LoadGen's own result"
        elif not band.known:
            detail = f"tok/s ±{DASH} (band too wide)"  # one line: BAND_UNKNOWN's words take two here
        else:
            half = 100.0 * (band.high - band.low) / 2.0 / band.value
            detail = f"tok/s ±{half:.1f} %  {group(band.low / 1000)}k – {group(band.high / 1000)}k"
        clock = snap.clock  # the run's one clock: the header's ETA counts down to this same end
        if clock.end_kind == "projected":  # one line: the left column is ~30 wide and 3 high
            ends = (format_clock(clock.end_s), format_clock(clock.end_low_s), format_clock(clock.end_high_s))
            detail += "\nend " + _with_range(*ends)
        energy = view.energy_to_finish_j
        if energy is not None:  # the GPUs' energy from now to that end at the rack's power now
            value, low, high = (f"{j / 3.6e6:,.1f}" for j in (energy.value, energy.low, energy.high))
            detail += "\nto end " + _with_range(value, low, high, " kWh")
        self.query_one("#band", Static).update(detail)


def _with_range(value: str, low: str, high: str, unit: str = "") -> str:
    """``84:23 (82:14–84:55)``; the value alone where its range reads the same (a Server run's scheduled
    end: ``10:00``, not ``10:00 (10:00–10:00)``)."""
    return f"{value}{unit}" if low == high == value else f"{value}{unit} ({low}–{high})"
