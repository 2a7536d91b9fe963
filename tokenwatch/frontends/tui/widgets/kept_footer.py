"""Textual's footer, composed again only when the keys it shows change.

Textual's footer removes and mounts all of its keys again whenever its screen's bindings may have changed:
at every push and pop of the screen and every focus change. On a 64-rack fleet each Enter into a rack
and each Escape back did that to ~15 keys (their mount, styles and first render: about a third of the
CPU from the key to the app idle at 200x60, cProfile), although the keys shown were the same as the
last time that screen was on top. This footer compares what it would show with what it shows and
leaves its keys alone when nothing differs; anything that changes a key (its description, whether it is
enabled, its tooltip, a key added or gone) composes it as Textual does.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import Footer

# One entry per active binding: the binding, whether it is enabled, its tooltip.
ShownKeys = tuple[tuple[Binding, bool, str], ...]


class KeptFooter(Footer):
    """A :class:`textual.widgets.Footer` that skips a compose which would draw the same keys."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._composed_keys: ShownKeys | None = None  # what the last compose showed (None: nothing yet)

    def _shown_keys(self) -> ShownKeys:
        """Everything Textual's compose reads of the screen's bindings (the palette's key included)."""
        active = self.screen.active_bindings.values()
        return tuple((binding, enabled, tooltip) for _node, binding, enabled, tooltip in active)

    def compose(self) -> ComposeResult:
        self._composed_keys = self._shown_keys() if self._bindings_ready else None
        yield from super().compose()

    def bindings_changed(self, screen: Screen[object]) -> None:
        if (
            self._composed_keys is not None
            and self.is_attached
            and screen is self.screen
            and self._shown_keys() == self._composed_keys
        ):
            return  # the same keys as drawn: nothing to compose
        super().bindings_changed(screen)
