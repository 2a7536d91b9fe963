"""The footer keeps its keys while the keys it shows stay the same, and shows a change at once.

Textual's footer mounts all of its keys again at every push and pop of its screen; on a 64-rack fleet
that was about a third of an Enter's and an Escape's CPU. These tests hold that a screen shown again
with the same keys keeps the very same key widgets, and that a key whose state changes (enabled,
described, added) is drawn as Textual's own footer draws it. No timing is asserted.
"""

from __future__ import annotations

from typing import ClassVar

from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.dom import DOMNode
from textual.screen import Screen
from textual.widgets import Footer
from textual.widgets._footer import FooterKey

from tests.conftest import wait_until_async
from tokenwatch.frontends.tui.widgets.kept_footer import KeptFooter


class KeyScreen(Screen[None]):
    """Two keys: ``x`` always enabled, ``y`` enabled while :attr:`y_on` (shown disabled after)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("x", "always", "Always"),
        Binding("y", "sometimes", "Sometimes"),
    ]

    def __init__(self, footer: type[Footer]) -> None:
        super().__init__()
        self.footer_type = footer
        self.y_on = True

    def compose(self) -> ComposeResult:
        yield self.footer_type()

    def check_action(self, action: str, _parameters: tuple[object, ...]) -> bool | None:
        if action == "sometimes" and not self.y_on:
            return None  # shown, disabled (False would hide it)
        return True

    def action_always(self) -> None:
        pass

    def action_sometimes(self) -> None:
        pass


class FooterApp(App[None]):
    ENABLE_COMMAND_PALETTE = False  # only the screen's two keys in the footer

    def __init__(self, footer: type[Footer]) -> None:
        super().__init__()
        self.footer_type = footer

    def on_mount(self) -> None:
        self.push_screen(KeyScreen(self.footer_type))


def keys_shown(screen: DOMNode) -> list[tuple[str, str, bool]]:
    """What the footer draws: each key's name, description and whether it is disabled."""
    return [(key.key, key.description, key.has_class("-disabled")) for key in screen.query(FooterKey)]


async def test_a_screen_shown_again_with_the_same_keys_keeps_its_footer_keys() -> None:
    app = FooterApp(KeptFooter)
    async with app.run_test(size=(80, 10)) as pilot:
        screen = app.screen
        await wait_until_async(lambda: len(keys_shown(screen)) >= 2, "the footer's keys", pause=pilot.pause)
        before = list(screen.query(FooterKey))
        for _ in range(3):  # as Enter into a rack and Escape back do
            await app.push_screen(KeyScreen(KeptFooter))
            await pilot.pause()
            await app.pop_screen()
            await pilot.pause()
        await pilot.pause()
        assert app.screen is screen
        assert list(screen.query(FooterKey)) == before  # the same widgets: not composed again
        assert [k for k, _d, _off in keys_shown(screen)] == ["x", "y"]


async def test_a_key_that_changes_is_drawn_as_textuals_footer_draws_it() -> None:
    async def shown_after_change(footer: type[Footer]) -> list[tuple[str, str, bool]]:
        app = FooterApp(footer)
        async with app.run_test(size=(80, 10)) as pilot:
            screen = app.screen
            assert isinstance(screen, KeyScreen)
            await wait_until_async(
                lambda: len(keys_shown(screen)) >= 2, "the footer's keys", pause=pilot.pause
            )
            disabled_before = [off for _k, _d, off in keys_shown(screen)]
            assert disabled_before == [False, False]
            screen.y_on = False
            screen.refresh_bindings()
            await wait_until_async(lambda: keys_shown(screen)[-1][2], "y drawn disabled", pause=pilot.pause)
            await pilot.pause()
            return keys_shown(screen)

    kept = await shown_after_change(KeptFooter)
    textual = await shown_after_change(Footer)
    assert kept == textual == [("x", "Always", False), ("y", "Sometimes", True)]
