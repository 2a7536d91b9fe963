"""Character-cell drawing shared by the panels: sparklines, column charts, bars and figures for people.

Pure functions of numbers already computed by the core: they pick which points land in which cell and
how tall a cell is, nothing more.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from tokenwatch.base.events import FloatArray

SPARK = "▁▂▃▄▅▆▇█"
EIGHTHS = " ▁▂▃▄▅▆▇█"
H_EIGHTHS = " ▏▎▍▌▋▊▉█"
# A horizontal line at the bottom, the middle and the top of its cell (the block elements the bars use, and
# the box-drawing line: glyphs every terminal font with the bars has), and where each one sits (0..1).
LINE_GLYPHS = "▁─▔"
LINE_HEIGHTS = (1 / 16, 1 / 2, 15 / 16)


def sparkline(values: Sequence[float] | FloatArray, lo: float, hi: float, width: int) -> str:
    """The newest ``width`` values as one row of ▁..█ between ``lo`` and ``hi``; gaps for NaN."""
    tail = np.asarray(values, dtype=np.float64)[-width:] if width > 0 else np.zeros(0)
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return " " * width
    span = hi - lo if hi > lo else 1.0
    out = []
    for v in tail:
        if not math.isfinite(v):
            out.append(" ")
            continue
        level = int((v - lo) / span * (len(SPARK) - 1) + 0.5)
        out.append(SPARK[min(len(SPARK) - 1, max(0, level))])
    return ("".join(out)).rjust(width)


def pick_columns(times: FloatArray, values: FloatArray, t0: float, t1: float, width: int) -> FloatArray:
    """One value per character column spanning run time [t0, t1]: the newest point inside each column.

    Columns after the newest point (the future of a running run) are NaN.
    """
    out = np.full(width, np.nan)
    if width <= 0 or len(times) == 0 or not t1 > t0:
        return out
    ok = np.isfinite(values) & np.isfinite(times)
    times, values = times[ok], values[ok]
    if len(times) == 0:
        return out
    col = np.clip(((times - t0) / (t1 - t0) * width).astype(np.int64), 0, width - 1)
    out[col] = values  # later points overwrite earlier ones in the same column
    # Carry a value over columns the downsampled series skipped (wide screens, short runs).
    last = math.nan
    newest = int(col.max())
    for c in range(newest + 1):
        if math.isfinite(out[c]):
            last = out[c]
        else:
            out[c] = last
    return out


def column_rows(columns: FloatArray, lo: float, hi: float, height: int) -> list[str]:
    """A ``height``-row column chart (eighth-block resolution) of ``columns``, top row first."""
    if height <= 0:
        return []
    span = hi - lo if hi > lo else 1.0
    levels = np.where(
        np.isfinite(columns), np.clip((columns - lo) / span, 0.0, 1.0) * height * 8, -1.0
    ).round()
    rows = []
    for r in range(height - 1, -1, -1):
        line = []
        for level in levels:
            if level < 0:
                line.append(" ")
            else:
                fill = int(min(8, max(0, level - r * 8)))
                line.append(EIGHTHS[fill] if fill else " ")
        rows.append("".join(line))
    return rows


def line_cells(values: FloatArray, lo: float, hi: float, height: int) -> tuple[np.ndarray, list[str]]:
    """A line over a ``height``-row column chart: per column its row (0 the top row, -1 none) and its glyph.

    Placed at the bars' precision (eighths of a row) and drawn with the glyph whose line sits nearest that
    height in its cell, so a line 0.4 % above a bar sits on the bar's top rather than a row above it."""
    span = hi - lo if hi > lo else 1.0
    ok = np.isfinite(values)
    level = np.where(ok, np.clip((values - lo) / span, 0.0, 1.0) * height * 8, 0.0).round()
    from_bottom = np.minimum(height - 1, level // 8)
    within = (level - from_bottom * 8) / 8.0  # 0 the cell's bottom .. 1 its top
    pick = np.abs(within[:, None] - np.asarray(LINE_HEIGHTS)[None, :]).argmin(axis=1)
    rows = np.where(ok, height - 1 - from_bottom, -1).astype(np.int64)
    return rows, [LINE_GLYPHS[k] if good else " " for k, good in zip(pick.tolist(), ok.tolist(), strict=True)]


def hbar(fraction: float, width: int) -> str:
    """A horizontal bar ``width`` cells long filled to ``fraction`` (eighth-cell resolution)."""
    if width <= 0:
        return ""
    if not math.isfinite(fraction):
        return " " * width
    eighths = round(min(1.0, max(0.0, fraction)) * width * 8)
    full, part = divmod(eighths, 8)
    return ("█" * full + (H_EIGHTHS[part] if part else "")).ljust(width)[:width]


def hbar_left(fraction: float, width: int) -> str:
    """Like :func:`hbar` but growing leftwards from the right edge (half-cell resolution: Unicode has
    no right-aligned eighths)."""
    if width <= 0:
        return ""
    if not math.isfinite(fraction):
        return " " * width
    halves = round(min(1.0, max(0.0, fraction)) * width * 2)
    full, part = divmod(halves, 2)
    return ("▐" * part + "█" * full).rjust(width)[-width:]


def log_ticks(lo: float, hi: float) -> list[tuple[float, bool]]:
    """Ticks of a log axis from ``lo`` to ``hi`` (both > 0): ``(value, major)``, every decade major and
    the 2s and 5s between minor, in increasing order."""
    if not (math.isfinite(lo) and math.isfinite(hi) and 0 < lo < hi):
        return []
    ticks = []
    for exponent in range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1):
        for mantissa in (1, 2, 5):
            value = mantissa * 10.0**exponent
            if lo <= value <= hi:
                ticks.append((value, mantissa == 1))
    return ticks


def line_over_bars(
    row: str, on_line: Sequence[bool] | np.ndarray, glyphs: Sequence[str] | None = None
) -> list[tuple[str, int]]:
    """A chart row with a second series drawn as a line through the cells ``on_line``, as pieces to style:
    kind 0 the row as it is, 1 the line over an empty or partly filled cell, 2 the line across a full bar
    cell (to draw on the bar's colour). ``glyphs``: the line's character per cell (``─`` everywhere when
    not given; see :func:`line_cells`). Consecutive cells of one kind are one piece."""
    kinds = [0 if not on_line[c] else 2 if ch == "█" else 1 for c, ch in enumerate(row)]
    cells = [row[c] if kinds[c] == 0 else glyphs[c] if glyphs is not None else "─" for c in range(len(row))]
    pieces: list[tuple[str, int]] = []
    start = 0
    for c in range(1, len(row) + 1):
        if c < len(row) and kinds[c] == kinds[start]:
            continue
        pieces.append(("".join(cells[start:c]), kinds[start]))
        start = c
    return pieces
