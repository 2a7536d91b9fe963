"""The projection of a fleet known rack by rack (watched through Prometheus), and of one of its racks:
the racks' own forecasts, as their own watches publish them, never one made from the few nodes fetched.

The node-level state of such a run holds each node only from when it was first read (an alerting pass
every 30 s, a rack opened), so a forecast made of it extrapolated counters that had counted since the
run's start over the seconds since the first reading: ``29,843k ±11330533…``. The racks' exporters
publish each rack's projected figure and verdict (``tokenwatch_rack_projected_*``), made by the core that
reads every one of its nodes; the fleet's projection is their sum (valid when every rack is), with no
band the racks do not publish. A rack whose data stopped (its series gone, or silent past its limit)
has no projection: its forecast says since when, and is not extrapolated from its last figures.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from tokenwatch.base.durations import format_clock
from tokenwatch.core.fleet._state import FleetState
from tokenwatch.core.fleet.table import FleetTable
from tokenwatch.mlperf.forecast import Band, Forecast

MAX_NAMED = 3


def stopped_note(fleet: FleetState, table: FleetTable, rows: list[int]) -> str:
    """``rack02 down, no data since 05:48``: the racks at ``rows`` whose data stopped, with since when."""
    parts = []
    for r in rows[:MAX_NAMED]:
        seen = float(fleet.last_data[r]) if r < len(fleet.last_data) else math.nan
        since = f"no data since {format_clock(seen)}" if math.isfinite(seen) else "no data yet"
        parts.append(f"{table.racks[r]} {table.state[r]}, {since}")
    more = len(rows) - MAX_NAMED
    return "; ".join(parts) + (f"; +{more} more" if more > 0 else "")


def racks_forecast(fc: Forecast, fleet: FleetState, table: FleetTable, rows: list[int]) -> Forecast:
    """``fc`` (the node-level forecast) replaced by the projection of the racks at ``rows``: stale where
    any of them has no data now; else the sum of their published projections (none while one has none
    yet: its own forecast still warms up, or its exporter publishes none), VALID when each projects
    VALID, INVALID when one does."""
    stopped = [r for r in rows if table.state[r] != "up"]
    if stopped:
        note = stopped_note(fleet, table, stopped)
        return dataclasses.replace(
            fc, tokens_per_s=None, end_s=None, rules=(), valid=None, decided="", warming_up=False, stale=note
        )
    projected = table.projected_tokens_per_s[rows]
    verdicts = table.projected_valid[rows]
    band = None
    if len(rows) and np.isfinite(projected).all():
        band = Band(float(projected.sum()), math.nan, math.nan)
    valid = None
    if len(rows) and (verdicts == 0).any():
        valid = False
    elif len(rows) and (verdicts == 1).all():
        valid = True
    return dataclasses.replace(
        fc,
        tokens_per_s=band,
        end_s=None,
        rules=(),
        valid=valid,
        decided="",
        warming_up=False,
        stale="",
    )
