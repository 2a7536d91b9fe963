"""Elapsed / nominal run time, a progress bar as wide as the line, the percentage and the ETA."""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual.app import RenderResult
from textual.reactive import reactive
from textual.widget import Widget

from tokenwatch.base.formatting import format_clock
from tokenwatch.frontends.tui.charts import hbar
from tokenwatch.frontends.tui.palette import palette


@dataclass(frozen=True, slots=True)
class RunProgress:
    elapsed_s: float
    nominal_s: float | None
    pct: float | None
    eta_s: float | None
    ended: bool
    end_word: str = "done"  # what the ETA's place says once ended: done, ended (nodes missing), interrupted


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
        clock = f"{format_clock(p.elapsed_s)} / {format_clock(p.nominal_s) if p.nominal_s else '--:--'}"
        eta = (
            p.end_word
            if p.ended
            else (f"ETA {format_clock(p.eta_s)}" if p.eta_s is not None else "ETA --:--")
        )
        tail = f" {p.pct:5.1f}%  {eta}" if p.pct is not None else f"  {eta}"
        width = max(0, self.content_size.width - len(clock) - len(tail) - 4)
        text.append(clock, style="bold")
        text.append("  ▕")
        text.append(hbar((p.pct or 0.0) / 100.0, width), style=pal.bar)
        text.append("▏")
        text.append(tail)
        return text
