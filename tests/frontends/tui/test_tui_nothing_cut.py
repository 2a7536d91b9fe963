"""Nothing important is cut off the dashboard: every warning of a fault run's result is there (whole, cut
to a line, or counted as ``+N more``), an alert too long for its panel is cut in the middle so its figure
and its end both show, and the throughput chart's y-axis carries numbers, not only ``mean`` and ``0``."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest

from tests.frontends.tui.apps import SERVER, end_of, replay_app, settle
from tests.frontends.tui.recordings import FAULT_RUN
from tests.frontends.tui.test_tui_run_edges import rendered, strips, text_of
from tokenwatch.base.formatting import latency_cell
from tokenwatch.frontends.tui.palette import palette
from tokenwatch.frontends.tui.widgets.alerts_panel import AlertsPanel
from tokenwatch.frontends.tui.widgets.node_spread import NodeSpreadPanel
from tokenwatch.frontends.tui.widgets.run_summary import summary_text, warning_lines
from tokenwatch.frontends.tui.widgets.throughput_timeline import ThroughputTimeline

END_S = end_of(FAULT_RUN)


@pytest.mark.parametrize("size", [(200, 60), (120, 40), (80, 24)], ids=["200x60", "120x40", "80x24"])
async def test_every_warning_of_a_fault_runs_result_is_shown_or_counted(size: tuple[int, int]) -> None:
    app = replay_app(FAULT_RUN, END_S)
    async with app.run_test(size=size) as pilot:
        await settle(pilot, app)
        summary = app.latest.summary
        assert summary is not None
        assert len(summary.warnings) >= 2  # node07 down, node05 stale
        panel = app.screen.query_one(NodeSpreadPanel)
        shown = rendered(panel).splitlines()[: panel.content_size.height]
        marked = [line for line in shown if line.startswith("▲ ")]
        more = [line for line in shown if re.match(r"^\+\d+ more warnings?", line)]
        counted = int(more[0][1:].split()[0]) if more else 0
        firsts = {w.split(" (")[0] for w in summary.warnings}  # "node07 did not finish"
        seen = {first for first in firsts if any(first in line for line in marked)}
        assert len(seen) + counted == len(summary.warnings), shown


def test_warnings_that_do_not_fit_become_lines_then_a_count() -> None:
    warnings = [
        f"node{k:02d} did not finish (down since 0{k}:00: a long reason) " + "x " * 60 for k in range(3)
    ]
    assert len(warning_lines(warnings, 40, None)) > 6  # wrapped whole where there is room
    one_each = warning_lines(warnings, 40, 3)
    assert [line[:23] for line in one_each] == [f"▲ node{k:02d} did not finish" for k in range(3)]
    assert all(len(line) <= 40 for line in one_each)
    assert warning_lines(warnings, 40, 2) == [
        one_each[0],
        "+2 more warnings: all in the summary printed on quitting",
    ]


async def test_a_long_alert_keeps_its_figure_and_its_end_at_every_size() -> None:
    for size in ((200, 60), (120, 40), (80, 24)):
        app = replay_app(FAULT_RUN, 200.0)  # node03 throttled and straggling: long messages
        async with app.run_test(size=size) as pilot:
            await settle(pilot, app)
            panel = app.screen.query_one(AlertsPanel)
            messages = [a.message for a in app.latest.active_alerts + app.latest.alerts]
            cut = 0
            for strip in strips(panel):
                line = text_of(strip).rstrip()
                if not line or line.startswith("no alerts"):
                    continue
                body = line.split(" ", 2)[2]  # after the clock and the symbol
                if "…" not in body:
                    assert body in messages
                    continue
                cut += 1
                head, tail = body.split("…", 1)
                assert tail, body  # the end (often the cause) is kept, not cut off
                assert any(m.startswith(head) and m.endswith(tail) for m in messages), body
                figure = re.search(r"(?<!\w)\d[\d,.]*%?", next(m for m in messages if m.startswith(head)))
                if figure is not None and figure.end() <= len(head) + 3:
                    assert figure.group() in head
            if size[0] <= 120:
                assert cut, "the narrow panel cuts some message"


async def test_the_throughput_y_axis_carries_numbers_with_the_mean_near_the_top() -> None:
    app = replay_app(FAULT_RUN, END_S)
    async with app.run_test(size=(200, 60)) as pilot:
        await settle(pilot, app)
        chart = app.screen.query_one(ThroughputTimeline)
        labels = [line.split("▕", 1)[0].strip() for line in rendered(chart).splitlines() if "▕" in line]
        assert "mean" in labels
        numbers = [label for label in labels if re.fullmatch(r"\d+(\.\d+)?[kMG]?", label)]
        assert len(numbers) >= 3, labels  # the top, the bottom and between
        values = [float(n.rstrip("kMG")) for n in numbers]
        assert values == sorted(values, reverse=True)
        assert values[-1] == 0


@pytest.mark.parametrize("size", [(200, 60), (120, 40)], ids=["200x60", "120x40"])
async def test_the_run_results_latency_table_fits_its_panel_whole(size: tuple[int, int]) -> None:
    """Every p50 / p90 / p99 of the ended Server run is on the result panel whole: the figures are never
    the part cropped (a 44-column panel cut ~918 to ~91), the label column gives way first."""
    app = replay_app(SERVER, end_of(SERVER))
    async with app.run_test(size=size) as pilot:
        await settle(pilot, app)
        summary = app.latest.summary
        assert summary is not None
        assert summary.latency_ms
        panel = app.screen.query_one(NodeSpreadPanel)
        width = panel.content_size.width
        lines = rendered(panel).splitlines()
        for metric, figures in summary.latency_ms.items():
            row = next(line for line in lines if line.startswith(metric.upper() + " "))
            assert len(row) <= width, (row, width)
            cells = [latency_cell(figures.get(k), summary.latency_estimated) for k in ("p50", "p90", "p99")]
            assert row.split()[1:] == cells


async def test_a_latency_table_wider_than_its_panel_keeps_its_figures() -> None:
    """Seven-figure latencies (a stalled Server run's E2E) in a narrow panel: the title shortens to
    ``ms`` before a figure is cut."""
    app = replay_app(SERVER, end_of(SERVER))
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, app)
        summary = app.latest.summary
        assert summary is not None
        huge = {"e2e": {"p50": 1_359_534.3, "p90": 2_000_000.0, "p99": 2_500_000.5}}
        summary = replace(summary, latency_ms={**summary.latency_ms, **huge}, latency_estimated=False)
        for width in (44, 40):
            lines = summary_text(summary, palette(app), width).plain.splitlines()
            e2e = next(line for line in lines if line.startswith("E2E "))
            assert len(e2e) <= width
            assert e2e.split()[1:] == ["1,359,534.3", "2,000,000.0", "2,500,000.5"]
        assert any(line.startswith("ms ") for line in lines)
