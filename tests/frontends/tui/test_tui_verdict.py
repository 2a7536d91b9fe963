"""The verdict panel and the header badge: at the top of the dashboard at every size, saying what the core
projects (checked against a reference core fed the same recording), and SVG snapshots of both."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from rich.text import Text
from textual.widgets import Static

from tests.conftest import wait_until_async
from tests.frontends.tui.apps import (
    OFFLINE,
    SERVER,
    SNAPSHOT_TIME_S,
    core_until,
    ready,
    replay_app,
    settle,
    sim_app,
)
from tokenwatch.base.formatting import group
from tokenwatch.frontends.tui.widgets.big_figure import BigFigure
from tokenwatch.frontends.tui.widgets.node_table import NodeTable
from tokenwatch.frontends.tui.widgets.run_header import RunHeader
from tokenwatch.frontends.tui.widgets.verdict_badge import VerdictBadge
from tokenwatch.frontends.tui.widgets.verdict_panel import VerdictPanel
from tokenwatch.frontends.tui.widgets.verdict_rules import VerdictRules

SnapCompare = Callable[..., bool]


def text_of(widget: Static) -> str:
    content = widget.render()
    return content.plain if isinstance(content, Text) else str(content)


@pytest.mark.parametrize("size", [(120, 40), (200, 60), (80, 24)])
async def test_the_panel_sits_at_the_top_and_says_what_the_core_projects(size: tuple[int, int]) -> None:
    reference = core_until(OFFLINE, SNAPSHOT_TIME_S).snapshot().verdict
    assert reference is not None
    assert reference.forecast.tokens_per_s is not None
    band = reference.forecast.tokens_per_s
    app = replay_app()
    async with app.run_test(size=size) as pilot:
        await settle(pilot, app)
        panel = app.screen.query_one(VerdictPanel)
        header = app.screen.query_one(RunHeader)
        # Right under the header (and the replay bar), whole, before anything else in the body.
        assert panel.region.y <= header.region.bottom + 1
        assert panel.region.bottom <= size[1] - 1
        assert panel.region.y < app.screen.query_one(NodeTable).region.y
        assert panel.query_one(BigFigure).value == group(band.value)
        word = text_of(panel.query_one("#verdict-word", Static))
        assert word == f"PROJECTED {'VALID' if reference.valid else 'INVALID'}"
        half = 100 * (band.high - band.low) / 2 / band.value
        assert f"±{half:.1f} %" in text_of(panel.query_one("#band", Static))
        rules = panel.query_one(VerdictRules)
        drawn = "\n".join(strip.text for strip in rules.render_lines(rules.region.reset_offset))
        for rule in reference.forecast.rules:
            label = {"min_duration": "min duration", "min_queries": "min samples"}[rule.name]
            assert f"{'✓' if rule.ok else '✗'} {label}" in drawn
        badge = app.screen.query_one(VerdictBadge)
        assert badge.has_class("-valid") is bool(reference.valid)
        assert text_of(badge).startswith(f"PROJECTED VALID {group(band.value / 1000)}k ±{half:.1f} %")


async def test_a_run_that_will_be_invalid_says_so_in_red_and_which_rule() -> None:
    app = sim_app(duration="3m")  # 3 minutes: under the rules' 600 s and 24,576 samples
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until_async(lambda: app.session.core.ended, "the simulated run's end", pause=pilot.pause)
        app.refresh_data(force=True)
        await pilot.pause()
        badge = app.screen.query_one(VerdictBadge)
        assert text_of(badge).startswith("FINAL INVALID ")
        assert badge.has_class("-invalid")
        rules = app.screen.query_one(VerdictRules)
        drawn = "\n".join(strip.text for strip in rules.render_lines(rules.region.reset_offset))
        assert "✗ min duration" in drawn
        assert "✗ min samples" in drawn


def test_snapshot_of_a_server_runs_verdict(snap_compare: SnapCompare) -> None:
    """Six rules, every one from the simulator's exact counts, at half-way through the 10-minute run."""
    app = replay_app(SERVER, 300)
    assert snap_compare(app, terminal_size=(120, 40), run_before=ready(app))


def test_snapshot_of_the_verdict_on_a_narrow_screen(snap_compare: SnapCompare) -> None:
    app = replay_app(SERVER, 300)
    assert snap_compare(app, terminal_size=(80, 24), run_before=ready(app))
