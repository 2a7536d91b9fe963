"""SVG snapshots of the dashboard over the gb300 sample run, paused at 41:07 (speed 0: no wall clock).

Update after an intended change with ``pytest tests/tui/test_tui_snapshots.py --snapshot-update`` and
look at the new SVGs before committing them.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from textual.pilot import Pilot

from tests.tui.apps import replay_app, settle
from tokenwatch.tui.app import TokenwatchApp
from tokenwatch.tui.theme_loader import SHIPPED_ORDER

SnapCompare = Callable[..., bool]


def ready(app: TokenwatchApp, *keys: str) -> Callable[[Pilot[None]], object]:
    async def run_before(pilot: Pilot[None]) -> None:
        await settle(pilot, app)
        for key in keys:
            await pilot.press(key)
        app.refresh_data(force=True)
        await pilot.pause()

    return run_before


@pytest.mark.parametrize("theme", SHIPPED_ORDER)
def test_main_screen_in_each_theme(snap_compare: SnapCompare, theme: str) -> None:
    app = replay_app(theme=theme)
    assert snap_compare(app, terminal_size=(120, 40), run_before=ready(app))


def test_main_screen_at_80x24(snap_compare: SnapCompare) -> None:
    app = replay_app()
    assert snap_compare(app, terminal_size=(80, 24), run_before=ready(app))


def test_main_screen_at_200x60(snap_compare: SnapCompare) -> None:
    app = replay_app()
    assert snap_compare(app, terminal_size=(200, 60), run_before=ready(app))


def test_node_screen(snap_compare: SnapCompare) -> None:
    app = replay_app()
    assert snap_compare(app, terminal_size=(120, 40), run_before=ready(app, "down", "down", "enter"))
