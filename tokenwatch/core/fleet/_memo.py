"""What a run of more than one rack keeps for its fleet table between ticks
(:mod:`tokenwatch.core.fleet._board`).

Its racks (grouped once, at the run's start) and each rack's MLPerf forecast as of the latest verdict
tick: 64 forecasts cost more than a whole refresh of the board, so they are made every
``verdict_interval_s`` of run time, like the rack-wide forecast's record, not at every snapshot. Kept in
the state, so a replay (and a replay's keyframe) reproduces them exactly.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from tokenwatch.base.events import FloatArray
from tokenwatch.core._ring import DownsampledSeries
from tokenwatch.core._run_info import RunInfo
from tokenwatch.core.alerts import AlertLog
from tokenwatch.core.config import CoreConfig
from tokenwatch.core.fleet.groups import RackPlaces
from tokenwatch.core.fleet.rack_groups import RackGroups, rack_groups
from tokenwatch.core.verdict.view import (
    HISTORY_COLUMNS,  # the module, not the wing's face: no cycle via the state
)

_HISTORY_POINTS = 512  # as the rack-wide forecast's record


@dataclass(slots=True, eq=False)
class FleetMemo:
    """Per rack (in ``groups`` order): the projected verdict (1 VALID, 0 INVALID, NaN undecided or not
    yet) and tokens/s at the latest verdict tick, and the forecast over time (``history``: (racks,
    ``HISTORY_COLUMNS``) per point, what a rack's own verdict panel draws). ``places``: where the racks
    stand (their sites and rows), for the snapshot's groups."""

    groups: RackGroups
    valid: FloatArray
    tokens_per_s: FloatArray
    history: DownsampledSeries
    places: RackPlaces
    next_due_s: float = 0.0


def new_fleet_memo(run: RunInfo, config: CoreConfig, alerts: AlertLog, t: float) -> FleetMemo | None:
    """None for a run of one rack. A ``racks`` label list that cannot be used is said once, as a
    warning, and the run is grouped by size instead."""
    groups = rack_groups(run)
    if groups.problem:
        alerts.event(t, None, "warning", f"racks grouped by size: {groups.problem}")
    if len(groups) < 2:
        return None
    racks = len(groups)
    return FleetMemo(
        groups=groups,
        valid=np.full(racks, math.nan),
        tokens_per_s=np.full(racks, math.nan),
        history=DownsampledSeries(
            _HISTORY_POINTS, (racks, len(HISTORY_COLUMNS)), config.verdict_interval_s, "last"
        ),
        places=RackPlaces(run.meta),
    )
