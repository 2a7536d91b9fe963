"""The rack core's facade: events in, immutable answers out. Front ends talk to this and nothing else.

All state lives in one :class:`RackState` made when the run starts; ingestion, ticks, alert rules,
snapshots and histories are functions of it. Time only moves with events: before an event at ``t`` is
applied, every tick before ``t`` is sampled and every interval callback (:meth:`RackCore.every`) due
before ``t`` is called, so a callback sees the state exactly as of its boundary, live or in a replay.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tokenwatch.core.alerts import AlertLog
from tokenwatch.core.config import CoreConfig
from tokenwatch.core.ingest import apply_event
from tokenwatch.core.latency_buckets import DEFAULT_BOUNDS_S, NodeLatencyBuckets, node_latency_buckets
from tokenwatch.core.node_history import NodeHistory, node_history
from tokenwatch.core.rack_snapshot import build_snapshot, empty_snapshot
from tokenwatch.core.run_history import RunHistory, run_history
from tokenwatch.core.state import RackState, SkipLog, new_state
from tokenwatch.core.summary import RunSummary, summarize_state
from tokenwatch.core.ticks import sample, sample_ticks_before
from tokenwatch.events import Event, Heartbeat, LatencyMetric, RunEnded, RunStarted

if TYPE_CHECKING:
    from tokenwatch.core.baseline import Baseline
    from tokenwatch.core.run_info import RunInfo
    from tokenwatch.core.snapshot import RackSnapshot


@dataclass(slots=True)
class _IntervalCallback:
    interval_s: float
    callback: Callable[[float], None]
    next_k: int = 1

    def fire_before(self, t: float) -> None:
        """Call back for every boundary k*interval strictly before ``t`` not yet reported."""
        while self.next_k * self.interval_s < t:
            self.callback(self.next_k * self.interval_s)
            self.next_k += 1


class RackCore:
    """Ingests :mod:`tokenwatch.events`; answers with snapshots, histories, latency buckets and summaries."""

    def __init__(self, config: CoreConfig | None = None) -> None:
        self.config = config or CoreConfig()
        self._alerts = AlertLog(self.config.alert_log_size)
        self._skips = SkipLog(self._alerts)
        self._state: RackState | None = None
        self._callbacks: list[_IntervalCallback] = []

    # ------------------------------------------------------------------ what the run is
    @property
    def state(self) -> RackState:
        """The run's state, for the core's own functions and tests. Raises before the run start."""
        if self._state is None:
            raise RuntimeError("the run has not started: no state yet")
        return self._state

    @property
    def started(self) -> bool:
        return self._state is not None

    @property
    def run(self) -> RunInfo | None:
        return None if self._state is None else self._state.run

    @property
    def now(self) -> float:
        """Run time of the latest event or tick (s)."""
        return 0.0 if self._state is None else self._state.now

    @property
    def ended(self) -> bool:
        return self._state is not None and self._state.ended

    @property
    def end_reason(self) -> str:
        return "" if self._state is None else self._state.end_reason

    @property
    def skipped_events(self) -> int:
        return self._skips.count

    # ------------------------------------------------------------------ events in
    def every(self, interval_s: float, callback: Callable[[float], None]) -> None:
        """``callback(T)`` at each multiple T of ``interval_s`` of run time, once every event before T
        is in (and none after it): what headless lines and JSONL snapshots are taken at."""
        if not interval_s > 0:
            raise ValueError(f"interval must be positive, not {interval_s!r}")
        first = 1 if self._state is None else max(1, math.floor(self._state.now / interval_s) + 1)
        self._callbacks.append(_IntervalCallback(interval_s, callback, first))

    def ingest(self, ev: Event) -> None:
        state = self._state
        if isinstance(ev, RunStarted):
            if state is None:
                self._state = new_state(ev, self.config, self._alerts, self._skips)
            else:
                self._skips.skip(state.now, "a second run start in one stream")
            return
        if state is None:
            self._skips.skip(0.0, f"{type(ev).__name__} before the run start")
            return
        if not (math.isfinite(ev.t) and ev.t >= 0):
            self._skips.skip(
                state.now, f"{type(ev).__name__} with a run time that is not a finite, non-negative number"
            )
            return
        self.advance(ev.t)
        if isinstance(ev, RunEnded):
            sample(state, ev.t)
            state.ended, state.end_reason = True, ev.reason
        elif not isinstance(ev, Heartbeat):
            apply_event(state, ev)

    def advance(self, t: float) -> None:
        """Move run time to ``t``: sample every tick before it, then call the interval callbacks due."""
        state = self._state
        if state is None or not math.isfinite(t):
            return
        sample_ticks_before(state, t)
        for callback in self._callbacks:
            callback.fire_before(t)

    # ------------------------------------------------------------------ answers
    def snapshot(self, now: float | None = None) -> RackSnapshot:
        """An immutable view at ``now`` (default: the latest event time). Never mutates the core."""
        state = self._state
        if state is None:
            return empty_snapshot(0.0 if now is None else now)
        return build_snapshot(state, state.now if now is None else now)

    def history(self) -> RunHistory:
        """The whole run as downsampled series, and the alert log. Raises ValueError before the run start."""
        if self._state is None:
            raise ValueError("no run in the stream: the recording holds no run start")
        return run_history(self._state)

    def node_history(self, node: str, last: int | None = None) -> NodeHistory | None:
        """One node's recent full-resolution series (None for a node the run does not have)."""
        state = self._state
        if state is None or node not in state.index:
            return None
        return node_history(state, node, last)

    def latency_buckets(
        self, bounds_s: Sequence[float] = DEFAULT_BOUNDS_S
    ) -> dict[LatencyMetric, NodeLatencyBuckets]:
        """Per-node cumulative latency counts at fixed bounds (the exporter's histograms)."""
        return {} if self._state is None else node_latency_buckets(self._state, bounds_s)

    def summary(self) -> RunSummary:
        """The run summary in the published rack-table form. Raises ValueError before the run start."""
        if self._state is None:
            raise ValueError("no run in the stream: the recording holds no run start")
        return summarize_state(self._state)

    def as_baseline(self, name: str, source: str) -> Baseline:
        """The run so far, frozen as a reference for another run (``--baseline``). Raises ValueError before
        the run start."""
        if self._state is None:
            raise ValueError("no run in the stream: the recording holds no run start")
        from tokenwatch.core.baseline_freeze import freeze_state

        return freeze_state(self._state, name, source)

    def clone(self) -> RackCore:
        """An independent copy of the state, without the interval callbacks (a replay's keyframe)."""
        twin = RackCore(self.config)
        if self._state is not None:
            twin._state = copy.deepcopy(self._state)
            twin._alerts, twin._skips = twin._state.alerts, twin._state.skips
        else:
            twin._skips.count = self._skips.count
        return twin
