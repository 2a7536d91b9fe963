"""The fleet board's upper levels: one row per site, or per row of a site; Enter goes down a level.

A fleet whose racks carry ``site`` / ``row`` labels (:mod:`tokenwatch.core.fleet.groups`) is a handful of
groups at the top rather than 1,000 racks. This board draws one level's groups (all of them, or one
site's rows), each with its racks up of all, nodes, throughput, power, tokens per joule, the worst
projected verdict and the projection's sum, its stale and down racks and its slowest rack; drawn line by
line like the rack board, so only the rows on screen cost anything. A new snapshot redraws only the rows
whose cells changed (the board's other lines, most of them blank at the sites' level, keep what Textual
drew): a refresh of a 1,000-rack fleet's sites redrew ~40 lines of which four held figures.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import ClassVar

import numpy as np
from rich.style import Style
from textual.binding import Binding, BindingType
from textual.geometry import Region
from textual.strip import Strip

from tokenwatch.base.formatting import DASH, group, part_of
from tokenwatch.core.fleet.groups import GroupTable
from tokenwatch.frontends.tui.widgets.fleet_board import STALE_LABEL, VERDICT_LABEL, verdict_of
from tokenwatch.frontends.tui.widgets.sorted_table import (
    Column,
    SortedTable,
    fit_columns,
    name_rank,
    nan_last_order,
    row_strip,
)

COLUMNS: tuple[Column, ...] = (
    Column("group", "Group", 8, 0, right=False),
    Column("racks", "Racks", 9, 0),
    Column("nodes", "Nodes", 11, 2),
    Column("now", "tok/s now", 11, 0),
    Column("per_gpu", "per GPU", 7, 3),
    Column("power", "Power kW", 9, 4),
    Column("tpj", "tok/J", 5, 5),
    Column("verdict", "Projected", 11, 1, right=False),
    Column("proj", "proj tok/s", 11, 6),
    Column("stopped", "Stale/down", 10, 1),
    Column("slowest", "Slowest rack", 0, 7, right=False),
)
SORT_KEYS: tuple[str, ...] = tuple(c.key for c in COLUMNS)
_MIN_SLOWEST = 12


def group_order(level: GroupTable, rows: np.ndarray, key: str, descending: bool) -> np.ndarray:
    """The groups at ``rows`` ordered by ``key``; missing values last, ties by name order."""
    position = np.arange(len(level), dtype=np.float64)
    if key in ("group", "slowest"):
        names = level.names if key == "group" else tuple(n or "\uffff" for n in level.slowest_rack)
        values = name_rank(names).astype(np.float64)
    else:
        values = np.asarray(
            {
                "racks": level.racks_up / np.maximum(level.racks_total, 1),
                "nodes": level.nodes_up / np.maximum(level.nodes_total, 1),
                "now": level.tokens_per_s,
                "per_gpu": level.per_gpu_tokens_per_s,
                "power": level.power_w,
                "tpj": level.tokens_per_joule,
                # INVALID first, then undecided, then VALID: the groups that need a look come up first.
                "verdict": np.where(np.isnan(level.projected_valid), 0.5, level.projected_valid),
                "proj": level.projected_tokens_per_s,
                "stopped": level.racks_stale + level.racks_down,
            }[key],
            np.float64,
        )
    order = nan_last_order(values, descending, position)
    shown = np.zeros(len(level), bool)
    shown[rows] = True
    return np.asarray(order[shown[order]], np.int64)


class GroupBoard(SortedTable):
    """Set the groups with :meth:`update_groups`; posts :class:`GroupBoard.GroupSelected` on Enter or a
    double click."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("enter", "open_group", "Down a level", show=True)]
    COLUMNS = COLUMNS
    SORT_KEYS = SORT_KEYS

    class GroupSelected(SortedTable.Selected):
        """The engineer asked for a group's rows or racks (its ``key``)."""

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__("group", id=id, classes=classes)
        self.level: GroupTable | None = None
        self.rows = np.zeros(0, np.int64)
        self.scope = "Fleet"
        self._widths: dict[str, int] = {c.key: c.width or _MIN_SLOWEST for c in COLUMNS}
        self._name_width = 8
        self._line_width = 0  # the content's width, read once per render pass
        # What was last handed to Textual to draw: the rows' (key, state, cells) in order, and what
        # else decides every line (cursor, name column's width, sort); each row's cells by key.
        self._drawn: tuple[tuple[str, str, tuple[str, ...]], ...] | None = None
        self._frame: tuple[object, ...] = ()
        self._cells: dict[str, dict[str, str]] = {}

    # ------------------------------------------------------------------ data
    def update_groups(self, level: GroupTable, rows: np.ndarray, scope: str) -> None:
        """Show the groups at ``rows`` of ``level``; ``scope`` heads the board (``Fleet``, ``site01``)."""
        self.level, self.rows, self.scope = level, rows, scope
        self._resort()
        self._refresh_changed(level)

    def _refresh_changed(self, level: GroupTable) -> None:
        """Ask Textual to redraw the rows whose cells or state changed; every line where the rows, the
        cursor, the name column's width or the sort did."""
        shown = [int(g) for g in self._order]
        cells = {level.keys[g]: self.cells(level, g) for g in shown}
        drawn = tuple((level.keys[g], level.state(g), tuple(cells[level.keys[g]].values())) for g in shown)
        frame = (self.cursor_key, self._name_width, self.sort_key, self.descending)
        before, self._drawn, self._cells = self._drawn, drawn, cells
        if before is None or frame != self._frame or [d[0] for d in before] != [d[0] for d in drawn]:
            self._frame = frame
            self.refresh()
            return
        for row, (old, new) in enumerate(zip(before, drawn, strict=True)):
            if old != new:
                self.refresh_line(row + 1)  # line 0 is the header

    def _row_names(self) -> Sequence[str] | None:
        return self.level.keys if self.level is not None else None

    def _resort(self) -> None:
        level = self.level
        if level is None:
            return
        self._set_order(group_order(level, self.rows, self.sort_key, self.descending))
        shown = {level.keys[int(g)] for g in self._order}
        if (self.cursor_key is None or self.cursor_key not in shown) and len(self._order):
            self.cursor_key = level.keys[int(self._order[0])]
        self._name_width = min(20, max([6, *(len(level.names[int(g)]) for g in self._order)]))
        what = "sites" if level.level == "site" else "rows"
        racks = int(level.racks_total[self._order].sum())
        up = int(level.racks_up[self._order].sum())
        # Setting a border's title redraws the whole widget, even to the same text: only when it changes.
        subtitle = f"{self._sort_caption()} · s: next column · enter: down a level"
        title = f"{self.scope} · {len(self._order):,} {what} · {part_of(up, racks)} racks up"
        if self.border_subtitle != subtitle:
            self.border_subtitle = subtitle
        if self.border_title != title:
            self.border_title = title

    def _selected(self, key: str) -> GroupSelected:
        return self.GroupSelected(key)

    def action_open_group(self) -> None:
        self.open_cursor_row()

    def _width(self, col: Column) -> int:
        return self._widths[col.key]

    # ------------------------------------------------------------------ drawing
    def render_lines(self, crop: Region) -> list[Strip]:
        width = self._line_width = self.scrollable_content_region.width
        fixed = {c.key: (self._name_width if c.key == "group" else c.width or _MIN_SLOWEST) for c in COLUMNS}
        self._columns, self._widths = fit_columns(COLUMNS, fixed, width, "slowest")
        return super().render_lines(crop)

    def render_line(self, y: int) -> Strip:
        width = self._line_width or self.scrollable_content_region.width
        base, pal = self.base, self.pal
        if y == 0:
            return self._header_strip(pal, base, width)
        row = int(self.scroll_y) + y - 1
        level = self.level
        if level is None or row >= len(self._order):
            return Strip.blank(width, base)
        g = int(self._order[row])
        state = level.state(g)
        row_style = base + (pal.bad_row if state == "down" else pal.warn_row if state == "stale" else Style())
        verdict = verdict_of(float(level.projected_valid[g]))
        stopped = int(level.racks_stale[g]) + int(level.racks_down[g])
        styles = {
            "group": Style(bold=True),
            "racks": pal.bad if level.racks_up[g] < level.racks_total[g] else pal.good,
            "nodes": pal.bad if level.nodes_up[g] < level.nodes_total[g] else pal.good,
            "verdict": pal.good if verdict == "VALID" else pal.bad if verdict == "INVALID" else pal.warn,
            "stopped": pal.bad if stopped else pal.muted,
            "slowest": pal.muted,
        }
        cursor = None
        if level.keys[g] == self.cursor_key:
            cursor = pal.cursor if self.has_focus else Style(reverse=True)
        cells = self._cells.get(level.keys[g]) or self.cells(level, g)
        return row_strip(self._columns, self._widths, cells, styles, row_style, pal, cursor, width)

    @staticmethod
    def cells(level: GroupTable, g: int) -> dict[str, str]:
        """Group ``g``'s cells as the board shows them (a missing figure is a dash)."""
        power, tpj = float(level.power_w[g]), float(level.tokens_per_joule[g])
        stale, down = int(level.racks_stale[g]), int(level.racks_down[g])
        return {
            "group": level.names[g],
            "racks": f"{level.racks_up[g]}/{level.racks_total[g]}",
            "nodes": f"{level.nodes_up[g]}/{level.nodes_total[g]}",
            "now": group(level.tokens_per_s[g]),
            "per_gpu": group(level.per_gpu_tokens_per_s[g]),
            "power": f"{power / 1000.0:,.1f}" if math.isfinite(power) else DASH,
            "tpj": f"{tpj:.2f}" if math.isfinite(tpj) else DASH,
            # A group with a rack whose data stopped has no projection, as the fleet's own has none.
            "verdict": STALE_LABEL
            if level.projection_stale[g]
            else VERDICT_LABEL[verdict_of(float(level.projected_valid[g]))],
            "proj": "stale" if level.projection_stale[g] else group(level.projected_tokens_per_s[g]),
            "stopped": f"{stale}/{down}" if stale or down else DASH,
            "slowest": level.slowest_rack[g] or DASH,
        }
