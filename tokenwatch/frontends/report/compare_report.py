"""Two runs side by side (e.g. the gb200 and gb300 profiles): figures, ratios B / A and charts."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import numpy as np

from tokenwatch.base.events import FloatArray
from tokenwatch.base.formatting import group
from tokenwatch.core.comparison import ComparedFigure, compare_runs
from tokenwatch.core.run_history import RunHistory
from tokenwatch.frontends.report.charts import BarGroup, Frame, Line, RefLine, bar_chart, line_chart
from tokenwatch.frontends.report.page import cards, figure, note, page, section, table, warning_box
from tokenwatch.frontends.report.run_report import subtitle
from tokenwatch.runs.run_data import RunData

_RATIO_ROWS = (
    "Total aggregate",
    "Per GPU",
    "Median single-node",
    "Measured tokens/s per W",
    "TDP-based tokens/s per W (GPUs x TDP)",
    "Spread (max-min)/min",
)


def run_labels(a: RunData, b: RunData) -> tuple[str, str]:
    if a.label != b.label:
        return a.label, b.label
    return f"{a.label} ({Path(a.provenance.path).name})", f"{b.label} ({Path(b.provenance.path).name})"


def _value(fig: ComparedFigure, value: float) -> str:
    if not math.isfinite(value):
        return "—"
    if fig.unit == "W":
        return f"{value / 1000:,.1f} kW" if value >= 10_000 else f"{value:,.0f} W"
    if fig.unit == "%":
        return f"{value:.1f} %"
    if fig.unit == "tokens/J":
        return f"{value:.2f}"
    if fig.unit == "":
        return f"{value:,.0f}"
    return group(value, 1)


def _ratio(fig: ComparedFigure) -> str:
    return f"x{fig.ratio:.3f}" if math.isfinite(fig.ratio) else "—"


def comparison_table(figures: tuple[ComparedFigure, ...], label_a: str, label_b: str) -> str:
    rows, css = [], []
    for f in figures:
        unit = f" ({f.unit})" if f.unit and f.unit not in ("W", "%") else ""
        rows.append([f"{f.section}: {f.label}{unit}", _value(f, f.a), _value(f, f.b), _ratio(f)])
        verdict = f.b_is_better
        css.append(["", "", "", "" if verdict is None else ("good" if verdict else "bad")])
    return table(
        ["figure", f"A: {label_a}", f"B: {label_b}", "B / A"],
        rows,
        cell_classes=css,
        table_id="comparison-table",
    )


def ratio_chart(figures: tuple[ComparedFigure, ...]) -> str:
    chosen = [f for f in figures if f.label in _RATIO_ROWS and math.isfinite(f.ratio)]
    chosen += [
        f for f in figures if f.section == "Latency" and f.label.endswith("p99") and math.isfinite(f.ratio)
    ]
    values = np.array([f.ratio for f in chosen], dtype=np.float64)
    css = ["fmuted" if f.b_is_better is None else ("fgood" if f.b_is_better else "fbad") for f in chosen]
    titles = [f"{f.label}: B / A = {f.ratio:.3f}" for f in chosen]
    return bar_chart(
        "Ratios B / A",
        Frame(
            "figure",
            "B / A",
            y_fmt=lambda v: f"x{v:g}",
            extra_legend=[("B better", "fgood", "box"), ("B worse", "fbad", "box")],
        ),
        [f.label.replace(" (GPUs x TDP)", "") for f in chosen],
        [BarGroup("", values, "f0", titles)],
        [RefLine(1.0, "equal (x1)")],
        bar_css=css,
    )


def run_overlay(
    a: RunData, b: RunData, la: str, lb: str, series: Callable[[RunHistory], FloatArray], title: str, y: str
) -> str | None:
    """Both runs' ``series`` against run time, or None when neither run has one to draw."""
    lines = []
    for run, label, css in ((a, la, "s0"), (b, lb, "s1")):
        h = run.history
        if h is not None and h.points >= 2 and np.isfinite(series(h)).any():
            lines.append(Line(label, h.times / 60.0, series(h), css, 2.0))
    if not lines:
        return None
    return line_chart(title, Frame("run time (min)", y, x_fmt=lambda v: f"{v:g}"), lines)


def node_bars(a: RunData, b: RunData, la: str, lb: str) -> str:
    count = max(len(a.summary.nodes), len(b.summary.nodes))

    def values(run: RunData) -> np.ndarray:
        out = np.full(count, np.nan)
        out[: len(run.summary.nodes)] = [n.tokens_per_s for n in run.summary.nodes]
        return out

    names = [f"#{i + 1}" for i in range(count)]
    return bar_chart(
        "Per-node tokens/s, both runs",
        Frame("node (in each run's order)", "tokens/s per node"),
        names,
        [BarGroup(la, values(a), "f0"), BarGroup(lb, values(b), "f1")],
    )


def latency_bars(a: RunData, b: RunData, la: str, lb: str) -> list[str]:
    out = []
    for metric in ("ttft", "tpot", "e2e"):
        pa, pb = a.summary.latency_ms.get(metric), b.summary.latency_ms.get(metric)
        if not pa and not pb:
            continue
        keys = ["p50", "p90", "p99"]
        va = np.array([(pa or {}).get(k, math.nan) for k in keys], dtype=np.float64)
        vb = np.array([(pb or {}).get(k, math.nan) for k in keys], dtype=np.float64)
        chart = bar_chart(
            f"{metric.upper()} percentiles, both runs",
            Frame("percentile", f"{metric.upper()} (ms)"),
            keys,
            [BarGroup(la, va, "f0"), BarGroup(lb, vb, "f1")],
        )
        out.append(figure(f"compare-latency-{metric}", f"{metric.upper()} percentiles (ms)", chart))
    return out


def comparability_warnings(a: RunData, b: RunData) -> list[str]:
    """Why the two runs' figures do not compare like for like (printed by the CLI, boxed in the page)."""
    sa, sb = a.summary.scenario, b.summary.scenario
    if sa == sb:
        return []
    return [
        f"A is a {sa} run and B a {sb} run: their figures are not comparable (Offline measures throughput "
        "with every sample queued at once, Server under a latency bound at a target arrival rate); the "
        "ratios below compare different things"
    ]


def render_comparison(a: RunData, b: RunData) -> str:
    la, lb = run_labels(a, b)
    figures = compare_runs(a.summary, b.summary, a.efficiency, b.efficiency)
    by_label = {f.label: f for f in figures}
    head = cards(
        [
            (label, _ratio(by_label[key]))
            for label, key in (
                ("aggregate B / A", "Total aggregate"),
                ("per GPU B / A", "Per GPU"),
                ("tokens/s per W (TDP) B / A", "TDP-based tokens/s per W (GPUs x TDP)"),
                ("tokens/s per W (measured) B / A", "Measured tokens/s per W"),
            )
        ]
    )
    charts = [figure("compare-ratios", "Ratios B / A (green: B better, red: B worse)", ratio_chart(figures))]
    overlay = run_overlay(
        a, b, la, lb, lambda h: h.rack_tokens_per_s, "Rack aggregate tokens/s, both runs", "tokens/s"
    )
    if overlay:
        charts.append(figure("compare-throughput", "Rack aggregate tokens/s over time", overlay))
    charts.append(figure("compare-nodes", "Per-node tokens/s (node spread)", node_bars(a, b, la, lb)))
    power = run_overlay(
        a, b, la, lb, lambda h: h.rack_power_w / 1000.0, "Rack GPU power, both runs", "rack GPU power (kW)"
    )
    if power:
        charts.append(figure("compare-power", "Rack GPU power over time", power))
    latency = latency_bars(a, b, la, lb)
    warnings = [warning_box(w) for w in comparability_warnings(a, b)]
    warnings += [warning_box(f"A: {w}") for w in a.warnings[:10]] + [
        warning_box(f"B: {w}") for w in b.warnings[:10]
    ]
    body = [
        *warnings,
        head,
        section(
            "comparison",
            "Side by side",
            comparison_table(figures, la, lb),
            note("Ratios are B / A. Latency: lower is better; spread: lower is better."),
        ),
        section("compare-charts", "Throughput, per GPU, power and spread", *charts),
        section("compare-latency", "Latency", *latency)
        if latency
        else section(
            "compare-latency", "Latency", note("Neither run measured per-request latency (Offline).")
        ),
        section(
            "compare-provenance",
            "Provenance",
            table(
                ["", "A", "B"],
                [
                    ["run", la, lb],
                    ["source", a.provenance.path, b.provenance.path],
                    ["sha256", a.provenance.sha256, b.provenance.sha256],
                    ["scenario", a.summary.scenario, b.summary.scenario],
                    [
                        "nodes x GPUs",
                        f"{len(a.summary.nodes)} x {a.gpus_per_node or '?'}",
                        f"{len(b.summary.nodes)} x {b.gpus_per_node or '?'}",
                    ],
                    ["start time", a.provenance.start_time or "—", b.provenance.start_time or "—"],
                    ["report by", f"tokenwatch {a.provenance.report_version}", ""],
                ],
                table_id="compare-provenance-table",
            ),
        ),
    ]
    return page(f"{la} vs {lb}", f"A: {subtitle(a)}  |  B: {subtitle(b)}", body)
