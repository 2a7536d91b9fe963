"""Every key binding and screen, driven through Textual's Pilot over the real core and replay player."""

from __future__ import annotations

import io
import math

import numpy as np
import pytest
from rich.console import Console
from textual.binding import Binding
from textual.widgets import Input, Static

from tests.conftest import wait_until_async
from tests.frontends.tui.apps import NODE_FAILURE, SERVER, replay_app, settle, sim_app
from tokenwatch.frontends.tui.screens.dashboard import DashboardScreen
from tokenwatch.frontends.tui.screens.goto_screen import GotoScreen
from tokenwatch.frontends.tui.screens.help_screen import HelpScreen
from tokenwatch.frontends.tui.screens.node_screen import NodeScreen
from tokenwatch.frontends.tui.widgets.gpu_heatmap import GpuHeatmap
from tokenwatch.frontends.tui.widgets.gpu_timelines import GpuTimelines
from tokenwatch.frontends.tui.widgets.latency_histogram import LatencyHistogram
from tokenwatch.frontends.tui.widgets.node_table import SORT_KEYS, NodeTable

SIZE = (120, 40)


def table_order(table: NodeTable) -> list[str]:
    snap = table.snapshot
    assert snap is not None
    return [snap.nodes.names[i] for i in table._order]


async def test_s_cycles_the_sort_column_and_shift_s_reverses() -> None:
    app = replay_app(NODE_FAILURE, 1850)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        table = app.screen.query_one(NodeTable)
        snap = table.snapshot
        assert snap is not None
        assert table.sort_key == "node"
        assert table_order(table) == sorted(snap.nodes.names)
        # Without a baseline its column is not shown, and `s` passes it by.
        shown = [key for key in SORT_KEYS if key != "base"]
        keys = []
        for _ in shown:
            await pilot.press("s")
            keys.append(table.sort_key)
        assert keys == [*shown[1:], shown[0]]
        while table.sort_key != "now":
            await pilot.press("s")
        rates = snap.nodes.tokens_per_s
        expected = sorted(
            range(18), key=lambda i: (not math.isfinite(rates[i]), rates[i], snap.nodes.names[i])
        )
        assert table_order(table) == [snap.nodes.names[i] for i in expected]
        assert table_order(table)[-1] == "node07"  # down: no live rate, sorted last
        await pilot.press("S")
        assert table.descending
        assert table_order(table)[-1] == "node07"
        while table.sort_key != "status":
            await pilot.press("s")
        assert table_order(table)[0] == "node07"  # the worst state first
        assert table.cursor_node == "node07"  # a new sort puts the cursor on its first row
        await pilot.press("enter")
        assert isinstance(app.screen, NodeScreen)
        assert app.screen.node == "node07"


async def test_clicking_a_column_title_sorts_and_again_reverses() -> None:
    app = replay_app(NODE_FAILURE, 1850)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        table = app.screen.query_one(NodeTable)
        x = next(
            sum(c.width + 1 for c in table._columns[:k])
            for k, c in enumerate(table._columns)
            if c.key == "power"
        )
        await pilot.click(NodeTable, offset=(x + 2 + 1, 1))  # +1: the border
        assert table.sort_key == "power"
        assert not table.descending
        snap = table.snapshot
        assert snap is not None
        powers = [snap.nodes.power_w[snap.nodes.index(n)] for n in table_order(table)]
        finite = [p for p in powers if math.isfinite(p)]
        assert finite == sorted(finite)
        assert math.isnan(powers[-1])
        await pilot.click(NodeTable, offset=(x + 2 + 1, 1))
        assert table.descending


async def test_enter_opens_the_node_screen_and_escape_returns() -> None:
    app = replay_app(NODE_FAILURE, 1850)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        await pilot.press("down", "down", "enter")
        screen = app.screen
        assert isinstance(screen, NodeScreen)
        assert screen.node == "node03"
        app.refresh_data(force=True)
        await pilot.pause()
        timelines = screen.query_one(GpuTimelines)
        assert timelines.history is not None
        assert timelines.history.node == "node03"
        title = str(screen.query_one("#node-title", Static).content)
        assert "node03" in title
        assert "share" in title
        await pilot.press("right_square_bracket")
        assert screen.node == "node04"
        await pilot.press("left_square_bracket", "left_square_bracket")
        assert screen.node == "node02"
        await pilot.press("escape")
        assert isinstance(app.screen, DashboardScreen)


async def test_double_click_opens_a_node() -> None:
    app = replay_app(NODE_FAILURE, 1850)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        await pilot.click(NodeTable, offset=(3, 1 + 1 + 6), times=2)  # border, header, 7th row
        assert isinstance(app.screen, NodeScreen)
        assert app.screen.node == "node07"


def on_screen(panel: GpuHeatmap | LatencyHistogram) -> bool:
    """Whether ``panel`` is whole within the dashboard's scrolling body as drawn now."""
    body = panel.screen.query_one("#body")
    return body.region.contains_region(panel.region)


@pytest.mark.parametrize(("key", "panel_type"), [("m", GpuHeatmap), ("l", LatencyHistogram)])
async def test_a_panels_key_first_brings_it_into_view_where_the_layout_scrolls(
    key: str, panel_type: type[GpuHeatmap] | type[LatencyHistogram]
) -> None:
    """At 160x45 the heatmap and the latency panel sit below the first screen: the first press of their
    key scrolls to the panel and leaves its metric as it was (a change out of sight said nothing); the
    next press changes it, in view."""
    app = replay_app(SERVER, 300)
    async with app.run_test(size=(160, 45)) as pilot:
        await settle(pilot, app)
        panel = app.screen.query_one(panel_type)
        first = panel.metric
        assert not on_screen(panel)
        await pilot.press(key)
        await pilot.pause()
        assert on_screen(panel)
        assert panel.metric == first
        await pilot.press(key)
        assert app.screen.query_one(panel_type).metric != first  # read afresh: mypy pins panel.metric
        assert on_screen(panel)


async def test_m_cycles_the_heatmap_metric() -> None:
    app = replay_app(at_s=300)
    async with app.run_test(size=(200, 60)) as pilot:  # every panel on one screen: each press cycles
        await settle(pilot, app)
        heatmap = app.screen.query_one(GpuHeatmap)
        assert on_screen(heatmap)
        seen = [heatmap.metric]
        for _ in range(7):
            await pilot.press("m")
            seen.append(heatmap.metric)
        assert seen == [*GpuHeatmap.METRICS, GpuHeatmap.METRICS[0]]
        assert heatmap.grid is not None
        assert heatmap.grid.metric == heatmap.metric


async def test_l_and_clicks_switch_the_latency_metric() -> None:
    app = replay_app(SERVER, 300)
    async with app.run_test(size=(200, 60)) as pilot:
        await settle(pilot, app)
        panel = app.screen.query_one(LatencyHistogram)
        assert panel.metric == "ttft"
        await pilot.press("l")
        assert app.screen.query_one(LatencyHistogram).metric == "tpot"  # read afresh: mypy pins panel.metric
        await pilot.press("l", "l")
        assert panel.metric == "ttft"
        start, _, metric = panel._tab_spans[2]
        await pilot.click(LatencyHistogram, offset=(start + 2, 1))
        assert panel.metric == metric == "e2e"


async def test_space_pauses_and_resumes() -> None:
    app = replay_app(at_s=600)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        player = app.player
        assert player is not None
        assert player.paused
        player.set_speed(1)  # real time: the replay moves, but not to its end before the next key
        await pilot.press("space")
        assert not player.paused
        await pilot.press("space")
        assert player.paused


@pytest.mark.parametrize(
    ("key", "delta"), [("left", -60), ("right", 60), ("shift+left", -600), ("shift+right", 600)]
)
async def test_arrows_seek(key: str, delta: int) -> None:
    app = replay_app(at_s=1200)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        await pilot.press(key)
        await settle(pilot, app)
        assert app.player is not None
        assert app.player.position_s == 1200 + delta
        assert app.latest.t == 1200 + delta  # and the screen shows that time


async def test_plus_and_minus_change_the_speed() -> None:
    app = replay_app(at_s=60)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        player = app.player
        assert player is not None
        assert player.speed == 0
        await pilot.press("minus")
        assert player.speed == 600
        await pilot.press("minus", "minus")
        assert player.speed == 120
        await pilot.press("plus")
        assert player.speed == 300
        app.refresh_data(force=True)
        await pilot.pause()
        assert "x300" in app.badge()


async def test_g_goes_to_a_time_and_reports_bad_input() -> None:
    app = replay_app(at_s=600)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        await pilot.press("g")
        assert isinstance(app.screen, GotoScreen)
        await pilot.press(*"soon", "enter")
        assert isinstance(app.screen, GotoScreen)
        assert "bad duration" in str(app.screen.query_one("#goto-error", Static).content)
        app.screen.query_one(Input).value = ""
        await pilot.press(*"30m", "enter")
        assert isinstance(app.screen, DashboardScreen)
        await settle(pilot, app)
        assert app.player is not None
        assert app.player.position_s == 1800
        await pilot.press("g", "escape")
        assert isinstance(app.screen, DashboardScreen)
        assert app.player.position_s == 1800


async def test_replay_keys_do_nothing_outside_a_replay() -> None:
    app = sim_app(duration="5m")
    async with app.run_test(size=SIZE) as pilot:
        await wait_until_async(lambda: app.session.core.ended, "the simulated run's end", pause=pilot.pause)
        app.refresh_data(force=True)
        await pilot.press("space", "left", "g", "plus")
        assert isinstance(app.screen, DashboardScreen)
        assert app.player is None
        assert app.badge() == "SIM max"
        assert not app.screen.check_action("replay_pause", ())


async def test_help_lists_every_key() -> None:
    from tokenwatch.frontends.tui.keys import KEY_TABLE

    app = replay_app(at_s=60)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        shown = app.screen.query_one("#help-keys", Static)
        console = Console(width=100, record=True, file=io.StringIO())
        console.print(shown.content)
        text = console.export_text()
        for _, keys in KEY_TABLE:
            for key, what in keys:
                assert key in text
                assert what.split()[0] in text
        await pilot.press("escape")
        assert isinstance(app.screen, DashboardScreen)


def test_every_screen_binding_is_in_the_key_table() -> None:
    """The help cannot go stale: each bound key appears in the table the help is made from."""
    from tokenwatch.frontends.tui.app import TokenwatchApp
    from tokenwatch.frontends.tui.keys import KEY_TABLE

    listed = " ".join(key for _, keys in KEY_TABLE for key, _ in keys)
    names = {
        "question_mark": "?",
        "left_square_bracket": "[",
        "right_square_bracket": "]",
        "plus": "+",
        "minus": "-",
        "left": "←",
        "right": "→",
        "shift+left": "shift+←",
        "shift+right": "shift+→",
    }
    for owner in (TokenwatchApp, DashboardScreen, NodeScreen, NodeTable):
        for binding in owner.BINDINGS:
            assert isinstance(binding, Binding)
            for key in binding.key.split(","):
                if key in ("equals_sign", "underscore", "up", "down", "pageup", "pagedown", "home", "end"):
                    continue  # aliases of + and -, and the table's movement keys (listed together)
                assert names.get(key, key) in listed, key


async def test_t_cycles_the_themes_and_the_palette_lists_them() -> None:
    from textual.theme import ThemeProvider

    app = replay_app(at_s=300)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        names = app.theme_catalog.names()
        assert names == ["dark", "light", "high-contrast", "colorblind"]
        seen = [app.theme]
        for _ in names:
            await pilot.press("t")
            seen.append(app.theme)
        assert seen == [*names, names[0]]
        provider = ThemeProvider(app.screen)
        assert sorted(name for name, _ in provider.commands) == sorted(names)


async def test_q_quits_and_stops_the_session() -> None:
    app = replay_app(at_s=600)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        await pilot.press("q")
        await pilot.pause()
    assert app.session.stopped
    assert app.return_code == 0


async def test_ctrl_c_quits_too() -> None:
    app = replay_app(at_s=60)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        await pilot.press("ctrl+c")
        await pilot.pause()
    assert app.session.stopped


async def test_redraws_only_when_something_changed() -> None:
    app = replay_app(at_s=600)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, app)
        before = app.refreshes
        for _ in range(5):
            app.refresh_data()  # a paused replay: nothing new, nothing drawn
        assert app.refreshes == before
        assert app._refresh_timer is not None
        assert app._refresh_timer._interval == pytest.approx(0.25)
        assert app.player is not None
        app.player.seek(900)
        await settle(pilot, app)
        drawn = app.refreshes
        app.refresh_data()
        assert app.refreshes == drawn  # one snapshot however many events came with the seek
        assert np.isfinite(app.latest.aggregate.tokens_per_s)
        assert app.latest.t == 900


def test_the_dashboard_page_lists_every_key() -> None:
    from tests.conftest import REPO_ROOT
    from tokenwatch.frontends.tui.keys import markdown_table

    assert markdown_table() in (REPO_ROOT / "docs" / "dashboard.md").read_text(encoding="utf-8")
