"""What a Line API widget needs once per render pass rather than once per line.

``rich_style`` walks the CSS and the palette is looked up by theme: per line they cost more than
drawing the line. Textual renders a widget's visible lines in one ``render_lines`` call, so they are
resolved there and read by ``render_line``.
"""

from __future__ import annotations

from rich.style import Style
from textual.geometry import Region
from textual.strip import Strip
from textual.widget import Widget

from tokenwatch.frontends.tui.palette import Palette, palette


class LinePass(Widget):
    """Base for the dashboard's Line API widgets: ``self.base`` and ``self.pal`` inside ``render_line``."""

    base: Style = Style()
    pal: Palette

    def render_lines(self, crop: Region) -> list[Strip]:
        self.base = self.rich_style
        self.pal = palette(self.app)
        return super().render_lines(crop)
