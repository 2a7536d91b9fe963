"""The run's clock on one line: run time against the nominal length, a progress bar as wide as the line,
the share done, the ETA and the projected end (the same end the verdict panel states: the core's one
clock, :mod:`tokenwatch.core.run_clock`).

Where the end differs from the nominal length, both are labelled: ``27:32 / 80:00 nominal ... ETA 56:58 ·
end 84:30 projected`` while the run goes, ``84:35 run / 80:00 nominal ... ended`` once it has ended.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual.app import RenderResult
from textual.reactive import reactive
from textual.widget import Widget

from tokenwatch.base.formatting import format_clock
from tokenwatch.core.run_clock import RunClock
from tokenwatch.frontends.tui.charts import hbar
from tokenwatch.frontends.tui.palette import palette

_MIN_BAR = 10  # cells: below this the line takes its short words


@dataclass(frozen=True, slots=True)
class RunProgress:
    clock: RunClock
    pct: float | None
    of: str  # what the share counts: "samples", or "time" (of the nominal length)
    end_word: str = "done"  # what the ETA's place says once ended: done, ended (nodes missing), interrupted


def clock_words(clock: RunClock, *, short: bool = False) -> str:
    """``27:32 / 80:00 nominal`` (running), ``84:35 run / 80:00 nominal`` (ended): the labels only where
    the end differs from the nominal length."""
    nominal = format_clock(clock.nominal_s) if clock.nominal_s else "--:--"
    labelled = clock.differs_from_nominal
    now = format_clock(clock.t)
    if clock.end_kind == "actual" and labelled:
        return f"{now}/{nominal} nom." if short else f"{now} run / {nominal} nominal"
    if labelled:
        return f"{now}/{nominal} nom." if short else f"{now} / {nominal} nominal"
    return f"{now} / {nominal}"


def end_words(clock: RunClock, *, short: bool = False) -> str:
    """``ETA 56:58 · end 84:30 projected`` (the end named where it is not the nominal one)."""
    eta = clock.eta_s
    if eta is None:
        return "ETA --:--"
    words = f"ETA {format_clock(eta)}"
    if clock.end_kind == "projected" and clock.differs_from_nominal:
        end = format_clock(clock.end_s)
        words = f"end {end} proj." if short else f"{words} · end {end} projected"
    return words


class ProgressLine(Widget):
    DEFAULT_CSS = """
    ProgressLine {
        height: 1;
        text-wrap: nowrap;
        text-overflow: clip;
    }
    """

    progress: reactive[RunProgress | None] = reactive(None)

    def render(self) -> RenderResult:
        p = self.progress
        text = Text(no_wrap=True, overflow="crop")
        if p is None:
            return text
        pal = palette(self.app)
        room = self.content_size.width - 4
        for short in (False, True):
            clock = clock_words(p.clock, short=short)
            eta = p.end_word if p.clock.end_kind == "actual" else end_words(p.clock, short=short)
            share = "" if p.pct is None else f"{p.pct:5.1f}%" + (f" of {p.of}" if not short else "")
            tail = f" {share}  {eta}" if share else f"  {eta}"
            width = max(0, room - len(clock) - len(tail))
            if width >= _MIN_BAR:
                break
        text.append(clock, style="bold")
        text.append("  ▕")
        text.append(hbar((p.pct or 0.0) / 100.0, width), style=pal.bar)
        text.append("▏")
        text.append(tail)
        return text
