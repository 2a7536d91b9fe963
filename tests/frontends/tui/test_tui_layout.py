"""80x24 up to 250x80: every panel gets a place, nothing overlaps, nothing crashes."""

from __future__ import annotations

import itertools

import pytest
from textual.geometry import Region
from textual.widget import Widget

from tests.frontends.tui.apps import NODE_FAILURE, replay_app, settle
from tokenwatch.frontends.tui.screens.dashboard import DashboardScreen
from tokenwatch.frontends.tui.widgets.node_table import NodeTable

PANELS = ("#header", "#replay-bar", "#timeline", "#alerts", "#nodes", "#spread", "#heatmap", "#latency")


@pytest.mark.parametrize("size", [(80, 24), (100, 30), (120, 40), (160, 50), (200, 60), (250, 80)])
async def test_panels_never_overlap(size: tuple[int, int]) -> None:
    app = replay_app(NODE_FAILURE, 1850)
    async with app.run_test(size=size) as pilot:
        await settle(pilot, app)
        screen = app.screen
        assert isinstance(screen, DashboardScreen)
        widgets: list[Widget] = [screen.query_one(p) for p in PANELS]
        footer = screen.query_one("Footer")
        body = screen.query_one("#body")
        visible: dict[str, Region] = {"footer": footer.region}
        for widget in widgets:
            assert widget.region.width > 0, widget.id
            assert widget.region.height > 0, widget.id
            assert widget.region.right <= size[0], widget.id
            # Panels inside the scrolling body show only where the body is.
            inside = widget.parent is body
            visible[str(widget.id)] = widget.region.intersection(body.region) if inside else widget.region
        shown = {name: region for name, region in visible.items() if region.area}  # scrolled out of view
        for (a, ra), (b, rb) in itertools.combinations(shown.items(), 2):
            assert not ra.overlaps(rb), (a, b)
        header = screen.query_one("#header")
        assert header.region.y == 0
        assert footer.region.bottom == size[1]
        # The engineer sees the run's throughput at every size.
        assert "tok/s" in app.export_screenshot()


async def test_resizing_a_running_dashboard() -> None:
    app = replay_app(NODE_FAILURE, 1850)
    async with app.run_test(size=(200, 60)) as pilot:
        await settle(pilot, app)
        for size in [(80, 24), (120, 40), (60, 20), (200, 60)]:
            await pilot.resize_terminal(*size)
            app.refresh_data(force=True)
            await pilot.pause()
        assert app.screen.query_one(NodeTable).region.width > 0


@pytest.mark.parametrize(("width", "expected"), [(80, "-narrow"), (120, "-medium"), (200, "-wide")])
async def test_breakpoints(width: int, expected: str) -> None:
    app = replay_app(at_s=60)
    async with app.run_test(size=(width, 40)) as pilot:
        await settle(pilot, app)
        assert app.screen.has_class(expected)


async def test_narrow_tables_drop_the_least_needed_columns() -> None:
    app = replay_app(at_s=300)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot, app)
        table = app.screen.query_one(NodeTable)
        table.scroll_visible(animate=False)  # below the verdict panel at 80x24: columns fit when drawn
        await pilot.pause()
        keys = [c.key for c in table._columns]
        assert keys[:3] == ["node", "status", "now"]
        assert "trend" not in keys
        used = sum(c.width + 1 for c in table._columns)
        assert used <= table.scrollable_content_region.width + 1
    app = replay_app(at_s=300)
    async with app.run_test(size=(250, 60)) as pilot:
        await settle(pilot, app)
        # Wide: tokens per joule too (the HBM and trend columns give way to it and, while a node has a
        # cause hint, to the cause column: the table is 106 columns wide here).
        keys = [c.key for c in app.screen.query_one(NodeTable)._columns]
        assert {"tpj", "power", "temp", "sm"} <= set(keys)


async def test_tab_reaches_every_panel_and_scrolls_it_into_view() -> None:
    app = replay_app(at_s=300)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot, app)
        body = app.screen.query_one("#body")
        reached = set()
        for _ in range(8):
            await pilot.press("tab")
            await pilot.pause()
            focused = app.focused
            assert focused is not None
            reached.add(focused.id)
            if focused.parent is body:
                # At least part of the focused panel is on screen.
                assert focused.region.intersection(body.region).area > 0, focused.id
        assert {"timeline", "alerts", "nodes", "spread", "heatmap", "latency"} <= reached
