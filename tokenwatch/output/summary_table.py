"""The run summary as text, in the form of the published rack table."""

from __future__ import annotations

from tokenwatch.core.summary import RunSummary
from tokenwatch.durations import format_clock
from tokenwatch.formatting import group, printable


def render_summary(summary: RunSummary) -> str:
    s = summary.spread
    valid_nodes = [n for n in summary.nodes if n.valid is not False]
    head = (
        f"{printable(summary.name)} · {summary.scenario} · {len(summary.nodes)} nodes, {summary.gpus} GPUs"
        f" · {format_clock(summary.duration_s)}"
    )
    rows: list[tuple[str, str]] = [
        ("Total aggregate", group(summary.tokens_per_s, 1)),
        ("Max single-node", group(s.max, 1)),
        ("Min single-node", group(s.min, 1)),
        ("Average single-node", group(s.mean, 1)),
        ("Median single-node", group(s.median, 1)),
        ("Per GPU", group(summary.per_gpu_tokens_per_s, 1)),
        ("Node spread (max-min)/min", f"{s.spread_pct:.1f} %" if s.nodes else "—"),
    ]
    if summary.power_mean_w is not None:
        rows.append(("Mean power", f"{summary.power_mean_w / 1000:,.1f} kW"))
    if summary.tokens_per_joule is not None:
        rows.append(("Tokens per joule", f"{summary.tokens_per_joule:.2f}"))
    width = max(len(label) for label, _ in rows) + 2
    lines = [head, f"{'':{width}}{'tokens/s':>14}"]
    lines += [f"{label:<{width}}{value:>14}" for label, value in rows]
    if summary.latency_ms:
        lines.append("")
        lines.append(f"{'Latency (ms)':<{width}}{'p50':>10}{'p90':>10}{'p99':>10}")
        for metric, pcts in summary.latency_ms.items():
            cells = "".join(f"{group(pcts.get(k), 1):>10}" for k in ("p50", "p90", "p99"))
            lines.append(f"{metric.upper():<{width}}{cells}")
    if len(valid_nodes) != len(summary.nodes):
        bad = ", ".join(printable(n.name) for n in summary.nodes if n.valid is False)
        lines.append(f"Flagged node results (see the warnings): {bad}")
    for warning in summary.warnings:
        lines.append(f"warning: {printable(warning)}")
    return "\n".join(lines)
