"""The single-run report: the published rack analysis of one run, as one self-contained HTML file."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from tokenwatch.base.durations import format_clock
from tokenwatch.base.formatting import group
from tokenwatch.core.capacity import DEFAULT_WORKLOADS, Workload, capacity
from tokenwatch.core.node_outcome import covers_line
from tokenwatch.core.summary import RunSummary, coverage_lines, rack_table_rows
from tokenwatch.frontends.report.baseline_section import baseline_section
from tokenwatch.frontends.report.cause_section import cause_section
from tokenwatch.frontends.report.page import cards, note, page, section, table, warning_box
from tokenwatch.frontends.report.run_sections import (
    alerts_section,
    gpu_section,
    latency_section,
    power_section,
    spread_section,
    throughput_section,
)
from tokenwatch.frontends.report.verdict_section import verdict_section
from tokenwatch.runs.run_data import RunData

if TYPE_CHECKING:
    from tokenwatch.core.baseline import Baseline
    from tokenwatch.core.baseline.compare import BaselineComparison

MAX_WARNINGS_SHOWN = 20


def summary_rows(s: RunSummary) -> list[list[str]]:
    """The published rack summary table (in the summary's unit: tokens/s, or samples/s for results
    that state no tokens), the rows every surface prints."""
    return [[label, value] for label, value in rack_table_rows(s)[:7]]


def subtitle(run: RunData) -> str:
    s = run.summary
    gpus = "GPUs unknown" if s.gpus is None else f"{s.gpus} GPUs"
    parts = [s.scenario, f"{len(s.nodes)} nodes, {gpus}", format_clock(s.duration_s)]
    if run.provenance.start_time:
        parts.append(f"started {run.provenance.start_time}")
    return " · ".join(parts)


def headline_cards(run: RunData) -> str:
    s, e = run.summary, run.efficiency
    items = [
        (f"aggregate {s.unit}", group(s.aggregate, 2 if s.figure == "samples" else 0)),
        (f"per GPU {s.unit}", group(s.per_gpu, 2 if s.figure == "samples" else 0)),
        ("node spread", f"{s.spread.spread_pct:.1f} %" if s.spread.nodes else "—"),
        ("tokens/s per W (measured)", _fmt(e.measured_tokens_per_s_per_w, 2)),
        ("tokens/s per W (GPUs x TDP)", _fmt(e.tdp_tokens_per_s_per_w, 2)),
    ]
    if s.latency_ms.get("ttft"):
        items.append(("TTFT p99", f"{group(s.latency_ms['ttft'].get('p99'))} ms"))
    partial = partial_run_flag(s)
    return cards(items, {"aggregate tokens/s": partial} if partial else None)


def partial_run_flag(s: RunSummary) -> str:
    """What a partial run's aggregate covers, under its headline figure (``17 of 18 nodes finished in
    this run (node07 down from 30:00, 37 % of its samples)``; a run cut short, its status); empty for a
    whole run."""
    stopped = covers_line([(n.name, n.outcome) for n in s.nodes], None, "finished")
    return "; ".join(part for part in (s.status, stopped) if part)


def summary_section(run: RunData) -> str:
    s = run.summary
    snap = run.snapshot
    rows = summary_rows(s)
    parts = [table(["Rack summary", s.unit], rows, row_classes=["key"], table_id="summary-table")]
    node_rows, cell_css = [], []
    for i, node in enumerate(s.nodes):
        own = s.node_figure(node)
        delta = (own - s.spread.median) / s.spread.median * 100 if s.spread.nodes else math.nan
        state = snap.nodes.state[i] if snap is not None else ("INVALID" if node.valid is False else "")
        node_rows.append(
            [
                node.name,
                "?" if node.gpus is None else str(node.gpus),
                group(node.tokens_per_s, 1),
                group(node.samples_per_s, 2),
                f"{delta:+.2f} %" if math.isfinite(delta) else "—",
                state,
            ]
        )
        cell_css.append(["", "", "", "", "", "bad" if state in ("down", "INVALID", "stale") else ""])
    parts.append(
        table(
            ["node", "GPUs", "tokens/s", "samples/s", "vs median", "state at end"],
            node_rows,
            cell_classes=cell_css,
            table_id="nodes-table",
        )
    )
    parts.append(
        note(
            "A node's tokens/s is its generated tokens divided by its own measured duration; the "
            "aggregate is the sum over nodes, as the published rack figure is."
        )
    )
    parts.append(f'<div id="covers">{"".join(note(line) for line in coverage_lines(s))}</div>')
    return section("summary", "Rack summary", *parts)


def capacity_section(run: RunData, workloads: Sequence[Workload]) -> str:
    s = run.summary
    rows = [
        [
            r.workload.name,
            group(r.workload.tokens),
            group(r.interactions_per_s, 1),
            group(r.interactions_per_s_per_gpu, 2),
            group(r.interactions_per_hour),
        ]
        for r in capacity(s.tokens_per_s, s.gpus or 0, workloads)
    ]
    return section(
        "capacity",
        "Capacity",
        table(
            ["Workload", "tokens per interaction", "interactions/s (rack)", "per GPU", "per hour"],
            rows,
            table_id="capacity-table",
        ),
        note(
            f"At the measured aggregate of {group(s.tokens_per_s)} generated tokens/s. Profiles are "
            "configurable: tokenwatch report RUN --workload 'NAME=TOKENS' (repeatable)."
        ),
    )


def provenance_section(run: RunData) -> str:
    p = run.provenance
    items = [
        ("report by", f"tokenwatch {p.report_version}"),
        ("source", f"{p.kind}: {p.path}"),
        ("sha256", p.sha256),
        ("size", f"{p.size_bytes:,} bytes"),
    ]
    if p.recorded_with:
        items.append(("recorded with", f"tokenwatch {p.recorded_with}"))
    if p.created:
        items.append(("recording created", p.created))
    items.append(("start time (t = 0)", p.start_time or "unknown"))
    items.append(("hosts", ", ".join(p.hosts)))
    items += [(str(k), _config_value(v)) for k, v in p.config.items()]
    body = "".join(f"<dt>{_esc(k)}</dt><dd>{_esc(v)}</dd>" for k, v in items)
    return section("provenance", "Provenance", f'<dl class="prov" id="provenance-list">{body}</dl>')


def render_run_report(
    run: RunData,
    workloads: Sequence[Workload] = DEFAULT_WORKLOADS,
    baseline: tuple[Baseline, BaselineComparison] | None = None,
) -> str:
    """``baseline``: the reference (``--baseline``) and the run's comparison with it: a section after the
    summary, and its line on the throughput chart."""
    # The summary's warnings (a node that did not finish, a run cut short) and the reader's, once each.
    said = list(dict.fromkeys((*run.summary.warnings, *run.warnings)))
    warnings = [warning_box(w) for w in said[:MAX_WARNINGS_SHOWN]]
    if len(said) > MAX_WARNINGS_SHOWN:
        warnings.append(warning_box(f"... and {len(said) - MAX_WARNINGS_SHOWN} more warnings"))
    body = [
        *warnings,
        headline_cards(run),
        summary_section(run),
        *([baseline_section(baseline[1])] if baseline is not None else []),
        verdict_section(run),
        throughput_section(run, baseline[0] if baseline is not None else None),
        spread_section(run),
        gpu_section(run),
        power_section(run),
        latency_section(run),
        cause_section(run),
        alerts_section(run),
        capacity_section(run, workloads),
        provenance_section(run),
    ]
    return page(f"{run.label} — run report", subtitle(run), body)


def _fmt(value: float | None, decimals: int) -> str:
    return f"{value:,.{decimals}f}" if value is not None and math.isfinite(value) else "—"


def _config_value(value: object) -> str:
    if isinstance(value, list | tuple):
        return ", ".join(map(str, value)) or "none"
    return "—" if value is None else str(value)


def _esc(value: object) -> str:
    from tokenwatch.frontends.report.svg import esc

    return esc(value)
