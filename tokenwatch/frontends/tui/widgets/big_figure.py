"""A figure in three-row block digits, readable from across the room (Textual's Digits has no comma)."""

from __future__ import annotations

from rich.text import Text
from textual.app import RenderResult
from textual.geometry import Size
from textual.reactive import reactive
from textual.widget import Widget

# Three rows per glyph; digits sit on the top half of the third row, so "," and "." hang from it.
_GLYPHS: dict[str, tuple[str, str, str]] = {
    "0": ("█▀█", "█ █", "▀▀▀"),
    "1": ("▀█ ", " █ ", "▀▀▀"),
    "2": ("▀▀█", "█▀▀", "▀▀▀"),
    "3": ("▀▀█", " ▀█", "▀▀▀"),
    "4": ("█ █", "▀▀█", "  ▀"),
    "5": ("█▀▀", "▀▀█", "▀▀▀"),
    "6": ("█▀▀", "█▀█", "▀▀▀"),
    "7": ("▀▀█", "  █", "  ▀"),
    "8": ("█▀█", "█▀█", "▀▀▀"),
    "9": ("█▀█", "▀▀█", "▀▀▀"),
    ",": (" ", " ", "▜"),
    ".": (" ", " ", "▀"),
    "-": ("   ", "▀▀▀", "   "),
    " ": ("  ", "  ", "  "),
}


def glyph_rows(text: str) -> tuple[str, str, str]:
    """The three rows of ``text``; characters without a glyph are drawn as a dash."""
    rows: list[list[str]] = [[], [], []]
    for ch in text:
        glyph = _GLYPHS.get(ch, _GLYPHS["-"])
        for r in range(3):
            rows[r].append(glyph[r])
    return tuple(" ".join(row) for row in rows)  # type: ignore[return-value]


def glyph_width(text: str) -> int:
    return len(glyph_rows(text)[0])


class BigFigure(Widget):
    """``value`` (e.g. ``"1,100,948"``) in block digits, three rows high."""

    DEFAULT_CSS = """
    BigFigure {
        height: 3;
        width: auto;
        color: $primary;
        text-style: bold;
    }
    """

    value: reactive[str] = reactive("")

    def __init__(self, value: str = "", *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.set_reactive(BigFigure.value, value)

    def watch_value(self, old: str, new: str) -> None:
        # Only a change of width needs a new layout; most refreshes keep the digit count.
        self.refresh(layout=glyph_width(old) != glyph_width(new))

    def get_content_width(self, _container: Size, _viewport: Size) -> int:
        return glyph_width(self.value)

    def render(self) -> RenderResult:
        return Text("\n".join(glyph_rows(self.value)), no_wrap=True, overflow="crop")
