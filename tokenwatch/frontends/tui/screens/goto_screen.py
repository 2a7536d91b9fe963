"""``g``: ask for a run time to go to; answers the seconds, or None when cancelled."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Static

from tokenwatch.base.durations import DurationError, parse_duration


class GotoScreen(ModalScreen[float | None]):
    CSS_PATH = "goto_screen.tcss"

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, duration_s: float | None) -> None:
        super().__init__()
        self.duration_s = duration_s

    def compose(self) -> ComposeResult:
        with Vertical(id="goto-box"):
            end = f" (the recording ends at {self._end()})" if self.duration_s else ""
            yield Static(f"Go to run time{end}: e.g. 41:07, 30m, 1h5m")
            yield Input(placeholder="41:07", id="goto-input")
            yield Static("", id="goto-error")

    def _end(self) -> str:
        from tokenwatch.base.formatting import format_clock

        return format_clock(self.duration_s or 0.0)

    def on_mount(self) -> None:
        self.query_one("#goto-box").border_title = "Go to"

    def on_input_submitted(self, event: Input.Submitted) -> None:
        try:
            seconds = parse_duration(event.value)
        except DurationError as exc:
            self.query_one("#goto-error", Static).update(str(exc))
            return
        self.dismiss(seconds)

    def action_cancel(self) -> None:
        self.dismiss(None)
