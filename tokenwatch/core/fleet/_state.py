"""A fleet known rack by rack: the latest rack-level figures (:class:`RackFiguresBatch`) and the fleet's
timeline, kept beside the node-level :class:`RackState` of a run watched through Prometheus.

When 64 racks are watched through the Prometheus server that already scrapes them, the server sums and
ranks each rack's nodes (``sum by (rack)``, ``bottomk``, ``quantile``) and only those figures travel
every interval; the racks' nodes reach the node-level state only where the dashboard looks (drill-down)
and at a coarser interval for alerts. The board then reads :func:`fleet_table` of this state, the same
:class:`FleetTable` a node-level run of many racks gives, so it cannot tell the two apart; the header
and the timeline of such a run are the fleet's sums (:func:`with_fleet`), not the sums of whatever
nodes happened to be fetched.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tokenwatch.base.events import RACK_FIGURES, FloatArray, RackFiguresBatch
from tokenwatch.core._ring import DownsampledSeries
from tokenwatch.core.fleet.groups import RackPlaces
from tokenwatch.core.fleet.table import FleetTable

_COL = {name: i for i, name in enumerate(RACK_FIGURES)}
STALE_INTERVALS = 3.0  # a rack silent for this many of the fleet's own intervals is stale


@dataclass(slots=True, eq=False)
class FleetState:
    """Per rack (in order of first appearance, the run's declared racks first): its latest figures
    (``values``, columns in :data:`RACK_FIGURES` order), whether its series are gone (``down``), when it
    was last in a batch (``last_seen``, run time) and last in one with its series (``last_data``), and
    its slowest running node with a cause hint.
    ``node_ranges``: rack -> (first node, node count) in the run's node list, from ``RunStarted.meta``;
    ``places``: where the racks stand (their sites and rows), for the snapshot's groups."""

    history_points: int
    tick_s: float
    stale_after_s: float
    racks: list[str] = field(default_factory=list)
    index: dict[str, int] = field(default_factory=dict)
    values: FloatArray = field(default_factory=lambda: np.zeros((0, len(RACK_FIGURES))))
    down: np.ndarray = field(default_factory=lambda: np.zeros(0, bool))
    last_seen: FloatArray = field(default_factory=lambda: np.zeros(0))
    last_data: FloatArray = field(default_factory=lambda: np.zeros(0))  # last batch it was not down in
    worst_node: list[str] = field(default_factory=list)
    worst_cause: list[str] = field(default_factory=list)
    node_ranges: dict[str, tuple[int, int]] = field(default_factory=dict)
    last_batch_t: float = math.nan
    interval_s: float = math.nan  # the latest gap between two batches: the fleet's own cadence
    totals: DownsampledSeries | None = None  # (fleet tokens/s, fleet power W) per batch
    places: RackPlaces = field(default_factory=lambda: RackPlaces(None))

    def rack(self, name: str) -> int:
        """The row of rack ``name``, added (never seen, not known) the first time it is named."""
        i = self.index.get(name)
        if i is not None:
            return i
        i = len(self.racks)
        self.racks.append(name)
        self.index[name] = i
        self.values = np.vstack([self.values, np.full((1, len(RACK_FIGURES)), np.nan)])
        self.down = np.append(self.down, False)
        self.last_seen = np.append(self.last_seen, math.nan)
        self.last_data = np.append(self.last_data, math.nan)
        self.worst_node.append("")
        self.worst_cause.append("")
        return i


def declared_racks(meta: Mapping[str, Any]) -> list[tuple[str, int, int]]:
    """``meta["fleet"]["racks"]``: [name, first node, node count] per rack, as a fleet watch starts its
    run; malformed entries are left out (a recording is input like any other)."""
    fleet = meta.get("fleet")
    entries = fleet.get("racks") if isinstance(fleet, Mapping) else None
    out = []
    for entry in entries if isinstance(entries, list) else ():
        if (
            isinstance(entry, list | tuple)
            and len(entry) == 3
            and isinstance(entry[0], str)
            and all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in entry[1:])
        ):
            out.append((entry[0], int(entry[1]), int(entry[2])))
    return out


def new_fleet_state(
    meta: Mapping[str, Any], *, history_points: int, tick_s: float, stale_after_s: float, nodes: int
) -> FleetState:
    fleet = FleetState(history_points, tick_s, stale_after_s, places=RackPlaces(meta))
    fleet.totals = DownsampledSeries(history_points, (2,), tick_s, "mean")
    for name, first, count in declared_racks(meta):
        if name not in fleet.index and first + count <= nodes:
            fleet.rack(name)
            fleet.node_ranges[name] = (first, count)
    return fleet


def ingest_rack_figures(fleet: FleetState, ev: RackFiguresBatch) -> None:
    """The batch's racks take its figures; racks it does not name keep theirs (and go stale)."""
    if ev.places:  # where racks that appeared since the start stand
        fleet.places.learn(ev.places)
    known = list(map(fleet.index.get, ev.racks))  # a lookup in C per rack (1,000 racks a round)
    rows = np.array(known if None not in known else [fleet.rack(name) for name in ev.racks], np.int64)
    if len(rows):
        fleet.values[rows] = ev.values
        fleet.down[rows] = ev.down
        fleet.last_seen[rows] = ev.t
        fleet.last_data[rows[~ev.down]] = ev.t
        n = len(rows)
        in_order = rows[0] == 0 and rows[-1] == n - 1 and bool((np.diff(rows) == 1).all())
        if in_order and len(ev.worst_node) == len(ev.worst_cause) == n:
            # The batch's racks in the board's order from the first (every batch of a fleet watch): one
            # slice, not 1,000 assignments.
            fleet.worst_node[:n], fleet.worst_cause[:n] = ev.worst_node, ev.worst_cause
        else:
            for row, worst, cause in zip(rows.tolist(), ev.worst_node, ev.worst_cause, strict=True):
                fleet.worst_node[row], fleet.worst_cause[row] = worst, cause
    if math.isfinite(fleet.last_batch_t) and ev.t > fleet.last_batch_t:
        fleet.interval_s = ev.t - fleet.last_batch_t
    fleet.last_batch_t = max(ev.t, fleet.last_batch_t) if math.isfinite(fleet.last_batch_t) else ev.t
    if fleet.totals is not None:
        live = ~fleet.down
        fleet.totals.add(
            ev.t,
            np.array(
                [
                    nansum(fleet.values[live, _COL["tokens_per_s"]]),
                    nansum(fleet.values[live, _COL["power_w"]]),
                ]
            ),
        )


def nansum(values: FloatArray) -> float:
    return float(np.nansum(values)) if np.isfinite(values).any() else math.nan


def _ratio(top: FloatArray, bottom: FloatArray) -> FloatArray:
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(np.isfinite(bottom) & (bottom > 0), top / np.where(bottom > 0, bottom, 1.0), np.nan)


# Indexed by 2 x down + silent: a rack whose series are gone is down whether or not it is silent.
_RACK_STATE_NAMES = np.array(["up", "stale", "down", "down"], dtype=object)


def _rack_state_codes(fleet: FleetState, now: float) -> np.ndarray:
    """Per rack, its index into :data:`_RACK_STATE_NAMES` (0: up), in one numpy pass (no Python loop over
    1,000 racks at every snapshot). down: its series are gone; stale: not in a batch for
    ``max(stale_after, 3 x the fleet's interval)`` (or never); else up."""
    limit = (
        max(fleet.stale_after_s, STALE_INTERVALS * fleet.interval_s)
        if math.isfinite(fleet.interval_s)
        else fleet.stale_after_s
    )
    with np.errstate(invalid="ignore"):
        silent = ~(now - fleet.last_seen <= limit)
    return 2 * fleet.down.astype(np.int64) + silent


def fleet_table(fleet: FleetState, now: float) -> FleetTable:
    """The board's rows at run time ``now``: a down or stale rack's figures of now are not known (NaN),
    its size (nodes, GPUs) still is."""
    codes = _rack_state_codes(fleet, now)
    states = tuple(_RACK_STATE_NAMES[codes].tolist())
    live = codes == 0
    v = fleet.values

    def col(name: str, only_live: bool = True) -> FloatArray:
        values = v[:, _COL[name]].copy()
        return np.where(live, values, np.nan) if only_live else values

    tokens, power, gpus = col("tokens_per_s"), col("power_w"), col("gpus", False)
    running, worst, median = col("nodes_running"), col("worst_tokens_per_s"), col("median_tokens_per_s")
    mean_max, mean_min = col("mean_max_tokens_per_s"), col("mean_min_tokens_per_s")
    # The rack's slowest running node against its median, as the node-level table judges it: only
    # with two running nodes or more and a positive median.
    judged = np.isfinite(worst) & (running >= 2) & np.isfinite(median) & (median > 0)
    delta = np.where(judged, _ratio(worst - median, median) * 100.0, np.nan)
    worst_node = _where_judged(fleet.worst_node, judged)
    worst_cause = _where_judged(fleet.worst_cause, judged)
    nodes_up = np.where(live, col("nodes_up", False), 0.0)
    ranges = [fleet.node_ranges.get(name, (0, 0)) for name in fleet.racks]
    return FleetTable(
        racks=tuple(fleet.racks),
        state=states,
        nodes_total=_ints(col("nodes_total", False)),
        nodes_up=_ints(nodes_up),
        gpus=_ints(gpus),
        tokens_per_s=tokens,
        per_gpu_tokens_per_s=_ratio(tokens, gpus),
        spread_pct=_ratio(mean_max - mean_min, mean_min) * 100.0,
        power_w=power,
        tokens_per_joule=_ratio(tokens, power),
        projected_valid=col("projected_valid"),
        projected_tokens_per_s=col("projected_tokens_per_s"),
        worst_node=worst_node,
        worst_delta_pct=delta,
        worst_cause=worst_cause,
        first_node=np.array([r[0] for r in ranges], np.int64),
        node_count=np.array([r[1] for r in ranges], np.int64),
        data_age_s=np.maximum(now - fleet.last_data, 0.0),
    )


def _where_judged(texts: list[str], judged: np.ndarray) -> tuple[str, ...]:
    """``texts`` where ``judged``, "" elsewhere, in one numpy pass over the racks."""
    if not len(texts):
        return ()
    return tuple(np.where(judged, np.array(texts, dtype=object), "").tolist())


def _ints(values: FloatArray) -> np.ndarray:
    return np.where(np.isfinite(values), values, 0).astype(np.int64)
