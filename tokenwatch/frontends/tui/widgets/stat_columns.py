"""Label/value pairs in as many columns as the width holds, laid out when drawn (to the real width)."""

from __future__ import annotations

from rich.text import Text
from textual.app import RenderResult
from textual.reactive import reactive
from textual.widget import Widget

from tokenwatch.frontends.tui.palette import palette

Pair = tuple[str, str | Text]


class StatColumns(Widget):
    """Set ``pairs``, most important first: they fill column by column, ``ROWS`` high; columns that do
    not fit the width are left out whole rather than cut."""

    DEFAULT_CSS = """
    StatColumns {
        height: 3;
        text-wrap: nowrap;
        text-overflow: clip;
    }
    """

    ROWS = 3
    pairs: reactive[tuple[Pair, ...]] = reactive(())

    def render(self) -> RenderResult:
        pal = palette(self.app)
        rows = self.ROWS
        cells = [(label, v if isinstance(v, Text) else Text(v, style="bold")) for label, v in self.pairs]
        columns = [cells[i : i + rows] for i in range(0, len(cells), rows)]
        label_widths = [max(len(label) for label, _ in col) + 1 for col in columns]
        widths = [
            lw + max(v.cell_len for _, v in col) + 2 for lw, col in zip(label_widths, columns, strict=True)
        ]
        while len(columns) > 1 and sum(widths) > self.content_size.width:
            columns, widths, label_widths = columns[:-1], widths[:-1], label_widths[:-1]
        text = Text(no_wrap=True, overflow="crop")
        for r in range(rows):
            if r:
                text.append("\n")
            for col, width, label_w in zip(columns, widths, label_widths, strict=True):
                if r >= len(col):
                    continue
                label, value = col[r]
                text.append(f"{label:<{label_w}}", style=pal.muted)
                text.append_text(value)
                text.append(" " * max(0, width - label_w - value.cell_len))
        return text
