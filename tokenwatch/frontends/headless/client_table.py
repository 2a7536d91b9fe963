"""Client-side benchmark results beside the server's figures, as text (``summarize`` prints it)."""

from __future__ import annotations

import math

from tokenwatch.base.formatting import DASH, group, printable
from tokenwatch.runs.client_side import COMPARED, ROWS, Column, SideBySide

_DECIMALS = {
    "duration_s": 1,
    "output_tokens_per_s": 1,
    "requests_per_s": 2,
    "output_tokens": 0,
    "requests": 0,
}


def _cell(key: str, value: float | None) -> str:
    if value is None or not math.isfinite(value):
        return DASH
    return group(value, _DECIMALS.get(key, 1))


def _with_difference(table: SideBySide, column: Column, key: str) -> str:
    cell = _cell(key, column.figures.get(key))
    difference = table.difference_pct(column, key) if key in COMPARED else math.nan
    return f"{cell} ({difference:+.1f} %)" if math.isfinite(difference) else cell


def render_side_by_side(table: SideBySide) -> str:
    """One row per figure, one column per side; a rate's difference from the server's in brackets."""
    columns = ([table.server] if table.server is not None else []) + list(table.clients)
    headings = [printable(c.heading) for c in columns]
    cells = [
        [
            _with_difference(table, column, key)
            if column is not table.server
            else _cell(key, column.figures.get(key))
            for column in columns
        ]
        for key, _ in ROWS
    ]
    shown = [(label, row) for (_, label), row in zip(ROWS, cells, strict=True) if any(c != DASH for c in row)]
    label_width = max(len(label) for label, _ in shown) + 2 if shown else 0
    widths = [max(len(h), *(len(row[i]) for _, row in shown)) + 2 for i, h in enumerate(headings)]
    title = (
        "Client-side benchmarks beside the server's own figures (each over its own window)"
        if table.server is not None
        else "Client-side benchmark results"
    )
    lines = [title, " " * label_width + "".join(h.rjust(w) for h, w in zip(headings, widths, strict=True))]
    lines += [
        label.ljust(label_width) + "".join(c.rjust(w) for c, w in zip(row, widths, strict=True))
        for label, row in shown
    ]
    for number, column in enumerate(columns, start=1):
        lines.append(f"  {number}. {printable(column.heading)}: {printable(column.source)}")
    for result in table.results:
        if result.intervals:
            rates = [i.output_tokens_per_s for i in result.intervals if math.isfinite(i.output_tokens_per_s)]
            span = f", output tokens/s {group(min(rates), 1)} to {group(max(rates), 1)}" if rates else ""
            lines.append(f"  {printable(result.tool)}: {len(result.intervals)} intervals{span}")
        for note in result.notes:
            lines.append(f"note: {printable(note)}")
    return "\n".join(lines)
