"""The run's result in the form of the published rack table, as the dashboard shows it once a run ends.

Every figure is the core's :class:`~tokenwatch.core.summary.RunSummary` (the same one ``summarize``
prints); this module only lays it out, says which nodes the figures cover, and lists the summary's
warnings.
"""

from __future__ import annotations

import textwrap

from rich.style import Style
from rich.text import Text

from tokenwatch.base.formatting import format_clock, latency_cell, printable
from tokenwatch.core.summary import RunSummary, coverage_lines, name_list, rack_table_rows
from tokenwatch.frontends.tui.palette import Palette

_LABEL = 27
_VALUE = 13
_LATENCY_TITLE = "Latency (ms)"


def summary_text(summary: RunSummary, pal: Palette, width: int, height: int | None = None) -> Text:
    """The published-table form: the rack figures, which nodes they cover, latency, flags, warnings.

    Within ``height`` lines every warning is shown: wrapped where there is room, else one line each cut in
    the middle, else as many as fit and ``+N more warnings`` (none is dropped without a word)."""
    text = Text(no_wrap=True, overflow="crop")
    head = f"{summary.scenario} · {len(summary.nodes)} nodes, {summary.gpus} GPUs"
    text.append(f"{head} · {format_clock(summary.duration_s)}\n", style=pal.muted)
    rows = rack_table_rows(summary)
    text.append(f"{'':{_LABEL}}{summary.unit:>{_VALUE}}\n", style=pal.muted)
    for label, value in rows:
        text.append(f"{label:<{_LABEL}}", style=pal.text)
        text.append(f"{value:>{_VALUE}}\n", style="bold")
    wrap = max(20, width)
    tail: list[
        list[tuple[str, Style | str]]
    ] = []  # lines of (text, style) after the table, before the warnings
    for line in coverage_lines(summary):
        tail += [[(part, pal.muted)] for part in textwrap.wrap(printable(line), wrap)]
    if summary.latency_ms:
        keys = ("p50", "p90", "p99")
        estimated = summary.latency_estimated
        figures = {
            m: [latency_cell(p.get(k), estimated) for k in keys] for m, p in summary.latency_ms.items()
        }
        # each column as wide as its widest figure and a space (1,359,534.3 ms ran into its neighbour)
        cw = max([9, *(len(cell) + 1 for row in figures.values() for cell in row)])
        title, lw = latency_label_column(width - len(keys) * cw)
        tail.append([(f"{title:<{lw}}" + "".join(f"{k:>{cw}}" for k in keys), pal.muted)])
        for metric, row in figures.items():
            cells = "".join(f"{cell:>{cw}}" for cell in row)
            tail.append([(f"{metric.upper():<{lw}}", pal.text), (cells, "bold")])
    flagged = [n for n in summary.nodes if n.valid is False]
    if flagged:
        tail.append([(f"Flagged: {printable(name_list([n.name for n in flagged], 8))}", pal.warn)])
    room = None if height is None else height - len(text.plain.splitlines()) - len(tail)
    if room is not None and room < 1 and summary.warnings:
        # the warnings (or their count) are never pushed off the panel: the lines above them give way
        tail = tail[: max(0, len(tail) - (1 - room))]
        room = 1
    for segments in tail:
        for part, style in segments:
            text.append(part, style=style)
        text.append("\n")
    for line in warning_lines([printable(w) for w in summary.warnings], wrap, room):
        text.append(line + "\n", style=pal.muted if line.startswith("+") else pal.warn)
    return text


def latency_label_column(room: int) -> tuple[str, int]:
    """The latency table's first column (its title, its width) in ``room`` columns left by the figures:
    the figures are never the ones cut (a p99 of ~918 ms read ~91 where the panel is 44 wide), the label
    column gives way first, down to a short title."""
    if room >= len(_LATENCY_TITLE) + 1:
        return _LATENCY_TITLE, min(room, _LABEL - 9)
    return "ms", max(room, len("TPOT"))  # each figure brings its own leading space


def warning_lines(warnings: list[str], width: int, room: int | None) -> list[str]:
    """The warnings as lines of ``width`` in ``room`` lines (None: as many as it takes)."""
    wrapped = [line for w in warnings for line in textwrap.wrap(f"▲ {w}", width)]
    if room is None or len(wrapped) <= room:
        return wrapped
    # A warning says what first (``node05 did not finish (stale since 02:59 ...``): its start is kept.
    if len(warnings) <= room:
        return [textwrap.shorten(f"▲ {w}", width, placeholder="…") for w in warnings]
    shown = max(0, room - 1)
    more = len(warnings) - shown
    lines = [textwrap.shorten(f"▲ {w}", width, placeholder="…") for w in warnings[:shown]]
    return [*lines, f"+{more} more warning{'s' if more > 1 else ''}: all in the summary printed on quitting"]
