"""The report's MLPerf verdict: the final rules as the summary judges them, and how early the forecast
held the final figure (checked against the forecast history by an independent scan)."""

from __future__ import annotations

import numpy as np

from tokenwatch.core.verdict.view import VerdictHistory, forecast_accuracy
from tokenwatch.frontends.report.run_report import render_run_report
from tokenwatch.runs.run_data import RunData


def settled_from(times: np.ndarray, ok: np.ndarray) -> float | None:
    """The first time from which ``ok`` holds at every later tick (a plain scan, no vector tricks)."""
    start = None
    for t, flag in zip(times.tolist(), ok.tolist(), strict=True):
        if flag and start is None:
            start = t
        elif not flag:
            start = None
    return start


def test_the_server_reports_verdict_and_forecast_chart(server_run: RunData) -> None:
    html = render_run_report(server_run)
    section = html[html.index('id="verdict"') :]
    section = section[: section.index("</section>")]
    final = server_run.summary.verdict
    assert final is not None
    assert f"Final verdict: {'VALID' if final.valid else 'INVALID'}" in section
    table = section[section.index('id="verdict-table"') :]
    for check in final.checks:
        assert f"<td>{check.name}</td><td>{check.node}</td>" in table
    estimated = [c for c in final.checks if c.estimated]
    assert estimated  # the simulator's latencies are histograms: their p99 is an estimate, marked so
    assert all("<td>~" in table.split(f"<td>{c.name}</td>")[1].split("</tr>")[0] for c in estimated)
    assert 'id="verdict-forecast"' in section
    assert "<svg" in section
    view = server_run.snapshot.verdict if server_run.snapshot else None
    assert view is not None
    history = view.history
    ok = np.isfinite(history.value)
    final_figure = server_run.summary.tokens_per_s
    held = settled_from(
        history.times[ok], (history.low[ok] <= final_figure) & (final_figure <= history.high[ok])
    )
    assert held is not None
    assert f"The band held the final figure from {held / 60:.1f} min" in section


def test_forecast_accuracy_on_a_made_up_history() -> None:
    times = np.arange(10.0, 110.0, 10.0)
    value = np.array([np.nan, 80, 95, 99, 100.5, 103, 100.2, 99.8, 100, 100])
    low, high = value - 2.0, value + 2.0
    accuracy = forecast_accuracy(VerdictHistory(times, value, low, high, value, value), 100.0)
    assert accuracy.band_holds_from_s == 70.0  # 103 +- 2 at 60 s misses 100
    assert accuracy.within_pct_from_s == 70.0
    never = forecast_accuracy(VerdictHistory(times, value, low, high, value, value), 200.0)
    assert never.band_holds_from_s is None
    empty = VerdictHistory(times[:0], value[:0], low[:0], high[:0], value[:0], value[:0])
    assert forecast_accuracy(empty, 100.0).band_holds_from_s is None
