"""A go-to past the recording's end is not clamped silently: the replay bar says where it went."""

from __future__ import annotations

from textual.widgets import Input

from tests.frontends.tui.apps import NODE_FAILURE, replay_app, settle
from tokenwatch.base.formatting import format_clock
from tokenwatch.frontends.tui.screens.goto_screen import GotoScreen
from tokenwatch.frontends.tui.widgets.replay_bar import ReplayBar


async def test_g_past_the_end_of_a_fault_run_says_so_on_the_replay_bar() -> None:
    app = replay_app(NODE_FAILURE, 600)
    async with app.run_test(size=(200, 60)) as pilot:
        await settle(pilot, app)
        player = app.player
        assert player is not None
        end = player.duration_s
        assert end is not None
        assert end < 99 * 60
        await pilot.press("g")
        assert isinstance(app.screen, GotoScreen)
        app.screen.query_one(Input).value = "99m"
        await pilot.press("enter")
        await settle(pilot, app)
        assert player.position_s == end  # at the end: as far as the recording goes
        shown = str(app.screen.query_one(ReplayBar).render())
        assert f"99:00 is past the end ({format_clock(end)})" in shown, shown
        # The next seek is news of its own: the message goes.
        await pilot.press("left")
        await settle(pilot, app)
        assert "past the end" not in str(app.screen.query_one(ReplayBar).render())
