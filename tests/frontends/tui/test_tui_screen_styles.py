"""A rack's dashboard shown again keeps its styles unless the theme changed while it was away.

Textual works out every widget's styles again at each push of a screen; the fleet's one rack dashboard
(mounted once, pushed at every Enter) keeps the styles it was given while the theme is the one it was
styled in. These tests hold what that must never cost: the dashboard shown again, after a theme change
or none, has every widget's styles as a full restyle under the current theme gives them.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.pilot import Pilot
from textual.widget import Widget

from tests.core.fleet.fleet_runs import fleet_events
from tests.frontends.tui.apps import replay_app, settle
from tests.frontends.tui.recordings import write_recording
from tokenwatch.frontends.tui.app import TokenwatchApp
from tokenwatch.frontends.tui.screens.dashboard import DashboardScreen
from tokenwatch.frontends.tui.screens.fleet_screen import FleetScreen

SIZE = (160, 48)


@pytest.fixture(scope="module")
def fleet_recording(tmp_path_factory: pytest.TempPathFactory) -> Path:
    events = fleet_events(2, 18, duration_s=60.0, faults="")
    return write_recording(tmp_path_factory.mktemp("fleet") / "fleet.jsonl.zst", iter(events))


def styles_of(screen: DashboardScreen) -> list[tuple[str, str, str]]:
    """Each widget's resolved colours, as drawn (its rich style and its background)."""
    return [
        (repr(widget), str(widget.rich_style), str(widget.styles.background))
        for widget in screen.walk_children(Widget, with_self=True)
    ]


async def enter_rack(pilot: Pilot[None], app: TokenwatchApp) -> DashboardScreen:
    await pilot.press("enter")
    await pilot.pause()
    screen = app.screen
    assert isinstance(screen, DashboardScreen)
    return screen


@pytest.mark.parametrize("theme_change", [False, True])
async def test_a_dashboard_shown_again_has_the_styles_a_full_restyle_gives(
    fleet_recording: Path, theme_change: bool
) -> None:
    app = replay_app(fleet_recording, 30.0)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        assert isinstance(app.screen, FleetScreen)
        first_theme = app.theme
        await enter_rack(pilot, app)
        await pilot.press("escape")
        await pilot.pause()
        if theme_change:
            await pilot.press("t")  # while the rack's dashboard is off the stack
            await pilot.pause()
            assert app.theme != first_theme
        screen = await enter_rack(pilot, app)
        await pilot.pause()
        shown = styles_of(screen)
        app.stylesheet.update(screen)  # what Textual's resume would have done
        await pilot.pause()
        assert shown == styles_of(screen)
        if theme_change:  # and the theme is really another: the header's colours moved with it
            app.theme = first_theme
            await pilot.pause()
            app.stylesheet.update(screen)
            await pilot.pause()
            assert styles_of(screen) != shown
