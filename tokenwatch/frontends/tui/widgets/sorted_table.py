"""What the dashboard's sortable Line API tables (the node table, the fleet board) share.

The cursor, paging, the sort column and its direction, clicks on the header and rows, the header line
and the order with missing values last. A subclass says what its rows are called (:meth:`_row_names`),
how to sort them (:meth:`_resort`, which ends in :meth:`_set_order`) and how to draw a row. The cursor
follows a row's name, not its position, so it stays on the same row when the order changes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.binding import Binding, BindingType
from textual.geometry import Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

from tokenwatch.base.formatting import DASH
from tokenwatch.frontends.tui.line_pass import LinePass
from tokenwatch.frontends.tui.palette import Palette
from tokenwatch.frontends.tui.panel_css import panel_css

GAP = 1  # cells between two columns


@dataclass(frozen=True, slots=True)
class Column:
    key: str
    title: str
    width: int  # 0 on the fleet board: takes what is left of the width
    priority: int  # the lowest numbers are kept when the table is narrow
    right: bool = True


def fit_columns(
    columns: Sequence[Column], fixed: dict[str, int], width: int, stretch: str
) -> tuple[tuple[Column, ...], dict[str, int]]:
    """The columns that fit ``width``, the most important first (``fixed``: each one's width), and
    their widths; ``stretch`` (a column of width 0: the cause) takes what is left."""
    widths = dict(fixed)
    chosen: set[str] = set()
    used = 0
    for col in sorted(columns, key=lambda c: c.priority):
        if used + widths[col.key] + GAP > width and col.priority > 0:
            continue
        chosen.add(col.key)
        used += widths[col.key] + GAP
    if stretch in chosen:
        widths[stretch] += max(0, width - used)
    return tuple(c for c in columns if c.key in chosen), widths


def row_strip(
    columns: Sequence[Column],
    widths: dict[str, int],
    cells: dict[str, str],
    styles: dict[str, Style],
    row_style: Style,
    pal: Palette,
    cursor: Style | None,
    width: int,
) -> Strip:
    """One row of a board: each cell fitted to its column (a long text cut with "…", numbers kept by
    their right end), a dash muted; ``cursor`` the style of the row under the cursor (None: not it)."""
    segments = []
    for col in columns:
        w = widths[col.key]
        text = cells[col.key]
        fitted = text[: w - 1] + "…" if len(text) > w else text.ljust(w)
        text = text.rjust(w)[-w:] if col.right else fitted
        style = row_style + (pal.muted if text.strip() == DASH else styles.get(col.key, Style()))
        if cursor is not None:
            style = style + cursor
        segments.append(Segment(text, style))
        gap_style = row_style + pal.cursor if cursor is pal.cursor else row_style
        segments.append(Segment(" " * GAP, gap_style))
    return Strip(segments).adjust_cell_length(width, row_style)


def name_rank(names: Sequence[str | None] | np.ndarray) -> np.ndarray:
    """Each name's place in alphabetical order (0 for the first)."""
    return np.argsort(np.argsort(np.asarray(names, dtype=object)))


def nan_last_order(values: np.ndarray, descending: bool, ties: np.ndarray) -> np.ndarray:
    """Row order by ``values``; missing values (NaN) always last whichever the direction, ties by ``ties``."""
    values = np.asarray(values, np.float64)
    missing = ~np.isfinite(values)
    keyed = np.where(missing, 0.0, -values if descending else values)
    return np.lexsort((ties, keyed, missing))


class SortedTable(LinePass, ScrollView, can_focus=True):
    """Base of a sortable table: one header line, then one line per row in ``_order``."""

    DEFAULT_CSS = (
        panel_css("SortedTable")
        + """
    SortedTable { overflow-x: hidden; }
    SortedTable:focus { border: round $primary; }
    """
    )

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up", "cursor(-1)", "Up", show=False),
        Binding("down", "cursor(1)", "Down", show=False),
        Binding("pageup", "page(-1)", "Page up", show=False),
        Binding("pagedown", "page(1)", "Page down", show=False),
        Binding("home", "cursor_to(0)", "First", show=False),
        Binding("end", "cursor_to(-1)", "Last", show=False),
    ]
    COLUMNS: ClassVar[tuple[Column, ...]] = ()
    SORT_KEYS: ClassVar[tuple[str, ...]] = ()

    class Selected(Message):
        """The engineer opened a row (Enter or a double click); ``key`` is its name."""

        def __init__(self, key: str) -> None:
            super().__init__()
            self.key = key

    def __init__(self, sort_key: str, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.sort_key = sort_key
        self.descending = False
        self.cursor_key: str | None = None
        self._order = np.zeros(0, np.int64)
        self._position = np.zeros(0, np.int64)  # row of each row index
        self._columns: tuple[Column, ...] = self.COLUMNS

    # ------------------------------------------------------------------ what a subclass provides
    def _row_names(self) -> Sequence[str] | None:
        """The rows' names in data order; None before the first data."""
        raise NotImplementedError

    def _resort(self) -> None:
        """Sort the rows by ``sort_key`` and ``descending`` and hand the order to :meth:`_set_order`."""
        raise NotImplementedError

    def _selected(self, key: str) -> SortedTable.Selected:
        """The message that opens row ``key``."""
        raise NotImplementedError

    def _width(self, col: Column) -> int:
        return col.width

    def _sort_cycle(self) -> tuple[str, ...]:
        """The columns ``s`` steps through."""
        return self.SORT_KEYS

    # ------------------------------------------------------------------ order
    def _set_order(self, order: np.ndarray) -> None:
        """``order``: the rows shown, in order (all of them, or some: a board of one group's racks)."""
        names = self._row_names()
        self._order = order
        self._position = np.zeros(len(names) if names is not None else len(order), np.int64)
        self._position[order] = np.arange(len(order))
        self.virtual_size = Size(self.size.width, len(order) + 1)

    def _sort_caption(self) -> str:
        title = next(c.title for c in self.COLUMNS if c.key == self.sort_key)
        return f"sorted by {title} {'▼' if self.descending else '▲'}"

    def sort_by(self, key: str, descending: bool | None = None) -> None:
        if key not in self.SORT_KEYS:
            raise ValueError(f"unknown sort column {key!r}")
        self.descending = (
            (not self.descending if key == self.sort_key else False) if descending is None else descending
        )
        self.sort_key = key
        self._resort()
        self._move_to(0)  # a new order is read from the top; between sorts the cursor follows its row

    def cycle_sort(self) -> None:
        """The next column, ascending (``s``)."""
        keys = self._sort_cycle()
        i = keys.index(self.sort_key) if self.sort_key in keys else -1
        self.sort_by(keys[(i + 1) % len(keys)], descending=False)

    def reverse_sort(self) -> None:
        self.sort_by(self.sort_key, descending=not self.descending)

    # ------------------------------------------------------------------ cursor
    @property
    def cursor_row(self) -> int:
        names = self._row_names()
        if names is None or self.cursor_key is None or self.cursor_key not in names:
            return 0
        return int(self._position[names.index(self.cursor_key)])

    def _move_to(self, row: int) -> None:
        names = self._row_names()
        if names is None or not len(self._order):
            return
        row = min(max(0, row), len(self._order) - 1)
        self.cursor_key = names[int(self._order[row])]
        visible = max(1, self.scrollable_content_region.height - 1)
        if row < self.scroll_y:
            self.scroll_to(y=row, animate=False)
        elif row >= self.scroll_y + visible:
            self.scroll_to(y=row - visible + 1, animate=False)
        self.refresh()

    def action_cursor(self, delta: int) -> None:
        self._move_to(self.cursor_row + delta)

    def action_page(self, direction: int) -> None:
        self._move_to(self.cursor_row + direction * max(1, self.scrollable_content_region.height - 2))

    def action_cursor_to(self, row: int) -> None:
        self._move_to(row if row >= 0 else len(self._order) - 1)

    def open_cursor_row(self) -> None:
        if self.cursor_key is not None:
            self.post_message(self._selected(self.cursor_key))

    # ------------------------------------------------------------------ mouse
    def _column_at(self, x: int) -> Column | None:
        pos = 0
        for col in self._columns:
            width = self._width(col)
            if pos <= x < pos + width + GAP:
                return col
            pos += width + GAP
        return None

    def on_click(self, event: events.Click) -> None:
        offset = event.get_content_offset(self)
        if offset is None:
            return
        if offset.y == 0:
            col = self._column_at(offset.x + int(self.scroll_x))
            if col is not None and col.key in self.SORT_KEYS:
                self.sort_by(col.key)
            return
        self._move_to(int(self.scroll_y) + offset.y - 1)
        if event.chain >= 2:
            self.open_cursor_row()

    # ------------------------------------------------------------------ drawing
    def on_resize(self) -> None:
        if self._row_names() is not None:
            self.virtual_size = Size(self.size.width, len(self._order) + 1)

    def _header_strip(self, pal: Palette, base: Style, width: int) -> Strip:
        segments = []
        for col in self._columns:
            w = self._width(col)
            title = col.title
            if col.key == self.sort_key:  # the arrow always shows; a long title gives way
                title = f"{title[: w - 1]}{'▼' if self.descending else '▲'}"
            text = title[:w].rjust(w) if col.right else title[:w].ljust(w)
            segments += [Segment(text, base + pal.header), Segment(" " * GAP, base)]
        return Strip(segments).adjust_cell_length(width, base)

    def on_focus(self) -> None:
        self.refresh()

    def on_blur(self) -> None:
        self.refresh()
