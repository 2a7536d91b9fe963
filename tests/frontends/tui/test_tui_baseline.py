"""The dashboard with ``--baseline``: the header's comparison, the node table's ``vs base`` column, the
baseline's line on the throughput timeline and its histogram over the latency panel.

The run is the 80-minute gb300 sample paused at 41:07 against the node-failure sample (node07 down from
30:00), and the 10-minute Server sample at 5:00 against the simulator's expected run (sim:gb300-nvl72).
What is drawn is checked against the snapshot's figures, and those against measured means computed from
both recordings' raw events. Cost: the two baselines load once (~2.5 s), each app settles in ~2 s.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from rich.style import Style
from rich.text import Text
from textual.widgets import Static

from tests.core.baseline.baseline_runs import down_and_share, finite_sum, measured_means, pct, record
from tests.frontends.tui.apps import (
    NODE_FAILURE,
    OFFLINE,
    SERVER,
    SNAPSHOT_TIME_S,
    end_of,
    replay_app,
    settle,
    settle_sync,
)
from tests.frontends.tui.test_tui_run_edges import strips, text_of
from tokenwatch.base.durations import format_clock
from tokenwatch.core import CoreConfig
from tokenwatch.core.baseline import Baseline, RunIdentity
from tokenwatch.frontends.tui.app import TokenwatchApp
from tokenwatch.frontends.tui.charts import LINE_GLYPHS, LINE_HEIGHTS, pick_columns
from tokenwatch.frontends.tui.palette import palette
from tokenwatch.frontends.tui.widgets.latency_histogram import LatencyHistogram
from tokenwatch.frontends.tui.widgets.node_table import NodeTable
from tokenwatch.frontends.tui.widgets.throughput_timeline import ThroughputTimeline
from tokenwatch.recording import read_events
from tokenwatch.runs.baseline import load_baseline

SnapCompare = Callable[..., bool]
SERVER_AT_S = 300.0


@functools.cache
def node_failure_baseline() -> Baseline:
    return load_baseline(str(NODE_FAILURE), RunIdentity("Offline"))[0]


@functools.cache
def expected_server_baseline() -> Baseline:
    return load_baseline("sim:gb300-nvl72", RunIdentity("Server", duration_s=600.0))[0]


def offline_app() -> TokenwatchApp:
    return replay_app(OFFLINE, config=CoreConfig(baseline=node_failure_baseline()))


def server_app() -> TokenwatchApp:
    return replay_app(SERVER, SERVER_AT_S, config=CoreConfig(baseline=expected_server_baseline()))


async def test_header_and_node_column_show_the_cores_comparison_at_41_07() -> None:
    app = offline_app()
    async with app.run_test(size=(200, 60)) as pilot:
        await settle(pilot, app)
        view = app.latest.baseline
        assert view is not None
        assert view.t == SNAPSHOT_TIME_S
        # The core's figures against measured means from both recordings at 41:07 (the baseline's
        # 80-minute series keeps 8-s points: read between them, within 0.05 points).
        ours = measured_means(read_events(OFFLINE)[0], SNAPSHOT_TIME_S)
        theirs = measured_means(read_events(NODE_FAILURE)[0], SNAPSHOT_TIME_S)
        assert view.delta_pct == pytest.approx(pct(finite_sum(ours), finite_sum(theirs)), abs=0.05)
        names = app.latest.nodes.names
        for i, name in enumerate(names):
            assert view.node_delta_pct[i] == pytest.approx(pct(ours[name], theirs[name]), abs=0.05), name
        header = app.screen.query_one("#vs-baseline", Static)
        assert header.display
        # The baseline's node07 has been down since 30:00: the header says what the figures cover.
        assert view.covers_brief == "all 18 up in this run; 17 of 18 nodes up in the baseline"
        assert str(header.render()) == (
            f"vs baseline {view.delta_text()} at 41:07 · {view.finish_text()} · {view.covers_brief}"
        )
        table = app.screen.query_one(NodeTable)
        assert "base" in [c.key for c in table._columns]
        head = text_of(strips(table)[0])
        assert "vs base" in head
        start = head.index("vs base") + len("vs base")
        for line in strips(table)[1:]:
            row = text_of(line)
            name = row.split()[0] if row.strip() else ""
            if name in names:  # node07 marked: it went down in the baseline, its figure there is partial
                cell = row[start - 8 : start].strip()
                mark = "*" if name == "node07" else ""
                assert cell == f"{view.node_delta_pct[names.index(name)]:+.1f}%{mark}", name
        down_at, share = down_and_share(read_events(NODE_FAILURE)[0], "node07")
        words = f"down from {format_clock(down_at)}, {share * 100:.0f} % of its samples"
        assert str(table.border_title).endswith(f" · * node07 baseline: {words}")
        assert "baseline gb300-nvl72-node-failure.jsonl.zst" in str(
            app.screen.query_one(ThroughputTimeline).border_subtitle
        )
        # Sorting by the column puts the node furthest behind its baseline first.
        table.sort_by("base")
        first = text_of(strips(table)[1]).split()[0]
        assert first == names[int(min(range(len(names)), key=lambda i: view.node_delta_pct[i]))]


async def test_other_node_names_are_matched_by_rank_and_the_table_says_so() -> None:
    renamed = dataclasses.replace(node_failure_baseline(), nodes=tuple(f"host{i:02d}" for i in range(1, 19)))
    app = replay_app(OFFLINE, config=CoreConfig(baseline=renamed))
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, app)
        assert app.latest.baseline is not None
        assert app.latest.baseline.matched_by == "rank"
        assert app.latest.baseline.counterpart[:2] == ("host01", "host02")
        assert "vs base: matched by rank" in str(app.screen.query_one(NodeTable).border_title)


async def test_without_a_baseline_nothing_of_it_is_drawn() -> None:
    app = replay_app(OFFLINE)
    async with app.run_test(size=(200, 60)) as pilot:
        await settle(pilot, app)
        assert app.latest.baseline is None
        assert not app.screen.query_one("#vs-baseline", Static).display
        table = app.screen.query_one(NodeTable)
        assert "base" not in [c.key for c in table._columns]
        table.sort_by("node")
        for _ in range(len(table._columns) + 2):  # s never lands on the missing column
            table.cycle_sort()
            assert table.sort_key != "base"


async def test_the_latency_panel_overlays_the_baselines_histogram() -> None:
    app = server_app()
    async with app.run_test(size=(200, 60)) as pilot:
        await settle(pilot, app)
        view = app.latest.baseline
        assert view is not None
        reference = view.latency["ttft"]
        panel = app.screen.query_one(LatencyHistogram)
        text = panel.render()
        assert isinstance(text, Text)
        lines = text.plain.splitlines()
        assert f"─ baseline p99 {reference.p99 * 1000:,.0f} ms" in lines[0]
        chart = lines[2:-2]
        assert sum(line.count("─") for line in chart) >= 10  # the baseline's line across the columns
        # The expected run of the published figures: the same median TTFT as the sample (0.32 s).
        assert reference.p50 == pytest.approx(app.latest.latency["ttft"].p50, rel=0.05)
        assert math.isfinite(view.finish_gap_s)


@pytest.fixture(scope="module")
def fault_twins(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """``sim --seed 0 --faults node07:down@3m`` and ``sim --seed 0``, ten minutes each: the same work
    but node07's, so the baseline's line runs just above the fault run's bars (by 0.3 % at the end)."""
    folder = tmp_path_factory.mktemp("fault-twins")
    return record(folder / "faults.jsonl", 0, 600.0, "node07:down@3m"), record(
        folder / "seed0.jsonl", 0, 600.0
    )


async def test_the_baselines_line_is_drawn_at_its_true_height(fault_twins: tuple[Path, Path]) -> None:
    """Each column's line sits within a quarter row of the baseline's figure (the bars are drawn to an
    eighth): a line a fraction of a percent above the bars sits on them, not a row (~15 %) above."""
    faults, clean = fault_twins
    baseline = load_baseline(str(clean), RunIdentity("Offline"))[0]
    app = replay_app(faults, end_of(faults), config=CoreConfig(baseline=baseline))
    async with app.run_test(size=(200, 60)) as pilot:
        await settle(pilot, app)
        snap = app.latest
        assert snap.baseline is not None
        chart = app.screen.query_one(ThroughputTimeline)
        text = chart.render()
        assert isinstance(text, Text)
        width, height = chart.content_size
        chart_w, chart_h = width - 8, height - 1
        t_end = max(snap.run.nominal_duration_s or 0.0, float(snap.timeline.times[-1]))
        ours = pick_columns(snap.timeline.times, snap.timeline.tokens_per_s, 0.0, t_end, chart_w)
        theirs = pick_columns(
            snap.baseline.timeline_times, snap.baseline.timeline_tokens_per_s, 0.0, t_end, chart_w
        )
        hi = max(np.nanmax(ours), np.nanmax(theirs)) * 1.15
        line_colour = palette(app).text.color
        drawn: dict[int, float] = {}  # column: the line's height in rows from the chart's bottom
        for r, row in enumerate(text.split("\n")[:chart_h]):
            for span in row.spans:
                style = span.style if isinstance(span.style, Style) else Style.parse(span.style)
                if style.color != line_colour:
                    continue
                for col in range(span.start - 8, span.end - 8):
                    glyph = row.plain[col + 8]
                    drawn[col] = chart_h - 1 - r + LINE_HEIGHTS[LINE_GLYPHS.index(glyph)]
        finite = [c for c in range(chart_w) if math.isfinite(theirs[c])]
        assert len(drawn) == len(finite) > chart_w // 2
        for col in finite:
            assert drawn[col] == pytest.approx(theirs[col] / hi * chart_h, abs=0.25), col
        # Where the run's bar is within an eighth of a row of the line, they touch: no row between them.
        close = [
            c for c in finite if math.isfinite(ours[c]) and abs(ours[c] - theirs[c]) / hi * chart_h < 0.125
        ]
        assert close
        for col in close:
            assert abs(drawn[col] - ours[col] / hi * chart_h) < 0.4, col


def test_snapshot_offline_against_a_baseline(snap_compare: SnapCompare) -> None:
    """41:07 against the node-failure run: the header's comparison, the timeline's second line (the
    baseline's drop at 30:00 when its node07 went down), the vs base column."""
    app = offline_app()
    assert snap_compare(app, terminal_size=(120, 40), run_before=settle_sync(app))


def test_snapshot_server_against_the_simulators_expected_run(snap_compare: SnapCompare) -> None:
    """5:00 of the Server sample against sim:gb300-nvl72: the TTFT histogram under the expected one."""
    app = server_app()
    assert snap_compare(app, terminal_size=(200, 60), run_before=settle_sync(app))
