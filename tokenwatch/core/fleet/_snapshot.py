"""The snapshot of a run known rack by rack (a fleet watched through Prometheus): its fleet table, and a
header and timeline that are the fleet's sums.

The node-level state of such a run holds only the nodes fetched for the screen and, at a coarser
interval, for alerts: summing those would read a fleet of 64 racks as the few being looked at.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

from tokenwatch.base.events import FloatArray
from tokenwatch.core.fleet._forecast import racks_forecast
from tokenwatch.core.fleet._state import FleetState, fleet_table, nansum
from tokenwatch.core.fleet.groups import RackPlaces
from tokenwatch.core.fleet.table import FleetTable
from tokenwatch.core.snapshot import RackSnapshot, Timeline
from tokenwatch.mlperf.forecast import Forecast


def with_fleet(
    snap: RackSnapshot, fleet: FleetState, table: FleetTable, steady_mean: Callable[[FloatArray], float]
) -> RackSnapshot:
    """The snapshot of a run known rack by rack: its fleet table (``table``, the fleet's
    :func:`fleet_table` at the snapshot's time), and a header and timeline that are the fleet's sums
    (the node-level state holds only the nodes fetched for the screen and for alerts). ``steady_mean``
    is the timeline's steady-state rule (the node-level timeline's own)."""
    if not len(table):
        return dataclasses.replace(snap, fleet=table)
    tokens = nansum(table.tokens_per_s)
    power = nansum(table.power_w)
    gpus = int(table.gpus.sum())
    agg = dataclasses.replace(
        snap.aggregate,
        tokens_per_s=tokens,
        per_gpu_tokens_per_s=tokens / gpus if gpus else math.nan,
        nodes=int(table.nodes_total.sum()),
        nodes_up=int(table.nodes_up.sum()),
        gpus=gpus,
        power_w=power,
        tokens_per_joule=tokens / power if power > 0 else math.nan,
    )
    verdict = snap.verdict
    if verdict is not None and not snap.ended:  # the racks' own projections, never the few nodes fetched
        rows = list(range(len(table)))
        verdict = dataclasses.replace(verdict, forecast=racks_forecast(verdict.forecast, fleet, table, rows))
    timeline = snap.timeline
    if fleet.totals is not None:
        times, totals = fleet.totals.view()
        if len(times):
            rate = totals[:, 0].copy()
            timeline = Timeline(times, rate, totals[:, 1].copy(), steady_mean(rate))
    return dataclasses.replace(snap, fleet=table, aggregate=agg, timeline=timeline, verdict=verdict)


def racks_projection(fleet: FleetState, table: FleetTable, now: float) -> Forecast:
    """The projection of a fleet known rack by rack while it runs: the sum of its racks' published
    projections (:func:`racks_forecast` over every row of its ``table`` at ``now``), with no projected
    end. Made in place of the node-level forecast, never from it: over the 18,000 nodes of 1,000 racks
    that forecast was ~70 % of a snapshot's time, for figures :func:`with_fleet` then replaced."""
    blank = Forecast(t=now, tokens_per_s=None, end_s=None, rules=(), valid=None)
    return racks_forecast(blank, fleet, table, list(range(len(table))))


def with_rack_row(snap: RackSnapshot, fleet: FleetState, rack: str, now: float) -> RackSnapshot:
    """Rack ``rack``'s drill-down with the figures of its row on the board: one truth from board to
    node. The node-level state of a fleet watched through Prometheus holds the rack's nodes only from
    when they were first fetched (the rack opened, or an alerting pass), so its own sums would cover
    less than the row, which the server sums over the rack's nodes every interval."""
    table = fleet_table(fleet, now)
    if rack not in table.racks:
        return snap
    r = table.index(rack)
    tokens, power = float(table.tokens_per_s[r]), float(table.power_w[r])
    agg = dataclasses.replace(
        snap.aggregate,
        tokens_per_s=tokens,
        per_gpu_tokens_per_s=float(table.per_gpu_tokens_per_s[r]),
        nodes=int(table.nodes_total[r]),
        nodes_up=int(table.nodes_up[r]),
        gpus=int(table.gpus[r]),
        power_w=power,
        tokens_per_joule=float(table.tokens_per_joule[r]),
    )
    spread = dataclasses.replace(snap.node_spread, spread_pct=float(table.spread_pct[r]))
    verdict = snap.verdict
    if verdict is not None and not snap.ended:
        verdict = dataclasses.replace(verdict, forecast=racks_forecast(verdict.forecast, fleet, table, [r]))
    return dataclasses.replace(snap, aggregate=agg, node_spread=spread, verdict=verdict)


def with_groups(snap: RackSnapshot, places: RackPlaces | None) -> RackSnapshot:
    """``snap`` with its fleet's groups (unchanged where it has no fleet, or the run places no rack);
    ``places``: where the racks stand, as the fleet's state keeps it."""
    if snap.fleet is None or len(snap.fleet) < 2 or places is None:
        return snap
    groups = places.groups(snap.fleet)
    return snap if groups is None else dataclasses.replace(snap, fleet_groups=groups)
