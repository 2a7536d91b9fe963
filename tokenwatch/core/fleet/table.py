"""The fleet at a glance: one row per rack, what the fleet board draws (a run of more than one rack).

A fleet table comes from either of two places, and front ends cannot tell which: the node-level state of
a run that knows every node (the simulator's ``--racks``, a replay, SSH to every node), grouped by rack;
or rack-level figures a Prometheus server aggregated for us (``sum by (rack)``, quantiles, worst nodes),
when the fleet is watched through the engine it already runs.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tokenwatch.base.events import FloatArray, IntArray

RACK_STATES: tuple[str, ...] = ("up", "stale", "down")  # down: its source is gone (an exporter died)


@dataclass(frozen=True, slots=True, eq=False)
class FleetTable:
    """Columnar, one entry per rack in rack order. NaN (or "") = not known for that rack.

    Throughput in tokens/s over the core's window; ``spread_pct`` is the spread of the rack's running
    nodes ((max - min) / min of their measured means, %); ``power_w`` the rack's fresh GPUs' power.
    ``projected_valid`` is the rack's projected MLPerf verdict (1 VALID, 0 INVALID, NaN undecided or no
    verdict); ``worst_node`` the rack's slowest running node against the rack's median
    (``worst_delta_pct`` < 0) and ``worst_cause`` the cause hint for it ("" when none is known).
    ``first_node`` / ``node_count``: which of the run's nodes (indexes into ``RunInfo.nodes``) are the
    rack's, for drilling down (``node_count`` 0 where the fleet is known only rack by rack).
    ``data_age_s``: seconds since each rack last came with figures (not down; NaN: never), where the fleet
    is known rack by rack from a server that may stop answering; None for a table made from the nodes.
    """

    racks: tuple[str, ...]
    state: tuple[str, ...]  # one of RACK_STATES
    nodes_total: IntArray
    nodes_up: IntArray  # running or finished
    gpus: IntArray
    tokens_per_s: FloatArray
    per_gpu_tokens_per_s: FloatArray
    spread_pct: FloatArray
    power_w: FloatArray
    tokens_per_joule: FloatArray
    projected_valid: FloatArray
    projected_tokens_per_s: FloatArray
    worst_node: tuple[str, ...]
    worst_delta_pct: FloatArray
    worst_cause: tuple[str, ...]
    first_node: IntArray
    node_count: IntArray
    data_age_s: FloatArray | None = None

    def __len__(self) -> int:
        return len(self.racks)

    def index(self, rack: str) -> int:
        return self.racks.index(rack)

    def projection_stale(self, i: int) -> bool:
        """Whether rack ``i``'s data stopped (stale or down) with no projection: said "stale" on every
        surface, never a figure extrapolated from its last."""
        return self.state[i] != "up" and bool(np.isnan(self.projected_valid[i]))

    def nodes_of(self, i: int) -> range:
        """The run's node indexes of rack ``i`` (empty where the fleet is known only rack by rack)."""
        start = int(self.first_node[i])
        return range(start, start + int(self.node_count[i]))
