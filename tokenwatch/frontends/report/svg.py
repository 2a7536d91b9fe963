"""SVG building blocks for the report's charts: escaping, nice axis ticks, number labels, paths.

Charts are plain inline SVG generated here, so a report is one file with no script or font to fetch.
Colours are never written into the SVG: elements carry classes (``s0``, ``f1``, ``grid``...) that
the page's CSS maps to theme variables, which is what makes every chart follow light and dark.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence

import numpy as np

from tokenwatch.base.events import FloatArray
from tokenwatch.base.formatting import printable


def esc(text: object) -> str:
    """Text for HTML: markup escaped, and control characters too (names and messages come from
    recordings; an ESC in the file would drive a terminal that prints it)."""
    return html.escape(printable(str(text)), quote=True)


def nice_step(span: float, target: int) -> float:
    """A 1-2-5 step that splits ``span`` into about ``target`` intervals."""
    if not math.isfinite(span) or span <= 0:
        return 1.0
    raw = span / max(1, target)
    magnitude = 10.0 ** math.floor(math.log10(raw))
    for m in (1.0, 2.0, 2.5, 5.0, 10.0):
        if raw <= m * magnitude:
            return m * magnitude
    return 10.0 * magnitude


def nice_range(lo: float, hi: float, target: int = 5) -> tuple[float, float, list[float]]:
    """(axis low, axis high, ticks) covering [lo, hi] with round numbers."""
    if not (math.isfinite(lo) and math.isfinite(hi)):
        lo, hi = 0.0, 1.0
    if hi <= lo:
        pad = abs(hi) * 0.1 or 1.0
        lo, hi = lo - pad, hi + pad
    step = nice_step(hi - lo, target)
    first = math.floor(lo / step + 1e-9) * step
    last = math.ceil(hi / step - 1e-9) * step
    count = round((last - first) / step)
    return first, last, [first + i * step for i in range(count + 1)]


def tight_range(lo: float, hi: float, target: int = 8) -> tuple[float, float, list[float]]:
    """(lo, hi, round ticks inside [lo, hi]): for time axes, which should end where the data ends."""
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi <= lo:
        return nice_range(lo, hi, target)
    step = nice_step(hi - lo, target)
    first = math.ceil(lo / step - 1e-9) * step
    count = math.floor((hi - first) / step + 1e-9)
    return lo, hi, [first + i * step for i in range(count + 1)]


def log_ticks(lo: float, hi: float) -> list[float]:
    """1-2-5 ticks per decade inside [lo, hi] (both > 0); only decades when the range is wide."""
    if lo <= 0 or hi <= lo:
        return []
    decades = range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1)
    mantissas = (1, 2, 5) if math.log10(hi / lo) <= 4 else (1,)
    return [m * 10.0**d for d in decades for m in mantissas if lo <= m * 10.0**d <= hi]


def polyline_path(xs: FloatArray, ys: FloatArray) -> str:
    """An SVG path through the finite points; a NaN breaks the line (a gap, not a drop to zero)."""
    ok = np.isfinite(xs) & np.isfinite(ys)
    parts: list[str] = []
    pen_down = False
    for x, y, good in zip(xs.tolist(), ys.tolist(), ok.tolist(), strict=True):
        if not good:
            pen_down = False
            continue
        parts.append(f"{'L' if pen_down else 'M'}{x:.1f} {y:.1f}")
        pen_down = True
    return "".join(parts)


class Scale:
    """Linear (or log10) map from data to pixels."""

    def __init__(self, lo: float, hi: float, px_lo: float, px_hi: float, log: bool = False) -> None:
        self.log = log
        self.lo, self.hi = (math.log10(lo), math.log10(hi)) if log else (lo, hi)
        self.px_lo, self.px_hi = px_lo, px_hi

    def __call__(self, value: float) -> float:
        v = math.log10(value) if self.log else value
        span = self.hi - self.lo or 1.0
        return self.px_lo + (v - self.lo) / span * (self.px_hi - self.px_lo)

    def array(self, values: FloatArray) -> FloatArray:
        v = np.asarray(values, dtype=np.float64)
        if self.log:
            with np.errstate(invalid="ignore", divide="ignore"):
                v = np.where(v > 0, np.log10(np.where(v > 0, v, 1.0)), np.nan)
        span = self.hi - self.lo or 1.0
        return self.px_lo + (v - self.lo) / span * (self.px_hi - self.px_lo)


def legend(items: Sequence[tuple[str, str, str]], x: float, y: float, max_x: float) -> str:
    """Swatches left to right, wrapping. items: (label, css class, kind 'line'|'box'|'dash')."""
    out = ['<g class="legend">']
    cx, cy = x, y
    for label, css, kind in items:
        width = 26 + 7.0 * len(label)
        if cx + width > max_x and cx > x:
            cx, cy = x, cy + 16
        if kind == "box":
            out.append(f'<rect class="{css}" x="{cx:.1f}" y="{cy - 9:.1f}" width="12" height="10"/>')
        else:
            dash = ' stroke-dasharray="5 3"' if kind == "dash" else ""
            out.append(
                f'<line class="{css}" x1="{cx:.1f}" y1="{cy - 4:.1f}" x2="{cx + 16:.1f}" y2="{cy - 4:.1f}"'
                f' stroke-width="2.5"{dash}/>'
            )
        out.append(f'<text x="{cx + 20:.1f}" y="{cy:.1f}">{esc(label)}</text>')
        cx += width
    out.append("</g>")
    return "".join(out)


def svg_open(width: int, height: int, label: str) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="{esc(label)}" class="chart-svg" preserveAspectRatio="xMidYMid meet">'
    )
