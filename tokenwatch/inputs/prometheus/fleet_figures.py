"""Each rack's figures from the fleet's answers: one :class:`RackFiguresBatch` per instant.

The live round hands :meth:`RackFigures.figures` one instant's samples; the backfill hands
:meth:`RackFigures.from_history` whole ``query_range`` answers (64 racks x 13 queries x ~500 steps) and
gets the same batches, built from arrays instead of one Python object per point. Both keep the racks in
the order the board shows them (discovered, then any that appear) and each rack's node count, so a rack
whose series are gone is shown down with the size it last had.
"""

from __future__ import annotations

from collections.abc import Container, Mapping, Sequence
from itertools import repeat

import numpy as np
import numpy.typing as npt

from tokenwatch.base.events import RACK_FIGURES, FloatArray, RackFiguresBatch
from tokenwatch.base.formatting import natural_key
from tokenwatch.inputs.prometheus.api import RangeSeries, Sample
from tokenwatch.inputs.prometheus.rack_answers import RackColumn

_COL = {name: i for i, name in enumerate(RACK_FIGURES)}
# The figures that count (nodes, GPUs) and the most a rack can hold of them: an answer outside 0..this
# (+Inf, a negative, 1e300 from a broken recording rule or a hostile server) is no count.
_COUNTS = [_COL[name] for name in ("nodes_total", "nodes_up", "nodes_running", "gpus")]
MAX_RACK_COUNT = 1_000_000


class RackFigures:
    """The rack figures' state across instants: ``racks`` in board order and ``rack_nodes`` (nodes
    each rack had when last listed); ``rack_label`` / ``node_label`` name a series' rack and node."""

    def __init__(self, rack_label: str, node_label: str) -> None:
        self.rack_label, self.node_label = rack_label, node_label
        self.racks: list[str] = []
        self.rack_nodes: dict[str, int] = {}
        self.impossible: set[str] = set()  # racks whose counts were no counts
        self._said_impossible: set[str] = set()

    def newly_impossible(self) -> str | None:
        """One line naming the racks whose counts were first found to be no counts since last asked."""
        new = sorted(self.impossible - self._said_impossible, key=natural_key)
        if not new:
            return None
        self._said_impossible.update(new)
        shown = ", ".join(new[:5]) + (f" and {len(new) - 5} more" if len(new) > 5 else "")
        return f"{shown}: a node or GPU count outside 0..{MAX_RACK_COUNT:,} (shown as unknown)"

    def figures(
        self, t: float, results: Mapping[str, RackColumn | Sequence[Sample]]
    ) -> RackFiguresBatch | None:
        """One batch from one instant's answers (field -> its column, or its samples read the exact
        way); None when the server could not say which racks are there (then nothing is known to be
        down, and the racks simply go stale)."""
        if "nodes_total" not in results:
            return None
        columns = {
            field: answer
            if isinstance(answer, RackColumn)
            else RackColumn.of_samples(answer, self.rack_label, self.node_label)
            for field, answer in results.items()
        }
        present = {rack for rack in columns["nodes_total"].racks if rack}
        for rack in sorted(present - set(self.racks), key=natural_key):
            self.racks.append(rack)  # a rack that appeared since the watch began
        row_of = {rack: row for row, rack in enumerate(self.racks)}
        values = np.full((len(self.racks), len(RACK_FIGURES)), np.nan)
        names, causes = [""] * len(self.racks), [""] * len(self.racks)
        # A column per field (1,000 racks' samples each at 1,000 racks): the racks' rows looked up in C;
        # where a rack has several samples, the last one counts.
        for field, column in columns.items():
            col = _COL.get("worst_tokens_per_s" if field == "worst" else field)
            if not len(column.values) or (col is None and field != "worst_throttling"):
                continue
            if field == "worst_tokens_per_s":
                continue
            rows, last = _last_rows(column.racks, row_of)
            if field == "worst_throttling":
                for row in rows.tolist():
                    causes[row] = "throttling"
                continue
            values[rows, col] = column.values[last]
            if field == "worst":
                for row, i in zip(rows.tolist(), last.tolist(), strict=True):
                    names[row] = column.nodes[i]
        return self._batch(t, values, tuple(names), tuple(causes))

    def _batch(
        self, t: float, values: FloatArray, names: tuple[str, ...], causes: tuple[str, ...]
    ) -> RackFiguresBatch:
        """The batch of one instant's figures (rows: :attr:`racks`): a rack without a node count is
        down, and a rack's size is what the server counts now, or what it had when last listed."""
        total = _COL["nodes_total"]
        down = np.isnan(values[:, total])
        counts_given = values[:, _COUNTS]
        with np.errstate(invalid="ignore"):
            impossible = ~np.isnan(counts_given) & ~((counts_given >= 0) & (counts_given <= MAX_RACK_COUNT))
        if impossible.any():  # unknown, never a number: the rack keeps the size it was listed with
            counts_given[impossible] = np.nan
            values[:, _COUNTS] = counts_given
            self.impossible.update(self.racks[row] for row in np.flatnonzero(impossible.any(axis=1)).tolist())
        # Whole columns at once (1,000 racks a batch, 320 batches in an 80-minute backfill); -1: never listed.
        listed = np.fromiter(map(self.rack_nodes.get, self.racks, repeat(-1)), np.float64, len(self.racks))
        known = np.maximum(listed, 0.0)
        counts = values[:, total]
        with np.errstate(invalid="ignore"):
            unknown = down | np.isnan(counts) | (counts < known)
            counts[unknown & (known > 0)] = known[unknown & (known > 0)]
            grown = np.flatnonzero(~np.isnan(counts) & ((listed < 0) | (counts > known)))
        for row in grown.tolist():  # a rack listed for the first time, or larger than it was
            self.rack_nodes[self.racks[row]] = max(int(known[row]), int(counts[row]))
        return RackFiguresBatch(t, tuple(self.racks), values, down, names, causes)

    def from_history(
        self, answered: Mapping[str, list[RangeSeries]], first: float, step: float
    ) -> list[RackFiguresBatch]:
        """The batches :meth:`figures` would make of each step's answers, built from whole arrays: one
        per step at which the node count answered, racks that appear later added at the step they do.
        Per step and rack, the last series with a point there wins, as in :meth:`figures`."""
        totals = answered.get("nodes_total")
        if totals is None:
            return []
        label, node_label = self.rack_label, self.node_label
        last_points = [times[-1] for series in answered.values() for _, times, _ in series if len(times)]
        steps = 1 + max((int(np.rint((t - first) / step)) for t in last_points), default=-1)
        if steps <= 0:
            return []
        stamps = np.full(steps, np.nan)
        appeared: dict[str, int] = {}  # rack not known yet -> the first step it has a node count
        for labels, times, _ in totals:
            at, times, _ = self._on_steps(times, times, first, step)
            stamps[at] = times
            rack = labels.get(label)
            if rack and rack not in self.racks and len(at):
                appeared[rack] = min(appeared.get(rack, steps), int(at.min()))
        order = self.racks + sorted(appeared, key=lambda r: (appeared[r], natural_key(r)))
        rows = {rack: i for i, rack in enumerate(order)}
        cube = np.full((steps, len(order), len(RACK_FIGURES)), np.nan)
        names = np.full((steps, len(order)), "", dtype=object)
        throttling = np.zeros((steps, len(order)), bool)
        for field, series in answered.items():
            col = _COL.get("worst_tokens_per_s" if field == "worst" else field)
            for labels, times, values in series:
                row = rows.get(labels.get(label) or "")
                if row is None:
                    continue
                at, _, values = self._on_steps(times, values, first, step)
                if field == "worst_throttling":
                    throttling[at, row] = True
                elif col is not None:
                    cube[at, row, col] = values
                    if field == "worst":
                        names[at, row] = labels.get(node_label, "")
        cause_names = np.where(throttling, "throttling", "")
        batches: list[RackFiguresBatch] = []
        for k in np.flatnonzero(~np.isnan(stamps)).tolist():
            while len(self.racks) < len(order) and appeared[order[len(self.racks)]] <= k:
                self.racks.append(order[len(self.racks)])  # appeared at this step
            n = len(self.racks)
            causes = tuple(cause_names[k, :n].tolist())
            batch = self._batch(float(stamps[k]), cube[k, :n].copy(), tuple(names[k, :n].tolist()), causes)
            batches.append(batch)
        return batches

    @staticmethod
    def _on_steps(
        times: FloatArray, values: FloatArray, first: float, step: float
    ) -> tuple[npt.NDArray[np.intp], FloatArray, FloatArray]:
        """Each point's step number from ``first``; points before it (never sent) are left out."""
        at = np.rint((times - first) / step).astype(np.intp)
        keep = at >= 0
        return (at, times, values) if keep.all() else (at[keep], times[keep], values[keep])


def _last_rows(
    racks: Sequence[str], row_of: Mapping[str, int]
) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.intp]]:
    """(the rows of the racks the samples name, each rack's last sample's position): samples of a
    rack not on the board, or with no rack label, left out."""
    rows = np.fromiter(map(row_of.get, racks, repeat(-1)), np.intp, len(racks))
    at = np.flatnonzero(rows >= 0)
    rows = rows[at]
    if len(np.unique(rows)) < len(rows):  # a rack twice: its last sample, as one by one would
        rows, first = np.unique(rows[::-1], return_index=True)
        at = at[::-1][first]
    return rows, at


def places_meta(
    answer: object, rack_label: str, place_labels: tuple[str, str], racks: Container[str]
) -> dict[str, object]:
    """``{"rack_places": {rack: [site, row]}}`` (core/fleet/groups.py) from the answer to ``group by
    (rack, site, row)`` of the racks' series, for the ``racks`` listed; {} where no rack has either label,
    or the server could not say (the board is then as without them). A rack whose series disagree keeps
    the first pair listed."""
    places = {
        rack: list(place) for rack, place in rack_places_of(answer, rack_label, place_labels, racks).items()
    }
    return {"rack_places": places} if any(site or row for site, row in places.values()) else {}


def rack_places_of(
    answer: object, rack_label: str, place_labels: tuple[str, str], racks: Container[str]
) -> dict[str, tuple[str, str]]:
    """Rack -> (site, row) ("" where a label is absent) from the answer to ``group by (rack, site,
    row)``, for the ``racks`` listed; a rack whose series disagree keeps the first pair listed."""
    site_label, row_label = place_labels
    places: dict[str, tuple[str, str]] = {}
    for labels, _ in answer if isinstance(answer, list) else ():
        rack = labels.get(rack_label)
        if rack in racks and rack not in places:
            places[rack] = (labels.get(site_label, ""), labels.get(row_label, ""))
    return places
