"""The fleet wing's handler of the events it takes: a fleet's rack-level figures (:class:`RackFiguresBatch`,
a fleet watched through Prometheus), kept in the wing's own part of the state (``RackState.fleet_figures``),
which the wing makes at the first batch: a run without one has none (``None``), which tells every reader
that its racks are known only from their nodes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tokenwatch.core.fleet._state import ingest_rack_figures, new_fleet_state

if TYPE_CHECKING:
    from tokenwatch.base.events import RackFiguresBatch
    from tokenwatch.core._state import RackState


def on_rack_figures(state: RackState, ev: RackFiguresBatch) -> None:
    """The batch's racks take its figures (the fleet's part made, sized from the run, at the first one)."""
    if state.fleet_figures is None:
        cfg = state.config
        state.fleet_figures = new_fleet_state(
            state.run.meta,
            history_points=cfg.history_points,
            tick_s=cfg.tick_s,
            stale_after_s=cfg.stale_after_s,
            nodes=len(state.run.nodes),
        )
    ingest_rack_figures(state.fleet_figures, ev)
