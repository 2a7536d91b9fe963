"""The report's chart types as inline SVG: line, bar, histogram (log x), heatmap and timeline.

Every chart has axes with units, tick labels and a legend; numbers arrive computed by the core
(these functions only place them). Sizes are in SVG user units; the page scales the SVG to its width.
"""

from __future__ import annotations

import dataclasses
import math
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from tokenwatch.base.events import FloatArray
from tokenwatch.base.formatting import si
from tokenwatch.core.nan_math import finite_range
from tokenwatch.frontends.report.png import heatmap_data_uri, viridis_stops
from tokenwatch.frontends.report.svg import (
    Scale,
    esc,
    legend,
    log_ticks,
    nice_range,
    polyline_path,
    svg_open,
    tight_range,
)

WIDTH = 900
MARGIN_LEFT, MARGIN_RIGHT, MARGIN_TOP, MARGIN_BOTTOM = 72, 24, 40, 48
Formatter = Callable[[float], str]


@dataclass(frozen=True)
class Line:
    label: str
    x: FloatArray
    y: FloatArray
    css: str  # s0..s7, muted
    width: float = 2.0
    dashed: bool = False
    in_legend: bool = True


@dataclass(frozen=True)
class RefLine:
    """A horizontal (or, in histograms, vertical) reference line with its label."""

    value: float
    label: str
    css: str = "ref"


@dataclass(frozen=True)
class Frame:
    x_label: str
    y_label: str
    height: int = 300
    x_fmt: Formatter = si
    y_fmt: Formatter = si
    extra_legend: Sequence[tuple[str, str, str]] = field(default_factory=tuple)
    margin_bottom: int = MARGIN_BOTTOM
    rotate_x_labels: bool = False


def _axes(frame: Frame, xs: Scale, ys: Scale, x_ticks: Sequence[float], y_ticks: Sequence[float]) -> str:
    left, right = MARGIN_LEFT, WIDTH - MARGIN_RIGHT
    top, bottom = MARGIN_TOP, frame.height - frame.margin_bottom
    out = ['<g class="grid">']
    out += [f'<line x1="{left}" x2="{right}" y1="{ys(v):.1f}" y2="{ys(v):.1f}"/>' for v in y_ticks]
    out.append('</g><g class="axis">')
    out.append(f'<line x1="{left}" x2="{right}" y1="{bottom}" y2="{bottom}"/>')
    out.append(f'<line x1="{left}" x2="{left}" y1="{top}" y2="{bottom}"/>')
    for v in x_ticks:
        x = xs(v)
        out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{bottom}" y2="{bottom + 5}"/>')
        text = esc(frame.x_fmt(v))
        if frame.rotate_x_labels:
            out.append(
                f'<text transform="translate({x + 4:.1f} {bottom + 12}) rotate(-40)" '
                f'text-anchor="end">{text}</text>'
            )
        else:
            out.append(f'<text x="{x:.1f}" y="{bottom + 18}" text-anchor="middle">{text}</text>')
    for v in y_ticks:
        y = ys(v)
        out.append(f'<text x="{left - 8}" y="{y + 4:.1f}" text-anchor="end">{esc(frame.y_fmt(v))}</text>')
    out.append(
        f'<text class="axis-label" x="{(left + right) / 2:.0f}" y="{frame.height - 8}" '
        f'text-anchor="middle">{esc(frame.x_label)}</text>'
    )
    out.append(
        f'<text class="axis-label" transform="translate(16 {(top + bottom) / 2:.0f}) rotate(-90)" '
        f'text-anchor="middle">{esc(frame.y_label)}</text>'
    )
    out.append("</g>")
    return "".join(out)


def line_chart(
    label: str,
    frame: Frame,
    lines: Sequence[Line],
    refs: Sequence[RefLine] = (),
    y_from_zero: bool = True,
) -> str:
    """Lines over a shared x axis; ``refs`` are horizontal reference lines (e.g. the GPUs x TDP envelope)."""
    x_lo, x_hi = finite_range(*[ln.x for ln in lines])
    y_lo, y_hi = finite_range(*[ln.y for ln in lines], np.array([r.value for r in refs], np.float64))
    if y_from_zero:
        y_lo = min(0.0, y_lo) if math.isfinite(y_lo) else 0.0
    x0, x1, x_ticks = tight_range(x_lo, x_hi, 8)
    y0, y1, y_ticks = nice_range(y_lo, y_hi * 1.05 if y_hi > 0 else y_hi, 5)
    bottom = frame.height - MARGIN_BOTTOM
    xs = Scale(x0, x1, MARGIN_LEFT, WIDTH - MARGIN_RIGHT)
    ys = Scale(y0, y1, bottom, MARGIN_TOP)
    out = [svg_open(WIDTH, frame.height, label), _axes(frame, xs, ys, x_ticks, y_ticks)]
    out.append('<g class="lines">')
    for ln in lines:
        dash = ' stroke-dasharray="6 4"' if ln.dashed else ""
        path = polyline_path(xs.array(ln.x), ys.array(ln.y))
        out.append(
            f'<path class="{ln.css}" d="{path}" fill="none" stroke-width="{ln.width}"{dash}>'
            f"<title>{esc(ln.label)}</title></path>"
        )
    for ref in refs:
        if math.isfinite(ref.value):
            y = ys(ref.value)
            out.append(
                f'<line class="{ref.css}" x1="{MARGIN_LEFT}" x2="{WIDTH - MARGIN_RIGHT}" y1="{y:.1f}" '
                f'y2="{y:.1f}" stroke-dasharray="5 3"><title>{esc(ref.label)}</title></line>'
            )
    out.append("</g>")
    items = [(ln.label, ln.css, "dash" if ln.dashed else "line") for ln in lines if ln.in_legend]
    items += [(r.label, r.css, "dash") for r in refs if math.isfinite(r.value)]
    out.append(legend([*items, *frame.extra_legend], MARGIN_LEFT, 18, WIDTH - MARGIN_RIGHT))
    out.append("</svg>")
    return "".join(out)


@dataclass(frozen=True)
class BarGroup:
    label: str
    values: FloatArray
    css: str  # f0..f7
    titles: Sequence[str] = ()


def bar_chart(
    label: str,
    frame: Frame,
    categories: Sequence[str],
    groups: Sequence[BarGroup],
    refs: Sequence[RefLine] = (),
    bar_css: Sequence[str] | None = None,
) -> str:
    """Vertical bars per category (several groups side by side); bars grow from zero, so a negative
    value (e.g. a node below the median) points down. ``bar_css`` overrides one group's colours."""
    all_values = [g.values for g in groups] + [np.array([r.value for r in refs] + [0.0])]
    y_lo, y_hi = finite_range(*all_values)
    y0, y1, y_ticks = nice_range(min(0.0, y_lo), max(0.0, y_hi), 5)
    slot_px = (WIDTH - MARGIN_LEFT - MARGIN_RIGHT) / max(1, len(categories))
    rotate = any(len(c) * 7.2 > slot_px * 0.95 for c in categories)
    if rotate:
        longest = max(len(c) for c in categories)
        extra = int(longest * 5)
        frame = dataclasses.replace(
            frame,
            height=frame.height + extra,
            margin_bottom=frame.margin_bottom + extra,
            rotate_x_labels=True,
        )
    bottom = frame.height - frame.margin_bottom
    left, right = MARGIN_LEFT, WIDTH - MARGIN_RIGHT
    ys = Scale(y0, y1, bottom, MARGIN_TOP)
    slot = (right - left) / max(1, len(categories))
    bar = slot * 0.8 / max(1, len(groups))
    xs = Scale(0, len(categories), left, right)
    step = max(1, math.ceil(len(categories) / 24))
    x_ticks = [i + 0.5 for i in range(0, len(categories), step)]
    names = {i + 0.5: c for i, c in enumerate(categories)}
    tick_frame = dataclasses.replace(frame, x_fmt=lambda v: names.get(v, ""))
    out = [
        svg_open(WIDTH, frame.height, label),
        _axes(tick_frame, xs, ys, x_ticks, y_ticks),
        '<g class="bars">',
    ]
    zero = ys(0.0)
    for gi, group in enumerate(groups):
        for i, value in enumerate(group.values.tolist()):
            if not math.isfinite(value):
                continue
            x = left + i * slot + slot * 0.1 + gi * bar
            y = ys(value)
            css = bar_css[i] if bar_css is not None and len(groups) == 1 else group.css
            title = group.titles[i] if i < len(group.titles) else f"{categories[i]}: {value:,.6g}"
            out.append(
                f'<rect class="{css}" x="{x:.1f}" y="{min(y, zero):.1f}" width="{max(bar - 1, 1):.1f}" '
                f'height="{max(abs(zero - y), 0.5):.1f}"><title>{esc(title)}</title></rect>'
            )
    for ref in refs:
        y = ys(ref.value)
        out.append(
            f'<line class="{ref.css}" x1="{left}" x2="{right}" y1="{y:.1f}" y2="{y:.1f}" '
            f'stroke-dasharray="5 3"><title>{esc(ref.label)}</title></line>'
        )
    out.append("</g>")
    items = [(g.label, g.css, "box") for g in groups if g.label] + [(r.label, r.css, "dash") for r in refs]
    out.append(legend([*items, *frame.extra_legend], MARGIN_LEFT, 18, right))
    out.append("</svg>")
    return "".join(out)


def histogram_chart(
    label: str,
    frame: Frame,
    edges_s: FloatArray,
    counts: np.ndarray,
    markers: Sequence[RefLine] = (),
    css: str = "f0",
) -> str:
    """Bars over log-spaced bins on a log x axis (latency); ``markers`` are vertical lines (p50, SLA)."""
    left, right = MARGIN_LEFT, WIDTH - MARGIN_RIGHT
    bottom = frame.height - MARGIN_BOTTOM
    lo = float(min(edges_s[0], *[m.value for m in markers])) if markers else float(edges_s[0])
    hi = float(max(edges_s[-1], *[m.value for m in markers])) if markers else float(edges_s[-1])
    xs = Scale(lo / 1.1, hi * 1.1, left, right, log=True)
    _, y1, y_ticks = nice_range(0.0, float(counts.max()) if counts.size else 1.0, 5)
    ys = Scale(0.0, y1, bottom, MARGIN_TOP)
    x_ticks = log_ticks(lo / 1.1, hi * 1.1)
    out = [svg_open(WIDTH, frame.height, label), _axes(frame, xs, ys, x_ticks, y_ticks), '<g class="bars">']
    for i, count in enumerate(counts.tolist()):
        if count <= 0:
            continue
        x0, x1 = xs(float(edges_s[i])), xs(float(edges_s[i + 1]))
        y = ys(count)
        title = f"{frame.x_fmt(float(edges_s[i]))} – {frame.x_fmt(float(edges_s[i + 1]))}: {count:,} requests"
        out.append(
            f'<rect class="{css}" x="{x0:.1f}" y="{y:.1f}" width="{max(x1 - x0 - 0.5, 0.5):.1f}" '
            f'height="{bottom - y:.1f}"><title>{esc(title)}</title></rect>'
        )
    for k, m in enumerate(markers):
        x = xs(m.value)
        near_right = x > right - 90  # keep the label inside the chart
        out.append(
            f'<line class="{m.css}" x1="{x:.1f}" x2="{x:.1f}" y1="{MARGIN_TOP}" y2="{bottom}" '
            f'stroke-dasharray="5 3"/><text class="ref-label" x="{x - 4 if near_right else x + 4:.1f}" '
            f'y="{MARGIN_TOP + 12 + 13 * k}" text-anchor="{"end" if near_right else "start"}">'
            f"{esc(m.label)}</text>"
        )
    out.append("</g>")
    out.append(legend([(frame.y_label, css, "box"), *frame.extra_legend], left, 18, right))
    out.append("</svg>")
    return "".join(out)


def heatmap_chart(
    label: str,
    frame: Frame,
    values: FloatArray,
    x_range: tuple[float, float],
    row_labels: Sequence[str],
    value_label: str,
    vmin: float,
    vmax: float,
) -> str:
    """values (rows, columns) as a colour grid over time, with a colour bar in ``value_label`` units."""
    rows = values.shape[0]
    height = max(frame.height - MARGIN_TOP, min(860, MARGIN_BOTTOM + 5 * rows + 40))
    left, right = MARGIN_LEFT + 20, WIDTH - MARGIN_RIGHT - 70
    top, bottom = 12, height - MARGIN_BOTTOM
    x0, x1, x_ticks = tight_range(*x_range, 8)
    xs = Scale(x0, x1, left, right)
    out = [svg_open(WIDTH, height, label)]
    img_x0, img_x1 = xs(x_range[0]), xs(x_range[1])
    out.append(
        f'<image x="{img_x0:.1f}" y="{top}" width="{max(img_x1 - img_x0, 1):.1f}" height="{bottom - top}" '
        f'preserveAspectRatio="none" style="image-rendering:pixelated" '
        f'href="{heatmap_data_uri(values, vmin, vmax)}"><title>{esc(label)}</title></image>'
    )
    out.append('<g class="axis">')
    out.append(f'<line x1="{left}" x2="{right}" y1="{bottom}" y2="{bottom}"/>')
    for v in x_ticks:
        x = xs(v)
        out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{bottom}" y2="{bottom + 5}"/>')
        out.append(f'<text x="{x:.1f}" y="{bottom + 18}" text-anchor="middle">{esc(frame.x_fmt(v))}</text>')
    row_h = (bottom - top) / max(1, rows)
    last_y = -math.inf
    for i in range(rows):
        y = top + (i + 0.5) * row_h
        if not row_labels[i] or y - last_y < 13:  # no overlapping labels
            continue
        last_y = y
        out.append(f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">{esc(row_labels[i])}</text>')
    out.append(
        f'<text class="axis-label" x="{(left + right) / 2:.0f}" y="{height - 8}" '
        f'text-anchor="middle">{esc(frame.x_label)}</text></g>'
    )
    # Colour bar: a gradient from vmin (bottom) to vmax (top) with its unit.
    stops = "".join(f'<stop offset="{1 - o:.2f}" stop-color="{c}"/>' for o, c in viridis_stops())
    gid = f"cb{zlib.crc32(label.encode()):08x}"
    cb_x = right + 22
    out.append(
        f'<defs><linearGradient id="{gid}" x1="0" y1="0" x2="0" y2="1">{stops}</linearGradient></defs>'
    )
    out.append(
        f'<g class="legend colorbar"><rect x="{cb_x}" y="{top}" width="14" height="{bottom - top}" '
        f'fill="url(#{gid})"/>'
    )
    for v in nice_range(vmin, vmax, 4)[2]:
        if vmin <= v <= vmax:
            y = bottom - (v - vmin) / ((vmax - vmin) or 1) * (bottom - top)
            out.append(f'<text x="{cb_x + 18}" y="{y + 4:.1f}">{esc(frame.y_fmt(v))}</text>')
    out.append(
        f'<text class="axis-label" transform="translate({WIDTH - 8} {(top + bottom) / 2:.0f}) rotate(-90)" '
        f'text-anchor="middle">{esc(value_label)}</text></g>'
    )
    out.append(
        f'<text class="axis-label" transform="translate(14 {(top + bottom) / 2:.0f}) rotate(-90)" '
        f'text-anchor="middle">{esc(frame.y_label)}</text>'
    )
    out.append("</svg>")
    return "".join(out)


@dataclass(frozen=True)
class TimelineRow:
    label: str
    spans: Sequence[tuple[float, float, str, str]]  # start, end, css, title


def timeline_chart(
    label: str, frame: Frame, rows: Sequence[TimelineRow], x_range: tuple[float, float]
) -> str:
    """One row per (node, kind) with its spans as bars and one-off events as ticks."""
    row_h = 18
    height = MARGIN_TOP + MARGIN_BOTTOM + row_h * max(1, len(rows)) + 10
    left, right = MARGIN_LEFT + 110, WIDTH - MARGIN_RIGHT
    top, bottom = MARGIN_TOP + 5, height - MARGIN_BOTTOM
    x0, x1, x_ticks = tight_range(*x_range, 8)
    xs = Scale(x0, x1, left, right)
    out = [svg_open(WIDTH, height, label), '<g class="grid">']
    out += [f'<line x1="{xs(v):.1f}" x2="{xs(v):.1f}" y1="{top}" y2="{bottom}"/>' for v in x_ticks]
    out.append('</g><g class="axis">')
    out.append(f'<line x1="{left}" x2="{right}" y1="{bottom}" y2="{bottom}"/>')
    for v in x_ticks:
        out.append(
            f'<text x="{xs(v):.1f}" y="{bottom + 18}" text-anchor="middle">{esc(frame.x_fmt(v))}</text>'
        )
    out.append(
        f'<text class="axis-label" x="{(left + right) / 2:.0f}" y="{height - 8}" '
        f'text-anchor="middle">{esc(frame.x_label)}</text></g><g class="bars">'
    )
    for i, row in enumerate(rows):
        y = top + i * row_h
        out.append(f'<text x="{left - 8}" y="{y + 13}" text-anchor="end">{esc(row.label)}</text>')
        for start, end, css, title in row.spans:
            xa, xb = xs(start), xs(end)
            if end <= start:
                out.append(
                    f'<rect class="{css}" x="{xa - 2:.1f}" y="{y + 2}" width="4" height="{row_h - 4}">'
                    f"<title>{esc(title)}</title></rect>"
                )
            else:
                out.append(
                    f'<rect class="{css}" x="{xa:.1f}" y="{y + 3}" width="{max(xb - xa, 2):.1f}" '
                    f'height="{row_h - 6}" rx="2"><title>{esc(title)}</title></rect>'
                )
    out.append("</g>")
    out.append(legend(frame.extra_legend, MARGIN_LEFT, 18, right))
    out.append("</svg>")
    return "".join(out)
