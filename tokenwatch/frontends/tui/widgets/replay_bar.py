"""The replay's position, speed and state on one line; a click on the track seeks there."""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual import events
from textual.app import RenderResult
from textual.message import Message
from textual.reactive import reactive
from textual.widget import Widget

from tokenwatch.base.formatting import format_clock
from tokenwatch.frontends.tui.palette import palette


@dataclass(frozen=True, slots=True)
class ReplayState:
    position_s: float
    duration_s: float | None  # None while the recording is still being read
    speed: float  # 0 = as fast as possible
    paused: bool
    seeking: bool
    at_end: bool
    message: str = ""


def speed_label(speed: float) -> str:
    return "max" if speed == 0 else f"x{speed:g}"


class ReplayBar(Widget):
    DEFAULT_CSS = """
    ReplayBar {
        text-wrap: nowrap;
        text-overflow: clip;
        height: 1;
        background: $panel;
        padding: 0 1;
    }
    """

    state: reactive[ReplayState | None] = reactive(None)

    class SeekRequested(Message):
        """The engineer clicked a point of the track."""

        def __init__(self, t: float) -> None:
            super().__init__()
            self.t = t

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self._track = (0, 0)  # (first cell, width) of the track in the last render

    def render(self) -> RenderResult:
        state = self.state
        pal = palette(self.app)
        text = Text(no_wrap=True, overflow="crop")
        if state is None:
            return text
        if state.seeking:
            icon, word = "⇄", "seeking"
        elif state.at_end:
            icon, word = "■", "end"
        elif state.paused:
            icon, word = "‖", "paused"
        else:
            icon, word = "▶", "playing"
        text.append(f"{icon} {word:<8}", style=pal.warn if state.paused else pal.good)
        duration = state.duration_s
        # The track spans the recording: its length is labelled, as the header labels the nominal and
        # projected lengths (a run that overran its nominal 80:00 is recorded to its actual end).
        length = f"{format_clock(duration)} recorded" if duration else "--:--"
        text.append(f"{format_clock(state.position_s)} / {length} ")
        hint = "  space pause  ←/→ 1 min  ⇧←/⇧→ 10 min  +/- speed  g go to"
        speed = f" {speed_label(state.speed)}"
        # The message (a seek past the end, a refused seek) is news: the hint makes room for it.
        message = f"  {state.message}" if state.message else ""
        room = self.content_size.width - text.cell_len - len(speed) - len(hint) - len(message) - 2
        width = (
            max(10, room)
            if room >= 10
            else max(0, self.content_size.width - text.cell_len - len(speed) - len(message) - 2)
        )
        fraction = state.position_s / duration if duration else 0.0
        done = round(min(1.0, max(0.0, fraction)) * width)
        self._track = (text.cell_len + 1, width)
        text.append("▕")
        text.append("━" * done, style=pal.bar)
        text.append("─" * (width - done), style=pal.muted)
        text.append("▏")
        text.append(speed, style="bold")
        if room >= 10:
            text.append(hint, style=pal.muted)
        if message:
            text.append(message, style=pal.warn)
        return text

    def on_click(self, event: events.Click) -> None:
        offset = event.get_content_offset(self)
        state = self.state
        start, width = self._track
        if offset is None or state is None or not state.duration_s or width <= 0:
            return
        if start <= offset.x < start + width:
            self.post_message(self.SeekRequested((offset.x - start + 0.5) / width * state.duration_s))
