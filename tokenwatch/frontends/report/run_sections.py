"""The chart sections of a run report: throughput, node spread, GPU heatmaps, power, latency, alerts."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from tokenwatch.base.formatting import group, latency_cell, seconds_label, seconds_ms, si
from tokenwatch.core.histogram import coarse_bins
from tokenwatch.core.nan_math import finite_range
from tokenwatch.core.node_spread import below_median_pct
from tokenwatch.frontends.report.charts import (
    BarGroup,
    Frame,
    Line,
    RefLine,
    TimelineRow,
    bar_chart,
    heatmap_chart,
    histogram_chart,
    line_chart,
    timeline_chart,
)
from tokenwatch.frontends.report.page import figure, note, section, table
from tokenwatch.runs.run_data import RunData

if TYPE_CHECKING:
    from tokenwatch.core.baseline import Baseline

MAX_NODE_LINES = 36  # beyond this, per-node lines become quantile bands
MAX_HEATMAP_GPU_ROWS = 576  # beyond this, one heatmap row per node (mean of its GPUs)
MAX_TIMELINE_ROWS = 40
MAX_ALERT_TABLE_ROWS = 200
LATENCY_BINS = 48


def minutes(seconds: np.ndarray) -> np.ndarray:
    return np.asarray(seconds, dtype=np.float64) / 60.0


def _min_label(v: float) -> str:
    return f"{v:g}"


TIME_AXIS = "run time (min)"


def unavailable(section_id: str, title: str, why: str) -> str:
    return section(section_id, title, note(why))


def throughput_section(run: RunData, baseline: Baseline | None = None) -> str:
    h = run.history
    if h is None or h.points < 2:
        return unavailable(
            "throughput",
            "Throughput over time",
            "No time series: MLPerf result folders "
            "hold each node's final figures only. Record the run to see it over time.",
        )
    t = minutes(h.times)
    steady = run.snapshot.timeline.steady_mean_tokens_per_s if run.snapshot else math.nan
    rack_lines = [Line("rack aggregate (tokens/s)", t, h.rack_tokens_per_s, "s0", 2.5)]
    if baseline is not None and baseline.has_series:  # --baseline: its rack at the same run time
        rack_lines.append(
            Line(f"baseline: {baseline.name}", minutes(baseline.times), baseline.rack_tokens_per_s, "s3", 2.0,
                 dashed=True)
        )  # fmt: skip
    aggregate = line_chart(
        "Rack aggregate tokens/s over time",
        Frame(TIME_AXIS, "tokens/s", x_fmt=_min_label),
        rack_lines,
        [RefLine(steady, f"steady-state mean: {group(steady)} tok/s")] if math.isfinite(steady) else [],
    )
    means = np.array([n.tokens_per_s for n in run.summary.nodes], dtype=np.float64)
    lines: list[Line] = []
    if len(h.nodes) <= MAX_NODE_LINES:
        fastest = int(np.nanargmax(means)) if np.isfinite(means).any() else -1
        slowest = int(np.nanargmin(means)) if np.isfinite(means).any() else -1
        for i, name in enumerate(h.nodes):
            if i not in (fastest, slowest):
                lines.append(Line(name, t, h.node_tokens_per_s[:, i], "muted", 1.0, in_legend=False))
        if fastest >= 0:
            lines.append(Line(f"fastest: {h.nodes[fastest]}", t, h.node_tokens_per_s[:, fastest], "s2", 2.0))
            lines.append(Line(f"slowest: {h.nodes[slowest]}", t, h.node_tokens_per_s[:, slowest], "s1", 2.0))
        extra = [("each other node", "muted", "line")]
        caption = "Per-node tokens/s over time"
    else:
        q = h.node_rate_quantiles((0.0, 0.1, 0.5, 0.9, 1.0))
        for k, (label, css) in enumerate(
            (
                ("min node", "s1"),
                ("p10", "muted"),
                ("median node", "s0"),
                ("p90", "muted"),
                ("max node", "s2"),
            )
        ):
            lines.append(Line(label, t, q[k], css, 2.0 if css != "muted" else 1.2, dashed=css == "muted"))
        extra = []
        caption = f"Per-node tokens/s over time ({len(h.nodes)} nodes as quantiles)"
    per_node = line_chart(
        "Per-node tokens/s over time", Frame(TIME_AXIS, "tokens/s per node", extra_legend=extra), lines
    )
    width = f"Each point is the mean over {h.point_width_s:g} s of run time."
    return section(
        "throughput",
        "Throughput over time",
        figure("throughput-aggregate", "Rack aggregate tokens/s", aggregate, width),
        figure("throughput-nodes", caption, per_node),
    )


def spread_section(run: RunData) -> str:
    s = run.summary
    names = [n.name for n in s.nodes]
    tokens = np.array([n.tokens_per_s for n in s.nodes], dtype=np.float64)
    ok = np.isfinite(tokens) & (tokens > 0)
    delta = -below_median_pct(tokens, ok)
    states = run.snapshot.nodes.state if run.snapshot else ("",) * len(names)
    css, titles = [], []
    for i, name in enumerate(names):
        bad = s.nodes[i].valid is False or states[i] == "down"
        css.append("fbad" if bad else ("f0" if delta[i] >= 0 else "f4"))
        flag = " (INVALID)" if s.nodes[i].valid is False else (" (down)" if states[i] == "down" else "")
        titles.append(f"{name}{flag}: {group(tokens[i], 1)} tok/s, {delta[i]:+.2f} % vs the median node")
    chart = bar_chart(
        "Node spread: each node's measured tokens/s against the median node",
        Frame(
            "node",
            "% vs the median node",
            y_fmt=lambda v: f"{v:+g} %",
            extra_legend=[("below the median", "f4", "box"), ("down or invalid", "fbad", "box")],
        ),
        names,
        [BarGroup("at or above the median", delta, "f0", titles)],
        [RefLine(0.0, f"median node: {group(s.spread.median, 1)} tok/s")],
        bar_css=css,
    )
    caption = (
        f"Node spread: {s.spread.spread_pct:.1f} % between the fastest ({group(s.spread.max, 1)}) and the "
        f"slowest node ({group(s.spread.min, 1)} tok/s)"
        if s.spread.nodes
        else "Node spread"
    )
    return section(
        "spread",
        "Node spread",
        figure("node-spread", caption, chart, "Each node's generated tokens / its own measured duration."),
    )


def gpu_section(run: RunData) -> str:
    h = run.history
    if h is None or not len(h.gpu_times) or not np.isfinite(h.gpu_values).any():
        return unavailable("gpus", "GPU telemetry over time", "No GPU telemetry in this run.")
    x_range = (float(h.gpu_times[0]) / 60.0, float(h.gpu_times[-1]) / 60.0)
    per_gpu = len(h.nodes) * h.gpus_per_node <= MAX_HEATMAP_GPU_ROWS
    if per_gpu:
        labels = [name if g == 0 else "" for name in h.nodes for g in range(h.gpus_per_node)]
    else:
        labels = list(h.nodes)
    figures = []
    specs = (
        ("power_w", "GPU power", "W", 1.0),
        ("sm_clock_mhz", "GPU SM clock", "MHz", 1.0),
        ("temp_c", "GPU temperature", "°C", 1.0),
    )
    for metric, title, unit, _ in specs:
        values = h.gpu_rows(metric) if per_gpu else h.node_gpu_mean(metric)
        vmin, vmax = finite_range(values)
        if math.isnan(vmin):
            continue
        if metric == "power_w" and run.efficiency.tdp_w:
            vmin, vmax = 0.0, max(vmax, run.efficiency.tdp_w)
        chart = heatmap_chart(
            f"{title} heatmap over time",
            Frame(
                TIME_AXIS, "GPU (node, GPU 0..N)" if per_gpu else "node (mean of its GPUs)", x_fmt=_min_label
            ),
            values,
            x_range,
            labels,
            f"{title.split()[-1].lower()} ({unit})",
            vmin,
            vmax,
        )
        rows = "one row per GPU, grouped by node" if per_gpu else "one row per node (mean of its GPUs)"
        figures.append(
            figure(f"heatmap-{metric}", f"{title} ({unit}) over time", chart, f"{rows}; grey = not reported.")
        )
    return section("gpus", "GPU telemetry over time", *figures)


def power_section(run: RunData) -> str:
    e = run.efficiency
    rows = [
        ("Aggregate throughput", f"{group(e.tokens_per_s, 1)} tokens/s"),
        ("Measured tokens/s per W (tokens ÷ energy)", group(e.measured_tokens_per_s_per_w, 2)),
        ("Mean rack power (measured)", _kw(e.mean_power_w)),
        ("Mean power per GPU (measured)", _w(e.mean_power_per_gpu_w)),
        ("GPU TDP", f"{_w(e.tdp_w)} ({e.tdp_source})"),
        (f"Rack TDP ({e.gpus if e.gpus is not None else '?'} GPUs x TDP)", _kw(e.rack_tdp_w)),
        ("TDP-based tokens/s per W (published method)", group(e.tdp_tokens_per_s_per_w, 2)),
    ]
    parts = [
        table(["Power and efficiency", "value"], rows, table_id="efficiency-table"),
        note(
            "The published generational table divides the rack's tokens/s by GPUs x TDP (the rated "
            "envelope); the measured figure divides generated tokens by the energy the GPUs reported"
            + _energy_words(run.summary.energy_source)
        ),
    ]
    h = run.history
    if h is not None and h.points >= 2 and np.isfinite(h.rack_power_w).any():
        t = minutes(h.times)
        refs = [RefLine(e.rack_tdp_w / 1000.0, f"GPUs x TDP: {_kw(e.rack_tdp_w)}")] if e.rack_tdp_w else []
        power = line_chart(
            "Rack GPU power over time",
            Frame(TIME_AXIS, "rack GPU power (kW)", x_fmt=_min_label),
            [Line("rack GPU power (kW)", t, h.rack_power_w / 1000.0, "s3", 2.0)],
            refs,
        )
        eff = h.rack_tokens_per_s_per_w()
        eff_refs = []
        if e.measured_tokens_per_s_per_w:
            eff_refs.append(
                RefLine(e.measured_tokens_per_s_per_w, f"whole run: {e.measured_tokens_per_s_per_w:.2f}")
            )
        if e.tdp_tokens_per_s_per_w:
            eff_refs.append(
                RefLine(e.tdp_tokens_per_s_per_w, f"TDP-based: {e.tdp_tokens_per_s_per_w:.2f}", "s1")
            )
        efficiency_chart = line_chart(
            "Tokens/s per watt over time",
            Frame(TIME_AXIS, "tokens/s per W", x_fmt=_min_label),
            [Line("rack tokens/s ÷ rack GPU power", t, eff, "s2", 2.0)],
            eff_refs,
        )
        parts.append(figure("power-time", "Rack GPU power over time", power))
        parts.append(figure("efficiency-time", "Tokens/s per watt over time", efficiency_chart))
    return section("power", "Power and efficiency", *parts)


def latency_section(run: RunData) -> str:
    s = run.summary
    if not s.latency_ms:
        return unavailable(
            "latency",
            "Latency",
            f"No per-request latency in this run ({s.scenario}): TTFT, TPOT and end-to-end latency are "
            "measured in Server-style runs.",
        )
    stats = run.snapshot.latency if run.snapshot else {}
    # Result folders have no histograms: one result's mean and max are its LoadGen summary's own
    stated = s.nodes[0].latency_ms if run.snapshot is None and len(s.nodes) == 1 else {}
    rows = []
    for metric, pcts in s.latency_ms.items():
        st = stats.get(metric)  # type: ignore[call-overload]
        own = stated.get(metric, {})
        rows.append(
            [
                metric.upper(),
                latency_cell(pcts.get("p50"), s.latency_estimated),
                latency_cell(pcts.get("p90"), s.latency_estimated),
                latency_cell(pcts.get("p99"), s.latency_estimated),
                group(st.mean * 1000 if st else own.get("mean"), 1),
                group(st.max * 1000 if st else own.get("max"), 1),
                group(st.count) if st else "—",
            ]
        )
    parts = [
        table(
            ["Latency (ms)", "p50", "p90", "p99", "mean", "max", "requests"], rows, table_id="latency-table"
        )
    ]
    names = {"ttft": "Time to first token", "tpot": "Time per output token", "e2e": "End-to-end latency"}
    sla = run.snapshot.sla_s if run.snapshot else {}
    for metric, st in stats.items():
        if not st.count:
            continue
        edges, counts = coarse_bins(st.bucket_values_s, st.bucket_counts, LATENCY_BINS)
        markers = [
            RefLine(st.p50, f"p50 {seconds_ms(st.p50)}", "s0"),
            RefLine(st.p99, f"p99 {seconds_ms(st.p99)}", "s1"),
        ]
        if metric in sla:
            markers.append(RefLine(sla[metric], f"SLA {seconds_ms(sla[metric])}", "ref"))
        chart = histogram_chart(
            f"{names[metric]} histogram",
            Frame(f"{metric.upper()} (log scale)", "requests", x_fmt=seconds_label, y_fmt=si),
            edges,
            counts,
            markers,
            css="f0" if metric == "ttft" else ("f2" if metric == "tpot" else "f3"),
        )
        parts.append(figure(f"latency-{metric}", f"{names[metric]} ({metric.upper()}), rack-wide", chart))
    return section("latency", "Latency", *parts)


_SEVERITY_CSS = {"critical": "fbad", "warning": "f4", "info": "f2"}


def alerts_section(run: RunData) -> str:
    spans = run.alert_spans
    if run.snapshot is None:
        return unavailable("alerts", "Alerts", "No alerts: result folders hold no event stream.")
    if not spans:
        return section("alerts", "Alerts", note("No alerts during the run."))
    end = run.snapshot.t
    keys: dict[tuple[str | None, str], list[tuple[float, float, str, str]]] = {}
    for sp in spans:
        stop = sp.end if sp.end is not None else end
        title = (
            f"{sp.message} ({_clock(sp.start)}–{_clock(stop)})"
            if not sp.instant
            else f"{sp.message} ({_clock(sp.start)})"
        )
        keys.setdefault((sp.node, sp.kind), []).append(
            (sp.start / 60.0, stop / 60.0, _SEVERITY_CSS.get(sp.severity, "f4"), title)
        )
    rows = [TimelineRow(f"{node or 'rack'} · {kind}", items) for (node, kind), items in keys.items()]
    more = len(rows) - MAX_TIMELINE_ROWS
    chart = timeline_chart(
        "Alerts timeline",
        Frame(
            TIME_AXIS,
            "",
            x_fmt=_min_label,
            extra_legend=[
                ("critical", "fbad", "box"),
                ("warning", "f4", "box"),
                ("info / event", "f2", "box"),
            ],
        ),
        rows[:MAX_TIMELINE_ROWS],
        (0.0, end / 60.0),
    )
    log = list(run.snapshot.alerts)[::-1][:MAX_ALERT_TABLE_ROWS]
    table_rows = [[_clock(a.t), a.severity, a.node or "rack", a.kind, a.message] for a in log]
    parts = [
        figure(
            "alerts-timeline",
            "Alerts timeline",
            chart,
            f"{more} more rows not drawn."
            if more > 0
            else "Bars: how long a condition held; ticks: one-off events.",
        ),
        table(["time", "severity", "node", "kind", "message"], table_rows, table_id="alerts-table"),
    ]
    return section("alerts", "Alerts", *parts)


def _energy_words(source: str | None) -> str:
    """How the energy was measured (core/energy.py), for the power section's note."""
    return {
        "counter": ": their own cumulative energy counters.",
        "power": ": their power readings, integrated over the run (no energy counter in the source).",
        "mixed": ": energy counters where the GPUs had them, integrated power readings elsewhere.",
    }.get(source or "", ".")


def _clock(seconds: float) -> str:
    whole = int(seconds)
    return f"{whole // 60:02d}:{whole % 60:02d}"


def _kw(watts: float | None) -> str:
    return f"{watts / 1000:,.1f} kW" if watts is not None and math.isfinite(watts) else "—"


def _w(watts: float | None) -> str:
    return f"{watts:,.0f} W" if watts is not None and math.isfinite(watts) else "—"
