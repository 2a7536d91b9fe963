"""Applying one data event to a :class:`RackState` (time has already been advanced to the event's ``t``):
the node-level handlers are the engine's own (:mod:`tokenwatch.core._node_events`).
"""

from __future__ import annotations

from tokenwatch.base.events import (
    EngineQueue,
    GpuBatch,
    GpuSample,
    LatencyBatch,
    LatencyLimitCounts,
    LoadGenDetail,
    LogLine,
    NodeStatus,
    Notice,
    Progress,
    ProgressBatch,
    RackFiguresBatch,
)
from tokenwatch.core._node_events import (
    on_engine_queue,
    on_gpu_batch,
    on_gpu_sample,
    on_latency,
    on_log_line,
    on_progress,
    on_progress_batch,
    on_status,
)
from tokenwatch.core._state import RackState
from tokenwatch.core.alerts import AlertLog
from tokenwatch.core.fleet._state import ingest_rack_figures, new_fleet_state
from tokenwatch.core.verdict._ingest import apply_detail, apply_limit_counts

DataEvent = (
    GpuBatch
    | ProgressBatch
    | GpuSample
    | Progress
    | LatencyBatch
    | NodeStatus
    | LogLine
    | Notice
    | LoadGenDetail
    | LatencyLimitCounts
    | RackFiguresBatch
    | EngineQueue
)


def apply_event(state: RackState, ev: DataEvent) -> None:
    """Dispatch on the event type (batches first: they are the common case)."""
    if isinstance(ev, GpuBatch):
        on_gpu_batch(state, ev)
    elif isinstance(ev, ProgressBatch):
        on_progress_batch(state, ev)
    elif isinstance(ev, GpuSample):
        on_gpu_sample(state, ev)
    elif isinstance(ev, Progress):
        on_progress(state, ev)
    elif isinstance(ev, LatencyBatch):
        on_latency(state, ev)
    elif isinstance(ev, NodeStatus):
        on_status(state, ev)
    elif isinstance(ev, LogLine):
        on_log_line(state, ev)
    elif isinstance(ev, LoadGenDetail):
        apply_detail(state, ev)
    elif isinstance(ev, LatencyLimitCounts):
        apply_limit_counts(state, ev)
    elif isinstance(ev, RackFiguresBatch):
        _rack_figures(state, ev)
    elif isinstance(ev, EngineQueue):
        on_engine_queue(state, ev)
    else:
        say_notice(state.alerts, ev)


def say_notice(alerts: AlertLog, ev: Notice) -> None:
    """A source's notice as one line of the alert log (an error is critical)."""
    kind = "warning" if ev.level == "warning" else ("error" if ev.level == "error" else "info")
    alerts.event(ev.t, ev.node, kind, ev.message, "critical" if kind == "error" else kind)


def _rack_figures(state: RackState, ev: RackFiguresBatch) -> None:
    """A fleet's rack-level figures (a fleet watched through Prometheus): kept beside the node state."""
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
