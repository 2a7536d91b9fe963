"""One row per node, sortable by any column, drawn line by line so only visible rows cost anything.

A custom Line API table rather than DataTable: with 1,152 nodes, updating every DataTable cell takes
~150 ms per refresh and rendering as much again, while this draws the ~40 rows on screen from the
snapshot's arrays directly. Rows keep the cursor on the same node when the order changes.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import ClassVar

import numpy as np
from rich.segment import Segment
from rich.style import Style
from textual.binding import Binding, BindingType
from textual.geometry import Region
from textual.strip import Strip

from tokenwatch.base.events import FloatArray
from tokenwatch.base.formatting import DASH, group, printable
from tokenwatch.core.energy import SOURCE_MARK, SOURCE_WORDS
from tokenwatch.core.nan_math import finite_range
from tokenwatch.core.snapshot import NodeTable as NodeRows
from tokenwatch.core.snapshot import RackSnapshot
from tokenwatch.frontends.tui.charts import sparkline
from tokenwatch.frontends.tui.palette import Palette
from tokenwatch.frontends.tui.widgets.sorted_table import GAP, Column, SortedTable, name_rank, nan_last_order

COLUMNS: tuple[Column, ...] = (
    Column("node", "Node", 9, 0, right=False),
    Column("status", "Status", 12, 0, right=False),
    Column("now", "tok/s now", 10, 0),
    Column("mean", "tok/s mean", 10, 2),
    Column("delta", "Δ median", 8, 1),
    Column("base", "vs base", 8, 2),  # only with --baseline: the node against its counterpart there
    Column("progress", "Prog", 5, 3),
    Column("power", "Power W", 8, 4),
    Column("sm", "SM MHz", 7, 6),
    Column("hbm", "HBM GiB", 8, 7),
    Column("temp", "Max °C", 6, 5),
    Column("tpj", "tok/J", 7, 6),
    Column("cause", "Cause", 13, 2, right=False),
    Column("trend", "tok/s trend", 12, 8, right=False),
)
SORT_KEYS: tuple[str, ...] = tuple(c.key for c in COLUMNS if c.key not in ("trend", "cause"))
_TREND_WIDTH = 12
_NODE_WIDTH = 9  # the node column's least width
MAX_NODE_WIDTH = 28  # the most it widens to: a longer name is cut in its middle, its ends kept


def shown_names(names: Sequence[str]) -> tuple[tuple[str, ...], str]:
    """(each node's name as the table shows it, the prefix left out): a rack's nodes named
    ``rack01/node07`` show as ``node07`` under a title that says ``rack01/``, never cut to ``rack01/no``
    (every node of the rack alike)."""
    cut = min((n.rfind("/") for n in names), default=-1)
    prefix = names[0][: cut + 1] if names and cut >= 0 else ""
    if not prefix or not all(n.startswith(prefix) and len(n) > len(prefix) for n in names):
        return tuple(names), ""
    return tuple(n[len(prefix) :] for n in names), prefix


def fitted_name(name: str, width: int) -> str:
    """``name`` within ``width`` cells: whole, or its start and end around an ellipsis (a name's
    distinguishing part is usually its end: ``node07``, ``n12``)."""
    if len(name) <= width:
        return name
    tail = (width - 1) // 2 + (width - 1) % 2
    return f"{name[: width - 1 - tail]}…{name[-tail:]}"


# Status rank for sorting: the worst first.
_RANK = {
    "down": 0,
    "stale": 1,
    "slow_throttling": 2,
    "straggler": 3,
    "throttling": 4,
    "up": 5,
    "idle": 6,
    "finished": 7,
}


def node_condition(rows: NodeRows, i: int) -> str:
    """down, stale, slow_throttling (both marks), straggler, throttling, up, idle or finished: what the
    status cell and colour say."""
    state = rows.state[i]
    if state in ("down", "stale", "finished", "idle"):
        return state
    if rows.straggler[i] and rows.throttling[i]:  # slow *because* throttled, most likely: show both
        return "slow_throttling"
    if rows.straggler[i]:
        return "straggler"
    if rows.throttling[i]:
        return "throttling"
    return "up"


# Symbol + word, so a state never relies on colour alone.
STATUS_LABEL = {
    "down": "✗ DOWN",
    "stale": "◌ stale",
    "slow_throttling": "▼ slow ◆ thr",
    "straggler": "▼ slow",
    "throttling": "◆ throttle",
    "up": "● up",
    "idle": "○ idle",
    "finished": "✓ done",
}
_MISSING_COLUMNS = ("now", "mean", "delta", "progress", "power", "sm", "hbm", "temp", "tpj", "base")


def tokens_per_joule_cell(rows: NodeRows, i: int) -> str:
    """``11.29∑``: the node's tokens per joule so far and where its energy comes from (∑ the GPUs' energy
    counters, ∫ integrated power readings; core/energy.py)."""
    if not len(rows.tokens_per_joule) or not math.isfinite(rows.tokens_per_joule[i]):
        return DASH
    source = rows.energy_source[i] if rows.energy_source else ""
    return f"{rows.tokens_per_joule[i]:.2f}{SOURCE_MARK.get(source, '')}"


def sort_order(
    rows: NodeRows, key: str, descending: bool, vs_baseline: FloatArray | None = None
) -> np.ndarray:
    """Row order by ``key``; missing values (NaN) always last, ties by node name. ``vs_baseline``: each
    node against the baseline in % (the ``base`` column; all missing without a baseline)."""
    n = len(rows.names)
    names_rank = name_rank(rows.names)
    if key == "node":
        values = names_rank.astype(np.float64)
    elif key == "status":
        values = np.array([_RANK[node_condition(rows, i)] for i in range(n)], np.float64)
    else:
        source = {
            "now": rows.tokens_per_s,
            "mean": rows.mean_tokens_per_s,
            "delta": rows.delta_vs_median_pct,
            "progress": rows.progress_pct,
            "power": rows.power_w,
            "sm": rows.sm_clock_mhz,
            "hbm": rows.hbm_used_mib,
            "temp": rows.temp_c,
            "tpj": rows.tokens_per_joule if len(rows.tokens_per_joule) else np.full(n, np.nan),
            "base": vs_baseline if vs_baseline is not None else np.full(n, np.nan),
        }[key]
        values = np.asarray(source, np.float64)
    return nan_last_order(values, descending, names_rank)


class NodeTable(SortedTable):
    """Set ``snapshot``; posts :class:`NodeTable.NodeSelected` on Enter or a double click."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("enter", "open_node", "Node", show=True)]
    COLUMNS = COLUMNS
    SORT_KEYS = SORT_KEYS

    class NodeSelected(SortedTable.Selected):
        """The engineer asked for a node's detail."""

        @property
        def node(self) -> str:
            return self.key

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__("node", id=id, classes=classes)
        self.snapshot: RackSnapshot | None = None
        self._spark_range = (math.nan, math.nan)
        self._shown: tuple[str, ...] = ()  # each node's name as drawn (shown_names)

    @property
    def cursor_node(self) -> str | None:
        return self.cursor_key

    @cursor_node.setter
    def cursor_node(self, name: str | None) -> None:
        self.cursor_key = name

    # ------------------------------------------------------------------ data
    def update_snapshot(self, snap: RackSnapshot) -> None:
        self.snapshot = snap
        self._resort()
        self.refresh()

    def _row_names(self) -> Sequence[str] | None:
        return self.snapshot.nodes.names if self.snapshot is not None else None

    def _resort(self) -> None:
        snap = self.snapshot
        if snap is None:
            return
        rows = snap.nodes
        base = snap.baseline
        self._set_order(
            sort_order(
                rows, self.sort_key, self.descending, base.node_delta_pct if base is not None else None
            )
        )
        self._spark_range = finite_range(rows.sparkline_tokens_per_s)
        if self.cursor_node is None and rows.names:
            self.cursor_node = rows.names[int(self._order[0])]
        source = snap.aggregate.energy_source
        energy = f" · tok/J {SOURCE_MARK[source]} {SOURCE_WORDS[source]}" if source in SOURCE_MARK else ""
        self.border_subtitle = f"{self._sort_caption()} · s: next column{energy}"
        self._shown, prefix = shown_names([printable(n) for n in rows.names])
        self.border_title = f"Nodes ({len(rows.names)})" + (f" · {prefix}" if prefix else "")
        if base is not None and base.matched_by == "rank":  # said where the column is read
            self.border_title += " · vs base: matched by rank"
        if base is not None:  # a node that stopped partway in either run: its figure covers part of it
            self.border_title += stopped_caption(rows.names, base.node_marks)

    def _sort_cycle(self) -> tuple[str, ...]:
        """``vs base`` only when there is a baseline."""
        return SORT_KEYS if self._has_baseline() else tuple(k for k in SORT_KEYS if k != "base")

    def _has_baseline(self) -> bool:
        return self.snapshot is not None and self.snapshot.baseline is not None

    def _selected(self, key: str) -> NodeSelected:
        return self.NodeSelected(key)

    def action_open_node(self) -> None:
        self.open_cursor_row()

    # ------------------------------------------------------------------ drawing
    def render_lines(self, crop: Region) -> list[Strip]:
        # Columns fit the width as drawn (a scroll bar coming or going changes it without a resize).
        snap = self.snapshot
        explaining = snap is not None and any(snap.nodes.cause_text)
        longest = max((len(n) for n in self._shown), default=0)
        self._columns = self._fit_columns(
            self.scrollable_content_region.width,
            explaining,
            self._has_baseline(),
            min(MAX_NODE_WIDTH, max(_NODE_WIDTH, longest)),
        )
        return super().render_lines(crop)

    @staticmethod
    def _fit_columns(
        width: int, explaining: bool = False, with_baseline: bool = False, node_width: int = _NODE_WIDTH
    ) -> tuple[Column, ...]:
        """The columns that fit, the most needed first. The cause column is among the first while some
        node has a hint to show, and the last otherwise (an empty column would push out progress and
        power on a narrow screen); the baseline's column only with a baseline. The node column is as
        wide as the longest name shown (up to :data:`MAX_NODE_WIDTH`)."""
        chosen: set[str] = set()
        used = 0
        columns = tuple(dataclasses.replace(c, width=node_width) if c.key == "node" else c for c in COLUMNS)
        for col in sorted(columns, key=lambda c: c.priority if c.key != "cause" or explaining else 99):
            if col.key == "base" and not with_baseline:
                continue
            if used + col.width + GAP > width and col.priority > 0:
                continue
            chosen.add(col.key)
            used += col.width + GAP
        return tuple(c for c in columns if c.key in chosen)

    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width
        base = self.base
        pal = self.pal
        if y == 0:
            return self._header_strip(pal, base, width)
        row = int(self.scroll_y) + y - 1
        snap = self.snapshot
        if snap is None or row >= len(self._order):
            return Strip.blank(width, base)
        return self._row_strip(snap, int(self._order[row]), pal, base, width)

    def _cells(self, snap: RackSnapshot, i: int, condition: str) -> dict[str, str]:
        rows = snap.nodes

        def num(value: float, fmt: str = ",.0f") -> str:
            return format(value, fmt) if math.isfinite(value) else DASH

        delta = rows.delta_vs_median_pct[i]
        lo, hi = self._spark_range
        cause = rows.causes[i] if rows.causes else None
        base = snap.baseline.node_delta_pct[i] if snap.baseline is not None else math.nan
        return {
            "node": self._shown[i] if i < len(self._shown) else printable(rows.names[i]),
            "status": STATUS_LABEL[condition],
            "now": group(rows.tokens_per_s[i]),
            "mean": group(rows.mean_tokens_per_s[i]),
            "delta": f"{round(delta, 1) or 0.0:+.1f}%" if math.isfinite(delta) else DASH,
            "base": (f"{round(base, 1) or 0.0:+.1f}%" if math.isfinite(base) else DASH) + self._mark(snap, i),
            "progress": f"{rows.progress_pct[i]:.0f}%" if math.isfinite(rows.progress_pct[i]) else DASH,
            "power": num(rows.power_w[i]),
            "sm": num(rows.sm_clock_mhz[i]),
            "hbm": num(rows.hbm_used_mib[i] / 1024.0),
            "temp": num(rows.temp_c[i]),
            "tpj": tokens_per_joule_cell(rows, i),
            "cause": cause.short() if cause is not None else "",
            "trend": sparkline(rows.sparkline_tokens_per_s[i], lo, hi, _TREND_WIDTH)
            if rows.sparkline_tokens_per_s.shape[1]
            else "",
        }

    @staticmethod
    def _mark(snap: RackSnapshot, i: int) -> str:
        """``*`` after a node's ``vs base`` figure where it or its counterpart stopped partway."""
        marks = snap.baseline.node_marks if snap.baseline is not None else ()
        return "*" if i < len(marks) and marks[i] else ""

    def _row_strip(self, snap: RackSnapshot, i: int, pal: Palette, base: Style, width: int) -> Strip:
        rows = snap.nodes
        condition = node_condition(rows, i)
        row_style = base
        if condition == "down":
            row_style = base + pal.bad_row
        elif condition in ("stale", "straggler"):
            row_style = base + pal.warn_row
        status_style = {
            "down": pal.bad,
            "stale": pal.warn,
            "slow_throttling": pal.warn,
            "straggler": pal.warn,
            "throttling": pal.warn,
            "up": pal.good,
            "idle": pal.good,
            "finished": pal.good,
        }[condition]
        cells = self._cells(snap, i, condition)
        selected = rows.names[i] == self.cursor_node
        segments = []
        for col in self._columns:
            text = cells[col.key]
            if col.key == "node":
                text = fitted_name(text, col.width)
            text = text.rjust(col.width)[-col.width :] if col.right else text.ljust(col.width)[: col.width]
            style = row_style
            if text.strip() == DASH and col.key in _MISSING_COLUMNS:
                style = row_style + pal.muted  # a missing value is greyed, never drawn like a reading
            elif col.key == "status":
                style = row_style + status_style
            elif col.key == "delta" and rows.straggler[i]:
                style = row_style + pal.bad
            elif col.key == "cause":
                style = row_style + pal.warn
            elif col.key == "base" and snap.baseline is not None:
                style = row_style + _baseline_style(pal, float(snap.baseline.node_delta_pct[i]))
            elif col.key == "trend":
                style = row_style + (pal.warn if condition != "up" and condition != "finished" else pal.bar)
            elif col.key == "node":
                style = row_style + Style(bold=True)
            if selected:
                style = style + (pal.cursor if self.has_focus else Style(reverse=True))
            segments.append(Segment(text, style))
            segments.append(
                Segment(" " * GAP, row_style + pal.cursor if selected and self.has_focus else row_style)
            )
        return Strip(segments).adjust_cell_length(width, row_style)


def stopped_caption(names: Sequence[str], marks: Sequence[str]) -> str:
    """`` · * node07 this run: down from 03:00, 30 % of its samples`` (``+1 more *``): the nodes whose
    ``vs base`` figure is marked ``*``, what they did; empty when none."""
    marked = [(printable(name), mark) for name, mark in zip(names, marks, strict=False) if mark]
    if not marked:
        return ""
    name, mark = marked[0]
    more = f" · +{len(marked) - 1} more *" if len(marked) > 1 else ""
    return f" · * {name} {printable(mark)}{more}"


def _baseline_style(pal: Palette, delta_pct: float) -> Style:
    """Behind the baseline by more than its noise (2 %) in the warning colour, ahead of it good."""
    if not math.isfinite(delta_pct):
        return pal.muted
    if delta_pct <= -2.0:
        return pal.bad
    return pal.good if delta_pct >= 2.0 else Style()
