"""The fleet board: one row per rack, sortable by any column; Enter opens the rack's dashboard.

Drawn line by line from the :class:`FleetTable`'s arrays (the Line API, like the node table): only the
rows on screen cost anything, and a refresh re-sorts 64 numbers rather than rebuilding 64 rows of
widgets. Rows keep the cursor on the same rack when the order changes.

Each rack's row is kept as drawn until the table, the columns, the theme or the focus change: a key that
only reorders the rows or moves the cursor (``s``, ``S``, arrows) draws two rows anew and reuses the
rest. Building ~50 rows of styled cells was most of such a key's frame (about 40 ms of CPU at 200x60,
64 racks), and on a loaded machine each of those ms is several of the user's.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import ClassVar

import numpy as np
from rich.segment import Segment
from rich.style import Style
from textual.binding import Binding, BindingType
from textual.geometry import Region
from textual.strip import Strip

from tokenwatch.base.formatting import DASH, group, part_of, verdict_word
from tokenwatch.core.fleet.table import FleetTable
from tokenwatch.frontends.tui.palette import Palette
from tokenwatch.frontends.tui.widgets.sorted_table import (
    Column,
    SortedTable,
    fit_columns,
    name_rank,
    nan_last_order,
    row_strip,
)

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
_MIN_CAUSE = 12
STALE_LABEL = "◌ no data"
VERDICT_LABEL = {"VALID": "✓ VALID", "INVALID": "✗ INVALID", "UNDECIDED": "? UNDECIDED"}


def verdict_of(value: float) -> str:
    """The projected verdict of a rack's ``projected_valid`` (1, 0, NaN) in words."""
    return verdict_word(None if math.isnan(value) else bool(value))


def data_age(seconds: float) -> str:
    """How old a silent rack's figures are, in the cause column: ``no data for 1m05s``."""
    if not math.isfinite(seconds):
        return "no data yet"
    whole = int(seconds)
    return f"no data for {whole // 60}m{whole % 60:02d}s" if whole >= 60 else f"no data for {whole}s"


def fleet_order(table: FleetTable, key: str, descending: bool) -> np.ndarray:
    """Row order by ``key``; missing values (NaN) always last, ties by rack order."""
    position = np.arange(len(table), dtype=np.float64)
    if key == "rack":
        values = name_rank(table.racks).astype(np.float64)
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
            values = name_rank(values).astype(np.float64)
        values = np.asarray(values, np.float64)
    return nan_last_order(values, descending, position)


class FleetBoard(SortedTable):
    """Set the table with :meth:`update_fleet`; posts :class:`FleetBoard.RackSelected` on Enter or a
    double click."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("enter", "open_rack", "Rack", show=True)]
    COLUMNS = COLUMNS
    SORT_KEYS = SORT_KEYS

    class RackSelected(SortedTable.Selected):
        """The engineer asked for a rack's dashboard."""

        @property
        def rack(self) -> str:
            return self.key

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__("rack", id=id, classes=classes)
        self.table: FleetTable | None = None
        self.only: np.ndarray | None = None  # the rack indexes shown (None: all)
        self.scope = "Fleet"
        self._widths: dict[str, int] = {c.key: c.width or _MIN_CAUSE for c in COLUMNS}
        self._rack_width = 8
        # Each rack's row as drawn (by rack index and whether the cursor is on it), for the table and
        # the look in ``_drawn_with``; emptied when either changes.
        self._drawn_rows: dict[tuple[int, bool], Strip] = {}
        self._drawn_with: tuple[object, ...] = ()
        self._look_checked = False
        self._pass_width = 0  # the content's width in this render pass (Textual's lookup is per line)

    @property
    def cursor_rack(self) -> str | None:
        return self.cursor_key

    @cursor_rack.setter
    def cursor_rack(self, name: str | None) -> None:
        self.cursor_key = name

    # ------------------------------------------------------------------ data
    def update_fleet(self, table: FleetTable, only: np.ndarray | None = None, scope: str = "Fleet") -> None:
        """Show ``table``'s racks, or those at ``only`` (one site's or row's racks); ``scope`` heads the
        board (``Fleet``, ``site01 · row02``)."""
        if table is not self.table:
            self._drawn_rows.clear()
        self.table, self.only, self.scope = table, only, scope
        self._resort()
        self.refresh()

    def _row_names(self) -> Sequence[str] | None:
        return self.table.racks if self.table is not None else None

    def _resort(self) -> None:
        table = self.table
        if table is None:
            return
        order = fleet_order(table, self.sort_key, self.descending)
        if self.only is not None:
            shown = np.zeros(len(table), bool)
            shown[self.only] = True
            order = order[shown[order]]
        self._set_order(order)
        racks = [table.racks[int(r)] for r in order] if self.only is not None else table.racks
        if (self.cursor_rack is None or self.cursor_rack not in racks) and len(order):
            self.cursor_rack = table.racks[int(order[0])]
        self._rack_width = min(16, max([6, *(len(name) for name in racks)]))
        self.border_subtitle = f"{self._sort_caption()} · s: next column · enter: the rack"
        down = int(sum(table.state[int(r)] == "down" for r in order))
        nodes_up, nodes = int(table.nodes_up[order].sum()), int(table.nodes_total[order].sum())
        self.border_title = f"{self.scope} · {len(order):,} racks · {part_of(nodes_up, nodes)} nodes up" + (
            f" · {down:,} racks down" if down else ""
        )

    def _selected(self, key: str) -> RackSelected:
        return self.RackSelected(key)

    def action_open_rack(self) -> None:
        self.open_cursor_row()

    def _width(self, col: Column) -> int:
        return self._widths[col.key]

    # ------------------------------------------------------------------ drawing
    def render_lines(self, crop: Region) -> list[Strip]:
        self._pass_width = self.scrollable_content_region.width
        self._fit_columns(self._pass_width)
        self._look_checked = False  # once in this pass, at its first row (the base style is known then)
        return super().render_lines(crop)

    def _check_look(self, width: int) -> None:
        """Forget the drawn rows if anything besides the table and the cursor that they depend on changed."""
        look = (width, self._columns, tuple(self._widths.items()), self.base, self.pal, self.has_focus)
        if look != self._drawn_with:
            self._drawn_rows.clear()
            self._drawn_with = look
        self._look_checked = True

    def _fit_columns(self, width: int) -> None:
        """The columns that fit ``width``, the most important first; the cause takes what is left."""
        fixed = {c.key: (self._rack_width if c.key == "rack" else c.width or _MIN_CAUSE) for c in COLUMNS}
        self._columns, self._widths = fit_columns(COLUMNS, fixed, width, "cause")

    def render_line(self, y: int) -> Strip:
        width = self._pass_width
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
        if not self._look_checked:
            self._check_look(width)
        i = int(self._order[row])
        key = (i, table.racks[i] == self.cursor_rack)
        strip = self._drawn_rows.get(key)
        if strip is None:
            strip = self._drawn_rows[key] = self._row_strip(table, i, pal, base, width)
        return strip

    @staticmethod
    def cells(table: FleetTable, i: int) -> dict[str, str]:
        """Rack ``i``'s cells as the board shows them (a missing figure is a dash)."""

        def num(value: float, fmt: str) -> str:
            return format(value, fmt) if math.isfinite(value) else DASH

        delta = float(table.worst_delta_pct[i])
        state = table.state[i]
        up, total = int(table.nodes_up[i]), int(table.nodes_total[i])
        cause = table.worst_cause[i]
        if state != "up" and table.data_age_s is not None:  # a rack the server stopped telling of
            cause = data_age(float(table.data_age_s[i]))
        silent = table.projection_stale(i)
        return {
            "rack": table.racks[i],
            "nodes": "DOWN" if state == "down" else f"{up}/{total}",
            "now": group(table.tokens_per_s[i]),
            "per_gpu": group(table.per_gpu_tokens_per_s[i]),
            "spread": num(table.spread_pct[i], ".1f") + ("%" if math.isfinite(table.spread_pct[i]) else ""),
            "power": num(table.power_w[i] / 1000.0, ",.1f"),
            "tpj": num(table.tokens_per_joule[i], ".2f"),
            # A rack whose data stopped has no projection: said, not extrapolated from its last figures.
            "verdict": STALE_LABEL if silent else VERDICT_LABEL[verdict_of(float(table.projected_valid[i]))],
            "proj": "stale" if silent else group(table.projected_tokens_per_s[i]),
            "worst": table.worst_node[i] or DASH,
            "worst_delta": f"{round(delta, 1) or 0.0:+.1f}%" if math.isfinite(delta) else DASH,
            "cause": cause,
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
        selected = table.racks[i] == self.cursor_rack
        cursor = (self.pal.cursor if self.has_focus else Style(reverse=True)) if selected else None
        return row_strip(
            self._columns, self._widths, self.cells(table, i), styles, row_style, pal, cursor, width
        )
