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
from tokenwatch.core.fleet_state import FleetState, fleet_table, nansum
from tokenwatch.core.snapshot import RackSnapshot, Timeline


def with_fleet(
    snap: RackSnapshot, fleet: FleetState, now: float, steady_mean: Callable[[FloatArray], float]
) -> RackSnapshot:
    """The snapshot of a run known rack by rack: its fleet table, and a header and timeline that are the
    fleet's sums (the node-level state holds only the nodes fetched for the screen and for alerts).
    ``steady_mean`` is the timeline's steady-state rule (the node-level timeline's own)."""
    table = fleet_table(fleet, now)
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
    timeline = snap.timeline
    if fleet.totals is not None:
        times, totals = fleet.totals.view()
        if len(times):
            rate = totals[:, 0].copy()
            timeline = Timeline(times, rate, totals[:, 1].copy(), steady_mean(rate))
    return dataclasses.replace(snap, fleet=table, aggregate=agg, timeline=timeline)
