"""The fleet board: one row per rack, sortable by any column; Enter opens the rack's dashboard.

Drawn line by line from the :class:`FleetTable`'s arrays (the Line API, like the node table): only the
rows on screen cost anything, and a refresh re-sorts 64 numbers rather than rebuilding 64 rows of
widgets. Rows keep the cursor on the same rack when the order changes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.binding import Binding, BindingType
from textual.geometry import Region, Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

from tokenwatch.core.fleet_table import FleetTable
from tokenwatch.formatting import DASH, group, verdict_word
from tokenwatch.tui.line_pass import LinePass
from tokenwatch.tui.palette import Palette


@dataclass(frozen=True, slots=True)
class Column:
    key: str
    title: str
    width: int  # 0: takes what is left of the width
    priority: int  # the lowest numbers are kept when the board is narrow
    right: bool = True


COLUMNS: tuple[Column, ...] = (
    Column("rack", "Rack", 8, 0, right=False),
    Column("nodes", "Nodes", 5, 0),
    Column("now", "tok/s now", 10, 0),
    Column("per_gpu", "per GPU", 7, 2),
    Column("spread", "Spread", 6, 3),
    Column("power", "Power kW", 8, 5),
    Column("tpj", "tok/J", 5, 6),
    Column("verdict", "Projected", 11, 1, right=False),
    Column("proj", "proj tok/s", 10, 7),
    Column("worst", "Worst node", 10, 1, right=False),
    Column("worst_delta", "Δ median", 8, 1),
    Column("cause", "Cause", 0, 4, right=False),
)
SORT_KEYS: tuple[str, ...] = tuple(c.key for c in COLUMNS if c.key != "cause")
_GAP = 1
_MIN_CAUSE = 12
VERDICT_LABEL = {"VALID": "✓ VALID", "INVALID": "✗ INVALID", "UNDECIDED": "? UNDECIDED"}


def verdict_of(value: float) -> str:
    """The projected verdict of a rack's ``projected_valid`` (1, 0, NaN) in words."""
    return verdict_word(None if math.isnan(value) else bool(value))


def fleet_order(table: FleetTable, key: str, descending: bool) -> np.ndarray:
    """Row order by ``key``; missing values (NaN) always last, ties by rack order."""
    position = np.arange(len(table), dtype=np.float64)
    if key == "rack":
        names_rank = np.argsort(np.argsort(np.array(table.racks, dtype=object)))
        values = names_rank.astype(np.float64)
    else:
        values = {
            "nodes": table.nodes_up / np.maximum(table.nodes_total, 1),
            "now": table.tokens_per_s,
            "per_gpu": table.per_gpu_tokens_per_s,
            "spread": table.spread_pct,
            "power": table.power_w,
            "tpj": table.tokens_per_joule,
            # INVALID first, then undecided, then VALID: the racks that need a look come up first.
            "verdict": np.where(np.isnan(table.projected_valid), 0.5, table.projected_valid),
            "proj": table.projected_tokens_per_s,
            "worst": np.array([name or "\uffff" for name in table.worst_node], dtype=object),
            "worst_delta": table.worst_delta_pct,
        }[key]
        if key == "worst":
            values = np.argsort(np.argsort(values)).astype(np.float64)
        values = np.asarray(values, np.float64)
    missing = ~np.isfinite(values)
    keyed = np.where(missing, 0.0, -values if descending else values)
    return np.lexsort((position, keyed, missing))


class FleetBoard(LinePass, ScrollView, can_focus=True):
    """Set the table with :meth:`update_fleet`; posts :class:`FleetBoard.RackSelected` on Enter or a
    double click."""

    DEFAULT_CSS = """
    FleetBoard {
        overflow-x: hidden;
        border: round $primary 50%;
        border-title-color: $primary;
        height: 1fr;
        min-height: 6;
    }
    FleetBoard:focus { border: round $primary; }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up", "cursor(-1)", "Up", show=False),
        Binding("down", "cursor(1)", "Down", show=False),
        Binding("pageup", "page(-1)", "Page up", show=False),
        Binding("pagedown", "page(1)", "Page down", show=False),
        Binding("home", "cursor_to(0)", "First", show=False),
        Binding("end", "cursor_to(-1)", "Last", show=False),
        Binding("enter", "open_rack", "Rack", show=True),
    ]

    class RackSelected(Message):
        """The engineer asked for a rack's dashboard."""

        def __init__(self, rack: str) -> None:
            super().__init__()
            self.rack = rack

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.table: FleetTable | None = None
        self.sort_key = "rack"
        self.descending = False
        self.cursor_rack: str | None = None
        self._order = np.zeros(0, np.int64)
        self._position = np.zeros(0, np.int64)  # row of each rack index
        self._columns: tuple[Column, ...] = COLUMNS
        self._widths: dict[str, int] = {c.key: c.width or _MIN_CAUSE for c in COLUMNS}
        self._rack_width = 8

    # ------------------------------------------------------------------ data
    def update_fleet(self, table: FleetTable) -> None:
        self.table = table
        self._resort()
        self.refresh()

    def _resort(self) -> None:
        table = self.table
        if table is None:
            return
        self._order = fleet_order(table, self.sort_key, self.descending)
        self._position = np.empty(len(self._order), np.int64)
        self._position[self._order] = np.arange(len(self._order))
        if (self.cursor_rack is None or self.cursor_rack not in table.racks) and len(table):
            self.cursor_rack = table.racks[int(self._order[0])]
        self._rack_width = min(16, max([6, *(len(name) for name in table.racks)]))
        self.virtual_size = Size(self.size.width, len(self._order) + 1)
        title = next(c.title for c in COLUMNS if c.key == self.sort_key)
        arrow = "▼" if self.descending else "▲"
        self.border_subtitle = f"sorted by {title} {arrow} · s: next column · enter: the rack"
        down = int(sum(state == "down" for state in table.state))
        nodes_up, nodes = int(table.nodes_up.sum()), int(table.nodes_total.sum())
        self.border_title = f"Fleet · {len(table)} racks · {nodes_up}/{nodes} nodes up" + (
            f" · {down} racks down" if down else ""
        )

    # ------------------------------------------------------------------ sorting
    def sort_by(self, key: str, descending: bool | None = None) -> None:
        if key not in SORT_KEYS:
            raise ValueError(f"unknown sort column {key!r}")
        self.descending = (
            (not self.descending if key == self.sort_key else False) if descending is None else descending
        )
        self.sort_key = key
        self._resort()
        self._move_to(0)  # a new order is read from the top; between sorts the cursor follows its rack

    def cycle_sort(self) -> None:
        """The next column, ascending (``s``)."""
        self.sort_by(SORT_KEYS[(SORT_KEYS.index(self.sort_key) + 1) % len(SORT_KEYS)], descending=False)

    def reverse_sort(self) -> None:
        self.sort_by(self.sort_key, descending=not self.descending)

    # ------------------------------------------------------------------ cursor
    @property
    def cursor_row(self) -> int:
        table = self.table
        if table is None or self.cursor_rack is None or self.cursor_rack not in table.racks:
            return 0
        return int(self._position[table.index(self.cursor_rack)])

    def _move_to(self, row: int) -> None:
        table = self.table
        if table is None or not len(self._order):
            return
        row = min(max(0, row), len(self._order) - 1)
        self.cursor_rack = table.racks[int(self._order[row])]
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

    def action_open_rack(self) -> None:
        if self.cursor_rack is not None:
            self.post_message(self.RackSelected(self.cursor_rack))

    # ------------------------------------------------------------------ mouse
    def _column_at(self, x: int) -> Column | None:
        pos = 0
        for col in self._columns:
            width = self._widths[col.key]
            if pos <= x < pos + width + _GAP:
                return col
            pos += width + _GAP
        return None

    def on_click(self, event: events.Click) -> None:
        offset = event.get_content_offset(self)
        if offset is None:
            return
        if offset.y == 0:
            col = self._column_at(offset.x)
            if col is not None and col.key in SORT_KEYS:
                self.sort_by(col.key)
            return
        self._move_to(int(self.scroll_y) + offset.y - 1)
        if event.chain >= 2:
            self.action_open_rack()

    # ------------------------------------------------------------------ drawing
    def on_resize(self) -> None:
        if self.table is not None:
            self.virtual_size = Size(self.size.width, len(self._order) + 1)

    def render_lines(self, crop: Region) -> list[Strip]:
        self._fit_columns(self.scrollable_content_region.width)
        return super().render_lines(crop)

    def _fit_columns(self, width: int) -> None:
        """The columns that fit ``width``, the most important first; the cause takes what is left."""
        fixed = {c.key: (self._rack_width if c.key == "rack" else c.width or _MIN_CAUSE) for c in COLUMNS}
        chosen: set[str] = set()
        used = 0
        for col in sorted(COLUMNS, key=lambda c: c.priority):
            if used + fixed[col.key] + _GAP > width and col.priority > 0:
                continue
            chosen.add(col.key)
            used += fixed[col.key] + _GAP
        if "cause" in chosen:
            fixed["cause"] += max(0, width - used)
        self._columns = tuple(c for c in COLUMNS if c.key in chosen)
        self._widths = fixed

    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width
        base, pal = self.base, self.pal
        if y == 0:
            return self._header_strip(pal, base, width)
        row = int(self.scroll_y) + y - 1
        table = self.table
        if table is None:
            text = "waiting for the racks…" if y == 1 else ""
            return Strip([Segment(text, base + pal.muted)]).adjust_cell_length(width, base)
        if row >= len(self._order):
            return Strip.blank(width, base)
        return self._row_strip(table, int(self._order[row]), pal, base, width)

    def _header_strip(self, pal: Palette, base: Style, width: int) -> Strip:
        segments = []
        for col in self._columns:
            w = self._widths[col.key]
            title = col.title
            if col.key == self.sort_key:  # the arrow always shows; a long title gives way
                title = f"{title[: w - 1]}{'▼' if self.descending else '▲'}"
            text = title[:w].rjust(w) if col.right else title[:w].ljust(w)
            segments += [Segment(text, base + pal.header), Segment(" " * _GAP, base)]
        return Strip(segments).adjust_cell_length(width, base)

    @staticmethod
    def cells(table: FleetTable, i: int) -> dict[str, str]:
        """Rack ``i``'s cells as the board shows them (a missing figure is a dash)."""

        def num(value: float, fmt: str) -> str:
            return format(value, fmt) if math.isfinite(value) else DASH

        delta = float(table.worst_delta_pct[i])
        state = table.state[i]
        up, total = int(table.nodes_up[i]), int(table.nodes_total[i])
        return {
            "rack": table.racks[i],
            "nodes": "DOWN" if state == "down" else f"{up}/{total}",
            "now": group(table.tokens_per_s[i]),
            "per_gpu": group(table.per_gpu_tokens_per_s[i]),
            "spread": num(table.spread_pct[i], ".1f") + ("%" if math.isfinite(table.spread_pct[i]) else ""),
            "power": num(table.power_w[i] / 1000.0, ",.1f"),
            "tpj": num(table.tokens_per_joule[i], ".2f"),
            "verdict": VERDICT_LABEL[verdict_of(float(table.projected_valid[i]))],
            "proj": group(table.projected_tokens_per_s[i]),
            "worst": table.worst_node[i] or DASH,
            "worst_delta": f"{round(delta, 1) or 0.0:+.1f}%" if math.isfinite(delta) else DASH,
            "cause": table.worst_cause[i],
        }

    def _row_strip(self, table: FleetTable, i: int, pal: Palette, base: Style, width: int) -> Strip:
        state = table.state[i]
        row_style = base + (pal.bad_row if state == "down" else pal.warn_row if state == "stale" else Style())
        short = int(table.nodes_up[i]) < int(table.nodes_total[i])
        verdict = verdict_of(float(table.projected_valid[i]))
        styles = {
            "rack": Style(bold=True),
            "nodes": pal.bad if short else pal.good,
            "verdict": pal.good if verdict == "VALID" else pal.bad if verdict == "INVALID" else pal.warn,
            "worst_delta": pal.warn,
            "cause": pal.muted,
        }
        cells = self.cells(table, i)
        selected = table.racks[i] == self.cursor_rack
        segments = []
        for col in self._columns:
            w = self._widths[col.key]
            text = cells[col.key]
            fitted = text[: w - 1] + "…" if len(text) > w else text.ljust(w)  # a long cause is cut
            text = text.rjust(w)[-w:] if col.right else fitted
            style = row_style + (pal.muted if text.strip() == DASH else styles.get(col.key, Style()))
            if selected:
                style = style + (pal.cursor if self.has_focus else Style(reverse=True))
            segments.append(Segment(text, style))
            gap_style = row_style + pal.cursor if selected and self.has_focus else row_style
            segments.append(Segment(" " * _GAP, gap_style))
        return Strip(segments).adjust_cell_length(width, row_style)

    def on_focus(self) -> None:
        self.refresh()

    def on_blur(self) -> None:
        self.refresh()
