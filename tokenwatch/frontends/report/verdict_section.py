"""The report's MLPerf verdict: the final verdict rule by rule, and the forecast over time.

The chart shows what the dashboard projected at each verdict tick (the projection and its band) against
the final figure, and says from when the band held it and from when the projection stayed within 1 %:
how early the forecast was right.
"""

from __future__ import annotations

import math

import numpy as np

from tokenwatch.base.formatting import group, verdict_word
from tokenwatch.core.verdict.view import check_cells, forecast_accuracy
from tokenwatch.frontends.report.charts import Frame, Line, RefLine, line_chart
from tokenwatch.frontends.report.page import figure, note, section, table
from tokenwatch.frontends.report.run_sections import TIME_AXIS, minutes
from tokenwatch.runs.run_data import RunData

CLIP_PCT = 5.0


def verdict_section(run: RunData) -> str:
    final = run.summary.verdict
    parts = []
    if final is not None:
        head = f"Final verdict: {verdict_word(final.valid)}"
        if final.tokens_per_s is not None:  # the run's final figure, the one the summary table shows
            head += f" at {group(final.tokens_per_s, 1)} tokens/s"
        if final.benchmark:
            head += f" ({final.benchmark}, {final.scenario})"
        if final.note:
            head += f"; {final.note}"
        rows, css = [], []
        for check in final.checks:
            rows.append([*check_cells(check), check.detail])
            css.append(["good" if check.ok else "bad" if check.ok is False else "", "", "", "", "", "", ""])
        parts.append(
            note(f"{head}; judged by {final.judged_by}. " + " / ".join(s.strip() for s in final.lines))
        )
        if rows:
            parts.append(
                table(
                    ["", "rule", "node", "value", "limit", "margin", "detail"],
                    rows,
                    cell_classes=css,
                    table_id="verdict-table",
                )
            )
    view = run.snapshot.verdict if run.snapshot is not None else None
    history = view.history if view is not None else None
    if history is None or not (history.value == history.value).any():
        parts.append(note("No forecast over time: the run has no time series (MLPerf result folders)."))
        return section("verdict", "MLPerf verdict", *parts)
    figure_final = run.summary.tokens_per_s
    t = minutes(history.times)

    def off(values: np.ndarray) -> np.ndarray:  # % off the final figure, the far early ones at the edge
        return np.clip(100.0 * (values / figure_final - 1.0), -CLIP_PCT, CLIP_PCT)

    chart = line_chart(
        "Projected final tokens/s over the run, with its band, against the final figure",
        Frame(TIME_AXIS, "% off the final figure", x_fmt=lambda v: f"{v:g}", y_fmt=lambda v: f"{v:+g} %"),
        [
            Line("projection", t, off(history.value), "s0", 2.5),
            Line("band", t, off(history.low), "muted", 1.2, dashed=True),
            Line("band (high)", t, off(history.high), "muted", 1.2, dashed=True, in_legend=False),
        ],
        [RefLine(0.0, f"final: {group(figure_final)} tok/s")],
        y_from_zero=False,
    )
    accuracy = forecast_accuracy(history, figure_final)

    def when(seconds: float | None) -> str:
        if seconds is None:
            return "never"
        share = 100.0 * seconds / float(history.times[-1]) if history.times[-1] else math.nan
        return f"from {seconds / 60:.1f} min ({share:.0f} % of the run) on"

    caption = (
        f"The band held the final figure {when(accuracy.band_holds_from_s)}; the projection stayed within "
        f"{accuracy.within_pct:g} % of it {when(accuracy.within_pct_from_s)}. One point per verdict tick; "
        f"points more than {CLIP_PCT:g} % off are drawn at the edge."
    )
    parts.append(figure("verdict-forecast", "Forecast over time: how early it was right", chart, caption))
    return section("verdict", "MLPerf verdict", *parts)
