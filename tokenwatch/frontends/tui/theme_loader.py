"""Dashboard themes: YAML files loaded into ``textual.theme.Theme``, plus a heatmap colour scale.

Themes come from, in this order (a later file of the same name replaces an earlier one):

1. the shipped themes in ``tokenwatch/frontends/tui/themes/`` — in a checkout a symlink to the repository's
   ``themes/``; setuptools copies the files into the wheel as package data, so an installed
   tokenwatch finds them through ``importlib.resources``;
2. the user's directory: ``$TOKENWATCH_THEMES`` if set, else ``$XDG_CONFIG_HOME/tokenwatch/themes``
   (``~/.config/tokenwatch/themes``).

A file that does not load is reported as ``file:line: key: problem`` and skipped: a broken theme never
stops the dashboard.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from textual.color import Color, ColorParseError
from textual.theme import Theme

from tokenwatch.base.yaml_schema import Reader, SchemaError, load_yaml

DEFAULT_THEME = "dark"
SHIPPED_ORDER: tuple[str, ...] = ("dark", "light", "high-contrast", "colorblind")
_COLOUR_KEYS = (
    "primary",
    "secondary",
    "accent",
    "warning",
    "error",
    "success",
    "foreground",
    "background",
    "surface",
    "panel",
    "boost",
)


@dataclass(frozen=True, slots=True)
class ThemeFile:
    """The keys of a theme file. Colours are CSS colours (``#rrggbb``, ``rgb(...)``, names)."""

    primary: str
    name: str | None = None  # default: the file name without .yaml
    description: str = ""
    dark: bool = True
    secondary: str | None = None
    accent: str | None = None
    warning: str | None = None
    error: str | None = None
    success: str | None = None
    foreground: str | None = None
    background: str | None = None
    surface: str | None = None
    panel: str | None = None
    boost: str | None = None
    luminosity_spread: float = 0.15
    text_alpha: float = 0.95
    heatmap: list[str] = field(default_factory=list)  # colour stops, low -> high (2 or more)
    variables: dict[str, str] = field(default_factory=dict)  # extra Textual colour variables


@dataclass(frozen=True, slots=True)
class DashboardTheme:
    theme: Theme
    heatmap: tuple[str, ...]  # at least two colour stops, low -> high
    description: str
    path: Path | None


@dataclass(slots=True)
class ThemeCatalog:
    themes: dict[str, DashboardTheme] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    def names(self) -> list[str]:
        """Shipped themes in their fixed order, then the user's alphabetically."""
        shipped = [n for n in SHIPPED_ORDER if n in self.themes]
        return shipped + sorted(n for n in self.themes if n not in SHIPPED_ORDER)


def shipped_dir() -> Path:
    return Path(str(resources.files("tokenwatch.frontends.tui").joinpath("themes")))


def user_dir() -> Path:
    explicit = os.environ.get("TOKENWATCH_THEMES")
    if explicit:
        return Path(explicit).expanduser()
    config = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(config) / "tokenwatch" / "themes"


def _colour(reader: Reader, key: tuple[str | int, ...], value: str) -> str:
    try:
        Color.parse(value)
    except ColorParseError:
        raise reader.error(key, f"{value!r} is not a colour (use e.g. #1f6f8b)") from None
    return value


def load_theme_file(path: Path) -> DashboardTheme:
    """One theme file, or :class:`SchemaError` naming the file, line and key."""
    data, lines = load_yaml(path)
    reader = Reader(str(path), lines)
    spec = reader.build(ThemeFile, data if data is not None else {})
    for key in _COLOUR_KEYS:
        value = getattr(spec, key)
        if value is not None:
            _colour(reader, (key,), value)
    for i, stop in enumerate(spec.heatmap):
        _colour(reader, ("heatmap", i), stop)
    for name, value in spec.variables.items():
        _colour(reader, ("variables", name), value)
    if len(spec.heatmap) == 1:
        raise reader.error(("heatmap",), "needs at least two colour stops (low and high)")
    if not 0 <= spec.luminosity_spread <= 1:
        raise reader.error(("luminosity_spread",), "must be between 0 and 1")
    if not 0 < spec.text_alpha <= 1:
        raise reader.error(("text_alpha",), "must be above 0 and at most 1")
    name = (spec.name or path.stem).strip()
    if not name:
        raise reader.error(("name",), "must not be empty")
    colours = {key: getattr(spec, key) for key in _COLOUR_KEYS}
    theme = Theme(
        name=name,
        dark=spec.dark,
        luminosity_spread=spec.luminosity_spread,
        text_alpha=spec.text_alpha,
        variables=dict(spec.variables),
        **colours,
    )
    heatmap = tuple(spec.heatmap) or default_heatmap(theme)
    return DashboardTheme(theme, heatmap, spec.description, path)


def default_heatmap(theme: Theme) -> tuple[str, ...]:
    """A scale from the theme's own colours, for theme files that give none."""
    stops = [theme.surface or theme.panel or "#202020", theme.primary, theme.warning or "#ffa62b"]
    return (*stops, theme.error) if theme.error else tuple(stops)


def load_catalog(directories: list[Path] | None = None) -> ThemeCatalog:
    """Every theme in ``directories`` (default: shipped, then the user's); problems are collected."""
    catalog = ThemeCatalog()
    for directory in directories if directories is not None else [shipped_dir(), user_dir()]:
        if not directory.is_dir():
            continue
        try:
            paths = sorted(p for p in directory.iterdir() if p.suffix in (".yaml", ".yml"))
        except OSError as exc:
            catalog.problems.append(f"{directory}: cannot list themes: {exc.strerror}")
            continue
        for path in paths:
            try:
                loaded = load_theme_file(path)
            except SchemaError as exc:
                catalog.problems.append(f"theme skipped: {exc}")
                continue
            catalog.themes[loaded.theme.name] = loaded
    if not catalog.themes:  # nothing shipped could be read: a plain built-in keeps the dashboard up
        fallback = Theme(name=DEFAULT_THEME, primary="#4f9fe8", dark=True)
        catalog.themes[DEFAULT_THEME] = DashboardTheme(fallback, default_heatmap(fallback), "", None)
    return catalog
