"""SVG snapshots of the dashboard over the gb300 sample run, paused at 41:07 (speed 0: no wall clock),
and over runs that end badly (a fault run at its end, an interrupted run).

Update after an intended change with
``pytest tests/frontends/tui/test_tui_snapshots.py --snapshot-update`` and look at the new SVGs before
committing them.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from textual.pilot import Pilot

from tests.frontends.tui.apps import OFFLINE, end_of, ready, replay_app, settle
from tests.frontends.tui.recordings import FAULT_RUN, interrupted_events, write_recording
from tokenwatch.frontends.tui.theme_loader import SHIPPED_ORDER
from tokenwatch.frontends.tui.widgets.gpu_heatmap import GpuHeatmap

SnapCompare = Callable[..., bool]


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


# The edges of a run: the screen never states a wrong thing at the edges of a run.


def test_fault_run_at_its_end(snap_compare: SnapCompare) -> None:
    """node07 down since 1:00, node05 silent since 4:00, node03 throttled from 1:30 to its end: the
    banner, the run's result in the published-table form, run figures in the header, dashes for the
    silent nodes' readings."""
    app = replay_app(FAULT_RUN, end_of(FAULT_RUN))
    assert snap_compare(app, terminal_size=(120, 40), run_before=ready(app))


def test_fault_run_at_its_end_at_200x60(snap_compare: SnapCompare) -> None:
    """The same, with the heatmap: the silent GPUs' cells say down and stale instead of a colour."""
    app = replay_app(FAULT_RUN, end_of(FAULT_RUN))
    assert snap_compare(app, terminal_size=(200, 60), run_before=ready(app))


def test_fault_run_while_node03_throttles(snap_compare: SnapCompare) -> None:
    """3:20: node03 slow and throttling (both marks), node07 down; its node screen shows the reasons."""
    app = replay_app(FAULT_RUN, 200)
    keys = ("down", "down", "enter")
    assert snap_compare(app, terminal_size=(120, 40), run_before=ready(app, *keys))


def test_interrupted_run(snap_compare: SnapCompare, tmp_path: Path) -> None:
    path = write_recording(tmp_path / "interrupted.jsonl.zst", interrupted_events(OFFLINE, 464.0))
    app = replay_app(path, end_of(path))
    assert snap_compare(app, terminal_size=(120, 40), run_before=ready(app))


def test_heatmap_scale_on_a_healthy_rack(snap_compare: SnapCompare) -> None:
    """41:07 of the healthy sample run: 1,37x-1,39x W is one colour band, the legend shows the span."""
    app = replay_app()

    async def run_before(pilot: Pilot[None]) -> None:
        await settle(pilot, app)
        heatmap = app.screen.query_one(GpuHeatmap)
        heatmap.focus()
        heatmap.scroll_visible(animate=False, top=True)
        app.refresh_data(force=True)
        await pilot.pause()

    assert snap_compare(app, terminal_size=(120, 40), run_before=run_before)
