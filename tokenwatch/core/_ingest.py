"""Routing one data event to the handlers that take it (time has already been advanced to its ``t``).

Each handler writes its own part of a :class:`RackState`: the engine's node-level part
(:mod:`tokenwatch.core._node_events`), the verdict's (``state.verdict``,
:mod:`tokenwatch.core.verdict._ingest`) or the fleet's (``state.fleet_figures``,
:mod:`tokenwatch.core.fleet._ingest`). The router reaches into none of them: :data:`ROUTES` says, per
event type, which handlers take it and in what order.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

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
from tokenwatch.core.fleet._ingest import on_rack_figures
from tokenwatch.core.verdict._ingest import apply_detail, apply_limit_counts, count_latency

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
Handler = Callable[[RackState, Any], None]


def on_notice(state: RackState, ev: Notice) -> None:
    say_notice(state.alerts, ev)


# Event type -> its handlers, in order. A latency batch is the engine's (the node's histograms) and the
# verdict's (counted against the node's limit); every other type has one owner.
ROUTES: dict[type, tuple[Handler, ...]] = {
    GpuBatch: (on_gpu_batch,),
    ProgressBatch: (on_progress_batch,),
    GpuSample: (on_gpu_sample,),
    Progress: (on_progress,),
    LatencyBatch: (on_latency, count_latency),
    NodeStatus: (on_status,),
    LogLine: (on_log_line,),
    LoadGenDetail: (apply_detail,),
    LatencyLimitCounts: (apply_limit_counts,),
    RackFiguresBatch: (on_rack_figures,),
    EngineQueue: (on_engine_queue,),
    Notice: (on_notice,),
}


def apply_event(state: RackState, ev: DataEvent) -> None:
    """Hand ``ev`` to each handler its type is routed to (an unknown type: skipped, said once)."""
    handlers = ROUTES.get(type(ev))
    if handlers is None:
        state.skips.skip(state.now, f"an event of a type the core does not take: {type(ev).__name__}")
        return
    for handler in handlers:
        handler(state, ev)


def say_notice(alerts: AlertLog, ev: Notice) -> None:
    """A source's notice as one line of the alert log (an error is critical)."""
    kind = "warning" if ev.level == "warning" else ("error" if ev.level == "error" else "info")
    alerts.event(ev.t, ev.node, kind, ev.message, "critical" if kind == "error" else kind)
