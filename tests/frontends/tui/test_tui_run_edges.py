"""The dashboard at the edges of a run: it never states a wrong thing.

Down and stale nodes show no live-looking values, the end of a run reads as a result, an interrupted run
says so, throttling is visible with its reasons, colour scales do not invent differences, the latency
axis has its decades, and the small lies (a paused replay's node screen, space there, the screenshot
folder) are gone. Each test drives the real dashboard over a real recording and checks what is drawn
against the reference core (the recording ingested up to the same time) or the recording itself.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from rich.style import Style
from rich.text import Text
from textual.pilot import Pilot
from textual.strip import Strip
from textual.widget import Widget

from tests.conftest import wait_until_async
from tests.frontends.tui.apps import OFFLINE, SERVER, SNAPSHOT_TIME_S, core_until, replay_app, settle
from tests.frontends.tui.recordings import FAULT_RUN, interrupted_events, write_recording
from tokenwatch.base import throttle
from tokenwatch.base.events import NodeStatus
from tokenwatch.base.formatting import format_clock, group, kilowatts
from tokenwatch.core import RackCore
from tokenwatch.frontends.tui.app import TokenwatchApp
from tokenwatch.frontends.tui.palette import Palette, palette
from tokenwatch.frontends.tui.screens.dashboard import DashboardScreen
from tokenwatch.frontends.tui.screens.node_screen import NodeScreen
from tokenwatch.frontends.tui.widgets.alerts_panel import AlertsPanel
from tokenwatch.frontends.tui.widgets.big_figure import BigFigure
from tokenwatch.frontends.tui.widgets.end_banner import EndBanner
from tokenwatch.frontends.tui.widgets.gpu_heatmap import GpuHeatmap
from tokenwatch.frontends.tui.widgets.gpu_timelines import GpuTimelines
from tokenwatch.frontends.tui.widgets.latency_histogram import LatencyHistogram
from tokenwatch.frontends.tui.widgets.node_spread import INTERRUPTED_TITLE, RESULT_TITLE, NodeSpreadPanel
from tokenwatch.frontends.tui.widgets.node_table import NodeTable
from tokenwatch.frontends.tui.widgets.progress_line import ProgressLine
from tokenwatch.frontends.tui.widgets.run_header import RunHeader
from tokenwatch.frontends.tui.widgets.stat_columns import StatColumns
from tokenwatch.recording import RecordingReader

WIDE = (200, 60)
STOPPED_AT_S = 270.0  # 4:30 of the fault run: node07 down since 1:00, node05 silent since 4:00
THROTTLED_AT_S = 200.0  # 3:20: node03 throttled since 1:30, and slow for it
INTERRUPT_AT_S = 464.0  # 7:44 of the 80-minute sample, as in the issue


# ---------------------------------------------------------------------------------------- helpers
def strips(widget: Widget) -> list[Strip]:
    """The content lines of a Line API panel as it draws them now."""
    widget.render_lines(widget.region.reset_offset)  # resolves the pass's base style and palette
    return [widget.render_line(y) for y in range(widget.scrollable_content_region.height)]


def text_of(strip: Strip) -> str:
    return "".join(segment.text for segment in strip)


def rendered(widget: Widget) -> str:
    """The plain text of a panel that renders Rich Text."""
    content = widget.render()
    assert isinstance(content, Text)
    return content.plain


def stat(app: TokenwatchApp, label: str) -> str:
    """The header's value for ``label``."""
    pairs = dict(app.screen.query_one(RunHeader).query_one(StatColumns).pairs)
    value = pairs[label]
    return value.plain if isinstance(value, Text) else value


def colour(style: Style | None) -> str | None:
    return None if style is None or style.color is None else style.color.name


def table_row(table: NodeTable, node: str) -> Strip:
    return next(s for s in strips(table)[1:] if text_of(s).startswith(node))


async def at_end(pilot: Pilot[None], app: TokenwatchApp) -> None:
    await settle(pilot, app)
    assert app.session.core.ended
    app.refresh_data(force=True)
    await pilot.pause()


def reporting_gpus(core: RackCore, t: float) -> int:
    """GPUs with a reading within the staleness limit, on nodes neither down nor stale (from the state)."""
    state = core.state
    silent_node = (state.explicit_state == 2) | (t - state.last_seen > core.config.stale_after_s)
    fresh = (t - state.gpu_last_seen <= core.config.stale_after_s) & ~silent_node[:, None]
    return int(fresh.sum())


# ------------------------------------------------------------------ 1. down and stale nodes
async def test_down_and_stale_nodes_show_no_live_values() -> None:
    core = core_until(FAULT_RUN, STOPPED_AT_S)
    snap = core.snapshot()
    assert snap.nodes.state[snap.nodes.index("node07")] == "down"
    assert snap.nodes.state[snap.nodes.index("node05")] == "stale"  # silent for 30 s
    app = replay_app(FAULT_RUN, STOPPED_AT_S)
    async with app.run_test(size=WIDE) as pilot:
        await settle(pilot, app)
        pal = palette(app)
        table = app.screen.query_one(NodeTable)
        readings = [k for k in ("power", "sm", "hbm", "temp") if k in {c.key for c in table._columns}]
        keys = [c.key for c in table._columns]
        # 200 columns: every reading but HBM, which gives way to node03's cause hint.
        assert "cause" in keys
        assert readings == ["power", "sm", "temp"]
        for node in ("node05", "node07"):
            row = table_row(table, node)
            segments = [seg for seg in row if seg.text != " "]  # cells, without the gaps
            for key in readings:
                text, style = segments[keys.index(key)].text, segments[keys.index(key)].style
                assert text.strip() == "—", (node, key, text)
                assert colour(style) == colour(pal.muted), (node, key)  # greyed, not drawn like a value
        healthy = [seg for seg in table_row(table, "node01") if seg.text != " "]
        for key in readings:
            assert healthy[keys.index(key)].text.strip() not in ("—", "")

        # The heatmap: no colour for a silent GPU; its cell says why.
        heatmap = app.screen.query_one(GpuHeatmap)
        lines = strips(heatmap)
        rows = {text_of(s).split()[0]: s for s in lines[2:] if text_of(s).strip()}
        assert text_of(rows["node07"]).split()[1:] == ["down"] * 4
        assert text_of(rows["node05"]).split()[1:] == ["stale"] * 4
        for node in ("node05", "node07"):
            for seg in rows[node]:
                if seg.text.strip() in ("down", "stale"):
                    assert seg.style is not None
                    assert seg.style.bgcolor is None or seg.style.bgcolor == heatmap.base.bgcolor
        power = core.state.gpu_values[0, :, 0]
        assert text_of(rows["node01"]).split()[1:] == [f"{v:,.0f}" for v in power]

        # "GPUs n/72 reporting" counts fresh GPUs only.
        expected = reporting_gpus(core, STOPPED_AT_S)
        assert expected == 64
        assert stat(app, "GPUs") == f"{expected}/72 reporting"


async def test_the_heatmap_key_explains_glyphs_when_cells_are_narrow() -> None:
    app = replay_app(FAULT_RUN, STOPPED_AT_S)
    async with app.run_test(size=(30, 30)) as pilot:
        await settle(pilot, app)
        heatmap = app.screen.query_one(GpuHeatmap)
        assert heatmap._geometry(heatmap.scrollable_content_region.width)[1] < 5  # too narrow for words
        rows = {text_of(s).split()[0]: text_of(s) for s in strips(heatmap)[2:] if text_of(s).strip()}
        assert rows["node07"].split()[1:] == ["✗"] * 4
        assert rows["node05"].split()[1:] == ["◌"] * 4
        assert "✗ down" in str(heatmap.border_subtitle)
        assert "◌ stale" in str(heatmap.border_subtitle)


async def test_node_timelines_end_where_the_data_ended() -> None:
    """A point with no reading is a gap and the value at the right is a dash, never the last value
    carried on: checked on the down node's real history, and on a running node's history with its
    last 20 points made silent."""
    import dataclasses

    app = replay_app(FAULT_RUN, STOPPED_AT_S)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, app)
        table = app.screen.query_one(NodeTable)
        table.cursor_node = "node07"
        await pilot.press("enter")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, NodeScreen)
        timelines = screen.query_one(GpuTimelines)
        history = timelines.history
        assert history is not None

        def power_rows() -> list[str]:
            lines = rendered(timelines).splitlines()
            start = next(k for k, line in enumerate(lines) if line.startswith("Power"))
            return lines[start + 1 : start + 5]

        width = len(power_rows()[0]) - 7 - 10  # label, sparkline, value
        shown = history.gpu_series["power_w"][:, -width:]
        for g, row in enumerate(power_rows()):
            finite = np.flatnonzero(np.isfinite(shown[g]))
            trailing = len(shown[g]) - (int(finite[-1]) + 1 if finite.size else 0)
            spark = row[7 : 7 + width]
            assert len(spark) - len(spark.rstrip()) == trailing
            assert (row.split()[-1] == "—") == (trailing > 0)
        running = app.session.core.node_history("node01", last=300)  # a node whose data reaches the end
        assert running is not None
        silent = {k: v.copy() for k, v in running.gpu_series.items()}
        for series in silent.values():
            series[:, -20:] = np.nan
        timelines.update_history(dataclasses.replace(running, gpu_series=silent), timelines.references)
        await pilot.pause()
        for row in power_rows():
            assert row[7 : 7 + width].endswith(" " * 20)
            assert row[7 : 7 + width].strip()  # the data before is still drawn
            assert row.split()[-1] == "—"


# ------------------------------------------------------------------ 3. the end reads as a result
async def test_the_end_of_a_run_shows_the_result_without_a_key() -> None:
    core = core_until(FAULT_RUN, math.inf)
    state = core.state
    finished = {
        e.node
        for e in RecordingReader(FAULT_RUN).events()
        if isinstance(e, NodeStatus) and e.state == "finished"
    }
    span = state.t_last_change - state.t_first
    total = float(np.nansum(np.where(span > 0, state.tokens / np.where(span > 0, span, 1), np.nan)))
    duration = state.now
    app = replay_app(FAULT_RUN, 1e9)
    async with app.run_test(size=(120, 40)) as pilot:
        await at_end(pilot, app)
        snap = app.latest
        assert snap.ended
        # The banner, prominent and in the core's words.
        banner = app.screen.query_one(EndBanner)
        assert banner.display
        assert banner.has_class("-partial")
        assert rendered(banner) == f"▲ {snap.banner}"
        assert f"{len(finished)} of 18 nodes finished" in snap.banner
        assert "node07 down since 01:00" in snap.banner
        assert "node05 stale" in snap.banner
        # The run's result in the published-table form, with no key pressed.
        panel = app.screen.query_one(NodeSpreadPanel)
        assert panel.border_title == RESULT_TITLE
        result = rendered(panel)
        assert f"Total aggregate{group(total, 1):>25}" in result
        assert f"Per GPU{group(total / 72, 1):>33}" in result
        assert "Median single-node" in result
        assert "Flagged: node05, node07" in result
        # Every headline figure is a run figure.
        assert app.screen.query_one("#rate", BigFigure).value == group(total)
        assert stat(app, "per GPU") == f"{group(total / 72)} tok/s"
        assert stat(app, "mean power") == kilowatts(state.energy_j / duration)
        # The recording has no energy counters: integrated power (∫), as the label says.
        assert stat(app, "tok/J ∫") == f"{state.tokens.sum() / state.energy_j:.2f}"
        assert stat(app, "nodes") == f"{len(finished)}/18 finished"
        assert stat(app, "run time") == format_clock(duration)
        assert rendered(app.screen.query_one(ProgressLine)).endswith(
            "% of samples  ended"
        )  # not "done": 2 nodes did not
        # The alerts still in force come first, above the run's last events.
        alerts = [text_of(s) for s in strips(app.screen.query_one(AlertsPanel))]
        active = {a.message for a in snap.active_alerts}
        assert active == {a.message for a in snap.alerts if a.active and a.kind in ("down", "stale")}
        assert len(active) == 2
        for line in alerts[:2]:
            head, _, tail = line.split(" ", 2)[2].rstrip().partition("…")  # cut in the middle, if at all
            assert any(m.startswith(head) and m.endswith(tail) for m in active), line


async def test_a_complete_run_ends_in_the_success_colour() -> None:
    app = replay_app(SERVER, 1e9)
    async with app.run_test(size=(120, 40)) as pilot:
        await at_end(pilot, app)
        banner = app.screen.query_one(EndBanner)
        assert banner.display
        assert not banner.has_class("-partial")
        assert not banner.has_class("-interrupted")
        assert rendered(banner) == "✓ ended: 18 of 18 nodes finished"


# ------------------------------------------------------------------ 4. an interrupted run says so
async def test_an_interrupted_run_says_so(tmp_path: Path) -> None:
    path = write_recording(tmp_path / "interrupted.jsonl.zst", interrupted_events(OFFLINE, INTERRUPT_AT_S))
    core = core_until(path, math.inf)
    share = core.state.samples.sum() / core.state.run.total_samples * 100
    app = replay_app(path, 1e9)
    async with app.run_test(size=(120, 40)) as pilot:
        await at_end(pilot, app)
        banner = app.screen.query_one(EndBanner)
        assert banner.display
        assert banner.has_class("-interrupted")
        assert rendered(banner) == f"✗ INTERRUPTED at 07:44 ({share:.1f} % of samples)"
        state = app.screen.query_one(RunHeader).query_one("#state")
        assert "INTERRUPTED" in str(state.render())
        assert app.screen.query_one(NodeSpreadPanel).border_title == INTERRUPTED_TITLE
        progress = rendered(app.screen.query_one(ProgressLine))
        assert progress.startswith("07:44 run / 80:00 nominal ")  # where it stopped, beside the nominal
        assert progress.endswith(f"{share:5.1f}% of samples  interrupted")


# ------------------------------------------------------------------ 5. throttling is visible
async def test_a_throttled_slow_node_shows_both_marks_and_its_reasons() -> None:
    core = core_until(FAULT_RUN, THROTTLED_AT_S)
    node03 = core.state.index["node03"]
    assert core.state.rules.straggling[node03]
    assert core.state.rules.throttling[node03].any()
    app = replay_app(FAULT_RUN, THROTTLED_AT_S)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, app)
        table = app.screen.query_one(NodeTable)
        status = text_of(table_row(table, "node03"))
        assert "▼" in status
        assert "◆" in status
        # The alert names the reasons (the core's message; the panel shows as much of it as fits).
        mask = int(np.bitwise_or.reduce(core.state.gpu_throttle[node03]))
        names = throttle.reason_names(mask)
        assert "hw_slowdown" in names
        alert = next(a for a in app.latest.active_alerts if a.node == "node03" and a.kind == "throttle")
        assert f"[{', '.join(names)}]" in alert.message
        shown = next(
            text_of(s) for s in strips(app.screen.query_one(AlertsPanel)) if "node03 throttling" in text_of(s)
        )
        head, _, tail = shown.split("▲ ", 1)[1].rstrip().partition("…")  # cut in the middle, if at all
        assert alert.message.startswith(head)
        assert alert.message.endswith(tail)
        # The node screen: the reasons per GPU over time, and by name.
        table.cursor_node = "node03"
        await pilot.press("enter")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, NodeScreen)
        title = str(screen.query_one("#node-title").render())
        assert "hw_slowdown" in title
        assert "▼ slow ◆ thr" in title
        timelines = screen.query_one(GpuTimelines)
        lines = rendered(timelines).splitlines()
        start = next(k for k, line in enumerate(lines) if line.startswith("Clock-event reasons"))
        history = timelines.history
        assert history is not None
        for g in range(4):
            row = lines[start + 1 + g]
            assert row.startswith(f"GPU{g}")
            letters = row[7:].split()[0]
            # 1:30 on, every tick of node03 has HW slowdown set: the row is all H up to now.
            assert set(letters) == {"H"}
            assert row.split()[-1] == "H"
        assert "hw_slowdown" in lines[start + 5]


# ------------------------------------------------------------------ 6. scales do not invent differences
async def test_the_heatmap_of_a_healthy_rack_is_one_colour_band() -> None:
    core = core_until(OFFLINE, SNAPSHOT_TIME_S)
    power = core.state.gpu_values[:, :, 0]
    assert float(power.max() - power.min()) < 140.0  # the premise: a healthy rack, within 10 % of 1,400 W
    app = replay_app(OFFLINE, SNAPSHOT_TIME_S)
    async with app.run_test(size=WIDE) as pilot:
        await settle(pilot, app)
        pal = palette(app)
        heatmap = app.screen.query_one(GpuHeatmap)
        lines = strips(heatmap)
        legend = text_of(lines[0])
        assert "min span 140 W" in legend
        # Every cell's colour is from the middle half of the scale: no extremes, no rainbow.
        middle = {s.bgcolor for s in pal.heat[16:48]}
        cells = [seg for s in lines[2:20] for seg in s if seg.style is not None and seg.style.bgcolor]
        cells = [seg for seg in cells if seg.style is not None and seg.style.bgcolor != heatmap.base.bgcolor]
        assert len(cells) == 72
        assert all(seg.style is not None and seg.style.bgcolor in middle for seg in cells)
        # The node screen's bars follow the same rule.
        await pilot.press("enter")
        await pilot.pause()
        timelines = app.screen.query_one(GpuTimelines)
        text = rendered(timelines)
        power_title = next(line for line in text.splitlines() if line.startswith("Power"))
        assert "min span 140" in power_title
        levels = "▁▂▃▄▅▆▇█"
        rows = text.splitlines()[text.splitlines().index(power_title) + 1 :][:4]
        for row in rows:
            used = [levels.index(ch) for ch in row[7:] if ch in levels]
            assert max(used) - min(used) <= 2, row  # 8 levels over 140 W: tens of W of noise is 1-2


def test_palette_heat_styles_are_distinct_enough() -> None:
    """The test above reads "the middle half" as heat styles 16..47 of 64: they are real steps."""
    from tokenwatch.frontends.tui.palette import _build
    from tokenwatch.frontends.tui.theme_loader import load_catalog, shipped_dir

    spec = load_catalog([shipped_dir()]).themes["dark"]
    pal: Palette = _build((), spec.heatmap or ())
    assert len(pal.heat) == 64
    assert len({s.bgcolor for s in pal.heat}) > 32


# ------------------------------------------------------------------ 7. the latency axis
async def test_the_latency_axis_has_a_tick_every_decade() -> None:
    app = replay_app(SERVER, 400)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, app)
        histogram = app.screen.query_one(LatencyHistogram)
        for _ in range(3):
            stats = app.latest.latency[histogram.metric]
            lines = rendered(histogram).splitlines()
            baseline, labels = lines[-2], lines[-1]
            assert set(baseline) <= {"─", "┴", "╵"}
            lo = float(stats.bucket_values_s.min())
            hi = max(float(stats.bucket_values_s.max()), app.latest.sla_s.get(histogram.metric, 0.0))
            decades = [10.0**e for e in range(math.ceil(math.log10(lo)), math.floor(math.log10(hi)) + 1)]
            assert baseline.count("┴") >= len(decades)
            for decade in decades:
                label = f"{decade * 1000:g}ms" if decade < 1 else f"{decade:g}s"
                assert label in labels.split(), (histogram.metric, label, labels)
            await pilot.press("l")


# ------------------------------------------------------------------ 10. the small lies
async def test_a_paused_replay_opens_the_node_at_the_paused_time() -> None:
    reference = core_until(FAULT_RUN, THROTTLED_AT_S).node_history("node02", last=300)
    assert reference is not None
    app = replay_app(FAULT_RUN, THROTTLED_AT_S)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, app)
        assert app.player is not None
        assert app.player.paused
        app.screen.query_one(NodeTable).cursor_node = "node02"
        await pilot.press("enter")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, NodeScreen)
        title = str(screen.query_one("#node-title").render())
        assert "run time 03:20" in title
        assert "‖" in title  # and it says the replay is paused
        history = screen.query_one(GpuTimelines).history
        assert history is not None  # drawn although nothing new arrives while paused
        np.testing.assert_array_equal(history.times, reference.times)
        for metric, series in reference.gpu_series.items():
            np.testing.assert_array_equal(history.gpu_series[metric], series)
        # space works here too: resume, and pause again
        await pilot.press("space")
        assert not app.player.paused
        await pilot.press("space")
        assert app.player.paused
        assert isinstance(app.screen, NodeScreen)


async def test_the_screenshot_goes_to_the_working_directory_without_downloads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    monkeypatch.setenv("HOME", str(home))  # a home with no Downloads folder (servers, containers)
    monkeypatch.delenv("XDG_DOWNLOAD_DIR", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.chdir(work)
    app = replay_app(FAULT_RUN, 60)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, app)
        await pilot.press("ctrl+p")
        await pilot.pause()
        await pilot.press(*"Screenshot")
        await wait_until_async(
            lambda: palette_offers(app, "Screenshot"), "the palette offering it", pause=pilot.pause
        )
        await pilot.press("enter")
        await wait_until_async(
            lambda: bool(list(work.glob("*.svg")) and app._notifications),
            "the screenshot saved and said",
            pause=pilot.pause,
        )
        shots = list(work.glob("*.svg"))
        assert len(shots) == 1
        assert "<svg" in shots[0].read_text(encoding="utf-8")[:400]
        messages = [str(n.message) for n in app._notifications]
        assert any(str(shots[0]) in m for m in messages), messages
        assert not (home / "Downloads").exists()


def test_the_screenshot_still_goes_to_downloads_where_there_is_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only a missing Downloads folder changes where Textual saves."""
    import asyncio

    home = tmp_path / "home"
    (home / "Downloads").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_DOWNLOAD_DIR", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.chdir(tmp_path)

    async def run() -> None:
        app = replay_app(FAULT_RUN, 60)
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(pilot, app)
            app.deliver_screenshot()
            await wait_until_async(
                lambda: bool(list((home / "Downloads").glob("*.svg"))),
                "the screenshot saved",
                pause=pilot.pause,
            )

    asyncio.run(run())
    assert len(list((home / "Downloads").glob("*.svg"))) == 1
    assert not list(tmp_path.glob("*.svg"))


def test_dashboard_screen_keeps_the_replay_keys() -> None:
    """The replay keys live on the screen both share, so neither can lose them."""
    from tokenwatch.frontends.tui.screens.replay_screen import ReplayScreen

    assert issubclass(DashboardScreen, ReplayScreen)
    assert issubclass(NodeScreen, ReplayScreen)
    keys = {b.key for b in ReplayScreen.BINDINGS}  # type: ignore[union-attr]
    assert {"space", "left", "right", "g"} <= keys


def palette_offers(app: TokenwatchApp, command: str) -> bool:
    """Whether the open command palette's first (highlighted) match is ``command`` (searched in a worker)."""
    from textual.command import CommandList

    found = app.screen.query(CommandList)
    return (
        bool(found)
        and found.first().option_count > 0
        and command in str(found.first().get_option_at_index(0).prompt)
    )
