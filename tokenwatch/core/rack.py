"""The rack core's facade: events in, immutable answers out. Front ends talk to this and nothing else.

All state lives in one :class:`RackState` made when the run starts; ingestion, ticks, alert rules,
snapshots and histories are functions of it. Time only moves with events: before an event at ``t`` is
applied, every tick before ``t`` is sampled and every interval callback (:meth:`RackCore.every`) due
before ``t`` is called, so a callback sees the state exactly as of its boundary, live or in a replay.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tokenwatch.base.events import (
    MAX_RUN_GPUS,
    MAX_RUN_TIME_S,
    Event,
    Heartbeat,
    LatencyMetric,
    Notice,
    RunEnded,
    RunStarted,
)
from tokenwatch.core._ingest import apply_event, say_notice
from tokenwatch.core._new_state import new_state
from tokenwatch.core._state import RackState, SkipLog
from tokenwatch.core._summarize_state import summarize_state
from tokenwatch.core._ticks import MAX_FILL_TICKS, sample, sample_steps_before, sample_ticks_before
from tokenwatch.core.alerts import Alert, AlertLog
from tokenwatch.core.config import CoreConfig
from tokenwatch.core.fleet._rack_view import rack_state
from tokenwatch.core.fleet._snapshot import with_rack_row
from tokenwatch.core.latency_buckets import DEFAULT_BOUNDS_S, NodeLatencyBuckets, node_latency_buckets
from tokenwatch.core.node_history import NodeHistory, node_history
from tokenwatch.core.rack_snapshot import build_snapshot, empty_snapshot
from tokenwatch.core.run_history import RunHistory, run_history
from tokenwatch.core.summary import RunSummary

if TYPE_CHECKING:
    from tokenwatch.core._run_info import RunInfo
    from tokenwatch.core.baseline.reference import Baseline
    from tokenwatch.core.snapshot import RackSnapshot


@dataclass(slots=True)
class _IntervalCallback:
    interval_s: float
    callback: Callable[[float], None]
    next_k: int = 1

    def fire_before(self, t: float, max_gap_s: float) -> None:
        """Call back for every boundary k*interval strictly before ``t`` not yet reported; of a gap longer
        than ``max_gap_s`` (one the ticks do not back-fill either) only the boundaries at its end."""
        if t - self.next_k * self.interval_s > max_gap_s:
            self.next_k = max(self.next_k, math.ceil((t - max_gap_s) / self.interval_s))
        while self.next_k * self.interval_s < t:
            self.callback(self.next_k * self.interval_s)
            self.next_k += 1


class RackCore:
    """Ingests :mod:`tokenwatch.base.events`; answers with snapshots, histories, latency buckets and
    summaries."""

    def __init__(self, config: CoreConfig | None = None) -> None:
        self.config = config or CoreConfig()
        self._alerts = AlertLog(self.config.alert_log_size)
        self._skips = SkipLog(self._alerts)
        # What sources said while no run could start (a fleet's server unreachable, so no nodes to start
        # a run of): shown by the snapshot before the run, so the screen says why it waits.
        self._said_before_run = AlertLog(self.config.alert_log_size)
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

    @property
    def alerts_raised(self) -> int:
        """How many alerts (starts, clearings, one-off events) the run has raised so far."""
        return self._alerts.total

    def active_alerts(self) -> tuple[Alert, ...]:
        """The conditions holding now (started, not cleared), newest first."""
        return self._alerts.active_newest_first()

    def alerts_since(self, raised: int) -> tuple[Alert, ...]:
        """The alerts raised after the first ``raised`` of them, oldest first (what a notifier has not
        seen yet; at most the alert log's size of them)."""
        return self._alerts.since(raised)

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
            if len(ev.nodes) * ev.gpus_per_node > MAX_RUN_GPUS:  # readers refuse it; the core holds too
                self._skips.skip(
                    0.0 if state is None else state.now, f"a run start of more than {MAX_RUN_GPUS:,} GPUs"
                )
            elif not ev.nodes:  # nothing to show or count: never a run of no nodes (readers refuse it too)
                self._skips.skip(0.0 if state is None else state.now, "a run start that names no nodes")
            elif state is None:
                self._state = new_state(ev, self.config, self._alerts, self._skips)
            else:
                self._skips.skip(state.now, "a second run start in one stream")
            return
        if state is None:
            if isinstance(ev, Notice):
                say_notice(self._said_before_run, ev)
                say_notice(self._alerts, ev)  # and in the run's log, once one starts
                return
            self._skips.skip(0.0, f"{type(ev).__name__} before the run start")
            return
        if not 0 <= ev.t <= MAX_RUN_TIME_S:  # NaN fails too
            self._skips.skip(
                state.now, f"{type(ev).__name__} with a run time outside 0..{MAX_RUN_TIME_S:,.0f} s: {ev.t!r}"
            )
            return
        self.advance(ev.t)
        if isinstance(ev, RunEnded):
            sample(state, ev.t)
            state.ended, state.end_reason = True, ev.reason
        elif not isinstance(ev, Heartbeat):
            apply_event(state, ev)
        state.version += 1

    def advance(self, t: float) -> None:
        """Move run time to ``t``: sample every tick before it, then call the interval callbacks due."""
        state = self._state
        if state is None or not math.isfinite(t):
            return
        sample_ticks_before(state, t)
        max_gap_s = MAX_FILL_TICKS * self.config.tick_s
        for callback in self._callbacks:
            callback.fire_before(t, max_gap_s)

    def advance_steps(self, t: float) -> Generator[None, None, None]:
        """:meth:`advance` in steps, for a caller on an event loop to let the loop in at each: it yields
        after every tick and between a fleet's racks at a verdict tick (64 racks' forecasts are one long
        piece of work otherwise). Between steps a snapshot is whole, but for the fleet's forecasts, which
        stay the last tick's until every rack's new one is made."""
        state = self._state
        if state is None or not math.isfinite(t):
            return
        yield from sample_steps_before(state, t)
        max_gap_s = MAX_FILL_TICKS * self.config.tick_s
        for callback in self._callbacks:
            callback.fire_before(t, max_gap_s)

    def advance_toward(self, t: float, max_ticks: int) -> bool:
        """Advance at most ``max_ticks`` ticks towards ``t``; True once an event at ``t`` may be ingested.

        Filling a long gap in run time is many ticks (and interval callbacks) of work in one event:
        callers on an event loop advance in slices and yield in between, so Ctrl-C and the screen get
        in. A gap the core does not back-fill (see ``MAX_FILL_TICKS``) is one step anyway."""
        state = self._state
        if state is None or not math.isfinite(t):
            return True
        behind = t / self.config.tick_s - state.ticks_sampled
        if behind <= max_ticks or behind > MAX_FILL_TICKS:
            return True
        self.advance((state.ticks_sampled + max_ticks) * self.config.tick_s)
        return False

    # ------------------------------------------------------------------ answers
    def snapshot(self, now: float | None = None) -> RackSnapshot:
        """An immutable view at ``now`` (default: the latest event time). Never mutates the core."""
        state = self._state
        if state is None:
            return empty_snapshot(0.0 if now is None else now, self._said_before_run)
        return build_snapshot(state, state.now if now is None else now)

    def history(self) -> RunHistory:
        """The whole run as downsampled series, and the alert log. Raises ValueError before the run start."""
        if self._state is None:
            raise ValueError("no run in the stream: the recording holds no run start")
        return run_history(self._state)

    def node_history(self, node: str, last: int | None = None, rack: str | None = None) -> NodeHistory | None:
        """One node's recent full-resolution series (None for a node the run does not have). With
        ``rack`` (a fleet's), its share is of that rack's throughput, as on the rack's own dashboard."""
        state = self._state
        if state is None or node not in state.index:
            return None
        r = self._rack_index(rack) if rack is not None else None
        return node_history(state if r is None else rack_state(state, r, for_forecast=True), node, last)

    # ------------------------------------------------------------------ a fleet's racks
    @property
    def racks(self) -> tuple[str, ...]:
        """The racks of a run of more than one rack, in node order (``()`` for one rack)."""
        state = self._state
        return () if state is None or state.fleet is None else state.fleet.groups.names

    def rack_snapshot(self, rack: str, now: float | None = None) -> RackSnapshot | None:
        """Rack ``rack`` of a fleet as the snapshot of a run of its nodes alone (what its dashboard
        draws: :mod:`tokenwatch.core.fleet._rack_view`); None for a rack the run does not have."""
        state = self._state
        r = self._rack_index(rack)
        if state is None or r is None:
            return None
        at = state.now if now is None else now
        snap = build_snapshot(rack_state(state, r), at)
        # A fleet known rack by rack: the rack's figures are its row's on the board.
        return snap if state.fleet_figures is None else with_rack_row(snap, state.fleet_figures, rack, at)

    def _rack_index(self, rack: str) -> int | None:
        racks = self.racks
        return racks.index(rack) if rack in racks else None

    def latency_buckets(
        self, bounds_s: Sequence[float] = DEFAULT_BOUNDS_S
    ) -> dict[LatencyMetric, NodeLatencyBuckets]:
        """Per-node cumulative latency counts at fixed bounds (the exporter's histograms)."""
        return {} if self._state is None else node_latency_buckets(self._state, bounds_s)

    def summary(self, stopped: str | None = None) -> RunSummary:
        """The run summary in the published rack-table form. Raises ValueError before the run start.
        ``stopped``: what the engineer stopped before the run's end (``replay``, ``demo``), said instead
        of a missing run end."""
        if self._state is None:
            raise ValueError("no run in the stream: the recording holds no run start")
        return summarize_state(self._state, stopped)

    def __getstate__(self) -> dict[str, object]:
        """Pickled (a replay's compact keyframe), a core carries its state, not its interval callbacks:
        they belong to this process's observers, like :meth:`clone`'s."""
        return {**self.__dict__, "_callbacks": []}

    def as_baseline(self, name: str, source: str) -> Baseline:
        """The run so far, frozen as a reference for another run (``--baseline``). Raises ValueError before
        the run start."""
        if self._state is None:
            raise ValueError("no run in the stream: the recording holds no run start")
        from tokenwatch.core.baseline.freeze import freeze_state

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
