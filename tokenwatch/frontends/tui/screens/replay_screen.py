"""The replay's keys, on every screen that shows the run: pause, seek, speed and go-to work the same on
the dashboard and on a node's screen (the node screen is where one pauses to look closely)."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from textual import events
from textual.binding import Binding, BindingType
from textual.screen import Screen

from tokenwatch.frontends.tui.screens.goto_screen import GotoScreen

if TYPE_CHECKING:
    from tokenwatch.inputs.replay.player import ReplayPlayer

REPLAY_ACTIONS = frozenset({"replay_pause", "replay_seek", "replay_speed", "replay_goto"})


class ReplayScreen(Screen[None]):
    """A screen that draws the run; its replay keys act on the app's player (none: they are off)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("space", "replay_pause", "Pause", priority=True),
        Binding("left", "replay_seek(-60)", "-1 min", show=False, priority=True),
        Binding("right", "replay_seek(60)", "+1 min", show=False, priority=True),
        Binding("shift+left", "replay_seek(-600)", "-10 min", show=False, priority=True),
        Binding("shift+right", "replay_seek(600)", "+10 min", show=False, priority=True),
        Binding("plus,equals_sign", "replay_speed(1)", "Faster", show=False, priority=True),
        Binding("minus,underscore", "replay_speed(-1)", "Slower", show=False, priority=True),
        Binding("g", "replay_goto", "Go to"),
    ]

    _styled_theme: str | None = None  # the theme this screen's styles were last worked out under

    def _on_screen_resume(self, event: events.ScreenResume) -> None:
        """Before Textual's own: a screen shown again under the theme it was styled in keeps its styles.
        Textual works out every widget's styles again at each push (a rack's dashboard is ~60 widgets:
        about a fifth of an Enter's CPU on the 64-rack board), though only a theme change while the
        screen was away (it is restyled then only while in the stack) can have changed them; classes
        set meanwhile restyle their widgets as they are set."""
        theme = self.app.theme
        if event.refresh_styles and self._styled_theme == theme:
            event.refresh_styles = False
        self._styled_theme = theme

    @property
    def player(self) -> ReplayPlayer | None:
        player: ReplayPlayer | None = getattr(self.app, "player", None)
        return player

    def check_action(self, action: str, _parameters: tuple[object, ...]) -> bool | None:
        if action in REPLAY_ACTIONS:
            return self.player is not None
        return True

    def redraw_now(self) -> None:
        """Draw the latest snapshot now rather than at the next timer tick."""
        refresh = getattr(self.app, "refresh_data", None)
        if refresh is not None:
            refresh(force=True)

    def action_replay_pause(self) -> None:
        if self.player is not None:
            self.player.toggle_pause()
            self.redraw_now()

    def action_replay_seek(self, delta_s: float) -> None:
        if self.player is not None:
            self.player.seek_by(delta_s)
            self.redraw_now()

    def action_replay_speed(self, direction: int) -> None:
        if self.player is not None:
            self.player.faster() if direction > 0 else self.player.slower()
            self.redraw_now()

    def action_replay_goto(self) -> None:
        player = self.player
        if player is None:
            return

        def go(seconds: float | None) -> None:
            if seconds is not None:
                player.seek(seconds)
                self.redraw_now()

        self.app.push_screen(GotoScreen(player.duration_s), go)
