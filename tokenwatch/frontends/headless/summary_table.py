"""The run summary as text, in the form of the published rack table."""

from __future__ import annotations

from tokenwatch.base.durations import format_clock
from tokenwatch.base.formatting import group, latency_cell, printable, verdict_word
from tokenwatch.core.summary import RunSummary, coverage_lines, rack_table_rows
from tokenwatch.core.verdict.view import check_cells


def _what(summary: RunSummary) -> str:
    """How many results over how many GPUs, and whether one LoadGen ran the whole system."""
    gpus = "GPUs unknown" if summary.gpus is None else f"{summary.gpus} GPUs"
    if summary.layout == "system":
        return f"system result: one LoadGen run for the whole system, {gpus}"
    if summary.layout == "per-node":
        return f"{len(summary.nodes)} per-node results (one LoadGen run each), {gpus}"
    return f"{len(summary.nodes)} nodes, {gpus}"


def latency_lines(summary: RunSummary, label_width: int, column: int = 10) -> list[str]:
    """The latency table: each column as wide as its widest figure and a space, at least ``column`` (an
    Offline run's end-to-end latencies reach 1,359,534.3 ms, wider than the usual 10)."""
    keys = ("p50", "p90", "p99")
    estimated = summary.latency_estimated
    cells = {m: [latency_cell(p.get(k), estimated) for k in keys] for m, p in summary.latency_ms.items()}
    width = max([column, *(len(cell) + 1 for row in cells.values() for cell in row)])
    lines = [f"{'Latency (ms)':<{label_width}}" + "".join(f"{k:>{width}}" for k in keys)]
    for metric, row in cells.items():
        lines.append(f"{metric.upper():<{label_width}}" + "".join(f"{cell:>{width}}" for cell in row))
    return lines


def verdict_lines(summary: RunSummary) -> list[str]:
    """The final verdict and its rules at their worst node, the cells the report's verdict table shows
    (the same values as ``summarize --json``'s checks); none for a summary with no verdict."""
    final = summary.verdict
    if final is None:
        return []
    what = f" ({final.benchmark}, {final.scenario})" if final.benchmark else ""
    head = f"Verdict: {verdict_word(final.valid)}{what}, judged by {final.judged_by}"
    # The nodes MLPerf's figure leaves out are named just above (coverage_lines), in the note's words.
    lines = [head + ("; the nodes left out above have no LoadGen result" if final.note else "")]
    rows = [check_cells(check) for check in final.checks]
    if not rows:  # no rule to read at a node (no node finished; a result folder): LoadGen's own lines
        return [*lines, "  " + " / ".join(printable(line.strip()) for line in final.lines)]
    widths = [max(len(row[i]) for row in rows) for i in range(6)]
    for mark, name, node, value, limit, margin in rows:
        lines.append(
            f"  {mark} {name:<{widths[1]}}  {value:>{widths[3]}}  limit {limit:>{widths[4]}}  "
            f"{margin:>{widths[5]}}" + (f"  {printable(node)}" if node else "")
        )
    return lines


def render_summary(summary: RunSummary) -> str:
    name, took = printable(summary.name), format_clock(summary.duration_s)
    head = f"{name} · {summary.scenario} · {_what(summary)} · {took}"
    rows = rack_table_rows(summary)
    width = max(len(label) for label, _ in rows) + 2
    lines = [summary.status] if summary.status else []
    lines += [head, f"{'':{width}}{summary.unit:>14}"]
    lines += [f"{label:<{width}}{value:>14}" for label, value in rows]
    lines += [printable(line) for line in coverage_lines(summary)]
    if summary.latency_ms:
        lines.append("")
        lines += latency_lines(summary, width)
    verdict = verdict_lines(summary)
    if verdict:
        lines.append("")
        lines += verdict
    flagged = [n.name for n in summary.nodes if n.valid is False]
    if flagged:
        lines.append(f"Flagged node results (see the warnings): {', '.join(printable(n) for n in flagged)}")
    for run in summary.apart:
        result = run.extra.get("result") or "no result"
        lines.append(
            f"Not in the aggregate: {printable(run.name)} ({run.extra.get('kind', 'other')} run, {result}, "
            f"{group(run.tokens_per_s, 1)} tokens/s)"
        )
    for warning in summary.warnings:
        lines.append(f"warning: {printable(warning)}")
    return "\n".join(lines)
