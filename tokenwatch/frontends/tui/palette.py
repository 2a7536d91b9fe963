"""Rich styles resolved from the current theme, for widgets that draw their own cells.

CSS covers borders and backgrounds; the charts, the node table and the heatmap colour individual cells,
so they read their colours here. One :class:`Palette` per theme, built on first use.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from rich.style import Style
from textual.app import App
from textual.color import Color

from tokenwatch.frontends.tui.theme_loader import default_heatmap

_HEAT_STEPS = 64


@dataclass(frozen=True, slots=True)
class Palette:
    text: Style
    muted: Style
    primary: Style
    accent: Style
    good: Style
    warn: Style
    bad: Style
    bad_row: Style  # a down node's whole row
    warn_row: Style  # a stale or straggling node's row
    cursor: Style
    header: Style
    bar: Style  # chart bars
    background: Color
    heat: tuple[Style, ...]  # _HEAT_STEPS cell styles, low -> high, text in a contrasting colour
    heat_fg: tuple[Style, ...]  # the same colours as foreground (legend swatches)

    def heat_style(self, fraction: float) -> Style:
        if not math.isfinite(fraction):
            return self.muted
        return self.heat[min(_HEAT_STEPS - 1, max(0, int(fraction * _HEAT_STEPS)))]

    def heat_fg_style(self, fraction: float) -> Style:
        if not math.isfinite(fraction):
            return self.muted
        return self.heat_fg[min(_HEAT_STEPS - 1, max(0, int(fraction * _HEAT_STEPS)))]


def _colour(variables: dict[str, str], key: str, fallback: str) -> Color:
    try:
        return Color.parse(variables.get(key, fallback))
    except Exception:
        return Color.parse(fallback)


def _scale(stops: tuple[str, ...], fraction: float) -> Color:
    colours = [Color.parse(s) for s in stops]
    pos = fraction * (len(colours) - 1)
    i = min(int(pos), len(colours) - 2)
    return colours[i].blend(colours[i + 1], pos - i)


@lru_cache(maxsize=16)
def _build(theme_key: tuple[tuple[str, str], ...], stops: tuple[str, ...]) -> Palette:
    v = dict(theme_key)
    background = _colour(v, "background", "#000000")
    foreground = _colour(v, "foreground", "#e0e0e0")
    primary = _colour(v, "primary", "#0178d4")
    warning = _colour(v, "warning", "#ffa62b")
    error = _colour(v, "error", "#ba3c5b")
    success = _colour(v, "success", "#4ebf71")
    accent = _colour(v, "accent", "#ffa62b")
    surface = _colour(v, "surface", background.hex)
    muted = background.blend(foreground, 0.55)
    heat, heat_fg = [], []
    for k in range(_HEAT_STEPS):
        cell = _scale(stops, k / (_HEAT_STEPS - 1))
        text = Color(0, 0, 0) if cell.brightness > 0.55 else Color(255, 255, 255)
        heat.append(Style(color=text.rich_color, bgcolor=cell.rich_color))
        heat_fg.append(Style(color=cell.rich_color))
    return Palette(
        text=Style(color=foreground.rich_color),
        muted=Style(color=muted.rich_color),
        primary=Style(color=primary.rich_color),
        accent=Style(color=accent.rich_color),
        good=Style(color=success.rich_color),
        warn=Style(color=warning.rich_color, bold=True),
        bad=Style(color=error.rich_color, bold=True),
        bad_row=Style(color=foreground.rich_color, bgcolor=surface.blend(error, 0.35).rich_color),
        warn_row=Style(bgcolor=surface.blend(warning, 0.18).rich_color),
        cursor=Style(color=background.rich_color, bgcolor=primary.rich_color, bold=True),
        header=Style(color=primary.rich_color, bold=True),
        bar=Style(color=primary.rich_color),
        background=background,
        heat=tuple(heat),
        heat_fg=tuple(heat_fg),
    )


def palette(app: App[Any]) -> Palette:
    """The palette of ``app``'s current theme (heatmap stops from the theme file when it has them)."""
    variables = app.theme_variables or {}
    keys = ("background", "foreground", "primary", "warning", "error", "success", "accent", "surface")
    theme_key = tuple((k, variables.get(k, "")) for k in keys)
    spec = getattr(app, "theme_catalog", None)
    stops: tuple[str, ...] | None = None
    if spec is not None and app.theme in spec.themes:
        stops = spec.themes[app.theme].heatmap
    if not stops:
        stops = default_heatmap(app.current_theme)
    return _build(theme_key, stops)
