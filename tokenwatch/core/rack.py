"""The rack core: consumes events, keeps bounded state, answers with immutable snapshots.

Time only moves with events: at every ``tick_s`` of run time the core samples its state into
bounded series and evaluates alerts, so a replay of the same events reproduces every figure
exactly (``snapshot()`` itself never mutates anything).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from tokenwatch.core.alert_rules import AlertRules
from tokenwatch.core.alerts import AlertLog
from tokenwatch.core.batch_layout import BatchLayout
from tokenwatch.core.config import GPU_SERIES_METRICS, STATE_CODE, CoreConfig
from tokenwatch.core.histogram import LogHistogram
from tokenwatch.core.ring import DownsampledSeries, RecentRing
from tokenwatch.core.snapshot import RunInfo
from tokenwatch.events import (
    GPU_METRICS,
    LATENCY_METRICS,
    NODE_STATES,
    Event,
    GpuBatch,
    GpuSample,
    Heartbeat,
    LatencyBatch,
    LogLine,
    NodeStatus,
    Notice,
    Progress,
    ProgressBatch,
    RunEnded,
    RunStarted,
)

if TYPE_CHECKING:
    from tokenwatch.core.snapshot import RackSnapshot

_SERIES_COLS = np.array([GPU_METRICS.index(m) for m in GPU_SERIES_METRICS])
_POWER = GPU_METRICS.index("power_w")
_SM_CLOCK = GPU_METRICS.index("sm_clock_mhz")
_MAX_FILL_TICKS = 100_000  # a time jump larger than this is not back-filled tick by tick


class RackCore:
    """Ingests :mod:`tokenwatch.events`; see :meth:`snapshot` for what it answers."""

    def __init__(self, config: CoreConfig | None = None) -> None:
        self.config = config or CoreConfig()
        self.run: RunInfo | None = None
        self.now = 0.0
        self.ended = False
        self.end_reason = ""
        self.alerts = AlertLog(self.config.alert_log_size)
        self.skipped_events = 0
        self._warned_unknown: set[str] = set()

    # ------------------------------------------------------------------ setup
    def _start(self, ev: RunStarted) -> None:
        cfg = self.config
        self.run = RunInfo(
            ev.name,
            ev.scenario,
            ev.source,
            ev.nodes,
            ev.gpus_per_node,
            ev.nominal_duration_s,
            ev.total_samples,
            ev.wall_epoch,
            dict(ev.meta),
        )
        n, g = len(ev.nodes), ev.gpus_per_node
        self.index = {name: i for i, name in enumerate(ev.nodes)}
        self.now = ev.t
        self.tokens = np.zeros(n, np.int64)
        self.samples = np.zeros(n, np.int64)
        self.prompt_tokens = np.zeros(n, np.int64)
        self._raw = np.zeros((3, n), np.int64)  # last raw counters: tokens, samples, prompt
        self._offset = np.zeros((3, n), np.int64)  # added on counter restarts
        self.t_first = np.full(n, np.nan)
        self.t_last_change = np.full(n, np.nan)
        self.last_seen = np.full(n, np.nan)
        self.explicit_state = np.zeros(n, np.int8)
        self.state_reason = ["waiting for data"] * n
        self.gpu_values = np.full((n, g, len(GPU_METRICS)), np.nan)
        self.gpu_throttle = np.zeros((n, g), np.uint64)
        self.sm_clock_max = np.full((n, g), np.nan)
        self.energy_j = 0.0
        self.latency = {m: [LogHistogram() for _ in range(n)] for m in LATENCY_METRICS}
        self.rack_latency = {m: LogHistogram() for m in LATENCY_METRICS}
        self.latency_max = dict.fromkeys(LATENCY_METRICS, math.nan)
        self.log_lines: list[list[tuple[float, str]]] = [[] for _ in range(n)]
        self.ticks_sampled = 0
        self._last_sample_t = ev.t
        r = cfg.recent_points
        self.recent_tokens = RecentRing(r, (n,))
        self.recent_samples = RecentRing(r, (n,))
        self.recent_power = RecentRing(r, (n,))
        h = cfg.history_points
        self.history_tokens = DownsampledSeries(h, (n,), cfg.tick_s, "last")
        self.history_power = DownsampledSeries(h, (n,), cfg.tick_s, "mean")
        # Node state codes over the run (the newest in each point), so a history reader can tell a silent
        # node's carried-forward telemetry from fresh readings.
        self.history_state = DownsampledSeries(h, (n,), cfg.tick_s, "last")
        # Per-GPU series get what is left of a fixed float budget, so 4,608 GPUs still fit.
        per_point = max(1, n * g * len(GPU_SERIES_METRICS))
        gpu_recent = int(min(r, max(16, cfg.gpu_series_floats // 2 // per_point)))
        gpu_hist = int(min(h, max(16, cfg.gpu_series_floats // 2 // per_point)))
        self.recent_gpu = RecentRing(gpu_recent, (n, g, len(GPU_SERIES_METRICS)))
        self.history_gpu = DownsampledSeries(
            gpu_hist - gpu_hist % 2, (n, g, len(GPU_SERIES_METRICS)), cfg.tick_s, "mean"
        )
        self.rules = AlertRules(self, n, g)
        self._layout = BatchLayout(n, g)

    @property
    def started(self) -> bool:
        return self.run is not None

    # ---------------------------------------------------------------- ingest
    def ingest(self, ev: Event) -> None:
        if isinstance(ev, RunStarted):
            if self.run is None:
                self._start(ev)
            else:
                self._skip("a second run start in one stream")
            return
        if self.run is None:
            self._skip(f"{type(ev).__name__} before the run start")
            return
        if not (math.isfinite(ev.t) and ev.t >= 0):
            self._skip(f"{type(ev).__name__} with a run time that is not a finite, non-negative number")
            return
        self.advance(ev.t)
        if isinstance(ev, GpuBatch):
            self._gpu_batch(ev)
        elif isinstance(ev, ProgressBatch):
            self._progress_batch(ev)
        elif isinstance(ev, GpuSample):
            self._gpu_sample(ev)
        elif isinstance(ev, Progress):
            self._progress(ev)
        elif isinstance(ev, LatencyBatch):
            self._latency(ev)
        elif isinstance(ev, NodeStatus):
            self._status(ev)
        elif isinstance(ev, LogLine):
            self._log_line(ev)
        elif isinstance(ev, Notice):
            kind = "warning" if ev.level == "warning" else ("error" if ev.level == "error" else "info")
            self.alerts.event(ev.t, ev.node, kind, ev.message, "critical" if kind == "error" else kind)
        elif isinstance(ev, RunEnded):
            self._sample(ev.t)
            self.ended, self.end_reason = True, ev.reason
        elif isinstance(ev, Heartbeat):
            pass

    def _skip(self, why: str) -> None:
        self.skipped_events += 1
        if why not in self._warned_unknown:
            self._warned_unknown.add(why)
            self.alerts.event(self.now, None, "warning", f"skipped event: {why}")

    def _node(self, name: str) -> int | None:
        i = self.index.get(name)
        if i is None:
            self._skip(f"unknown node {name!r}")
        return i

    def _seen(self, i: int | np.ndarray, t: float) -> None:
        self.last_seen[i] = np.fmax(self.last_seen[i], t)

    def _gpu_sample(self, ev: GpuSample) -> None:
        i = self._node(ev.node)
        if i is None:
            return
        if not 0 <= ev.gpu < self.gpu_values.shape[1]:
            self._skip(f"GPU index {ev.gpu} outside 0..{self.gpu_values.shape[1] - 1}")
            return
        self.gpu_values[i, ev.gpu] = [getattr(ev, m) for m in GPU_METRICS]
        self.gpu_throttle[i, ev.gpu] = ev.throttle_reasons
        self.sm_clock_max[i, ev.gpu] = np.fmax(self.sm_clock_max[i, ev.gpu], ev.sm_clock_mhz)
        self._seen(i, ev.t)

    def _gpu_batch(self, ev: GpuBatch) -> None:
        ni, gi = ev.node_index, ev.gpu
        node = self._layout.one_node(ni, gi)
        if node is not None:  # one node's GPUs in order: row slices, no gathers
            k = len(gi)
            self.gpu_values[node, :k] = ev.values
            self.gpu_throttle[node, :k] = ev.throttle_reasons
            np.fmax(self.sm_clock_max[node, :k], ev.values[:, _SM_CLOCK], out=self.sm_clock_max[node, :k])
            if not self.last_seen[node] >= ev.t:  # NaN (never seen) included
                self.last_seen[node] = ev.t
            return
        if self._layout.whole_rack(ni, gi):
            shape = self.gpu_values.shape
            self.gpu_values[:] = ev.values.reshape(shape)
            self.gpu_throttle[:] = ev.throttle_reasons.reshape(shape[:2])
            np.fmax(self.sm_clock_max, self.gpu_values[:, :, _SM_CLOCK], out=self.sm_clock_max)
            np.fmax(self.last_seen, ev.t, out=self.last_seen)
            return
        ok = (ni >= 0) & (ni < len(self.index)) & (gi >= 0) & (gi < self.gpu_values.shape[1])
        if not ok.all():
            self._skip("GPU batch rows outside the run's nodes or GPUs")
            ni, gi, values, reasons = ni[ok], gi[ok], ev.values[ok], ev.throttle_reasons[ok]
        else:
            values, reasons = ev.values, ev.throttle_reasons
        self.gpu_values[ni, gi] = values
        self.gpu_throttle[ni, gi] = reasons
        self.sm_clock_max[ni, gi] = np.fmax(self.sm_clock_max[ni, gi], values[:, _SM_CLOCK])
        self._seen(ni, ev.t)

    def _apply_counters(self, i: np.ndarray | slice, t: float, raw: np.ndarray) -> None:
        """raw: (3, k) new raw counters (tokens, samples, prompt) of nodes ``i`` (a slice = all, in order).

        A counter below its last value restarted (the source started over, or a reconnect re-read it
        from zero): what it had counted is kept as an offset, so nothing is lost or counted twice.
        """
        prev = self._raw[:, i]
        restarted = raw < prev
        if restarted.any():
            self._offset[:, i] += np.where(restarted, prev, 0)
        self._raw[:, i] = raw
        totals = self._offset[:, i] + raw
        grew = totals[0] > self.tokens[i]
        if isinstance(i, slice):  # the whole rack in order: no gathers
            self.t_last_change[grew] = t
            self.tokens[:], self.samples[:], self.prompt_tokens[:] = totals
            self.t_first[np.isnan(self.t_first)] = t
            np.fmax(self.last_seen, t, out=self.last_seen)
            return
        self.t_last_change[i[grew]] = t
        self.tokens[i], self.samples[i], self.prompt_tokens[i] = totals
        self.t_first[i[np.isnan(self.t_first[i])]] = t
        self.last_seen[i] = np.fmax(self.last_seen[i], t)

    def _progress(self, ev: Progress) -> None:
        i = self._node(ev.node)
        if i is None:
            return
        # One node, three counters: plain Python ints (a live source sends one of these per line; the
        # array path costs several times more). A counter the source does not report keeps its value.
        raw = self._raw
        new = (ev.tokens_done, ev.samples_done, ev.prompt_tokens_done)
        totals = []
        for k in range(3):
            prev = int(raw[k, i])
            value = prev if new[k] is None else int(new[k])  # type: ignore[arg-type]
            if value < prev:  # restarted: keep what it had counted
                self._offset[k, i] += prev
            raw[k, i] = value
            totals.append(int(self._offset[k, i]) + value)
        if totals[0] > self.tokens[i]:
            self.t_last_change[i] = ev.t
        self.tokens[i], self.samples[i], self.prompt_tokens[i] = totals
        if math.isnan(self.t_first[i]):
            self.t_first[i] = ev.t
        if not self.last_seen[i] >= ev.t:  # NaN (never seen) included
            self.last_seen[i] = ev.t

    def _progress_batch(self, ev: ProgressBatch) -> None:
        ni = ev.node_index
        whole = self._layout.whole_nodes(ni)
        if not whole:
            ok = (ni >= 0) & (ni < len(self.index))
            if not ok.all():
                self._skip("progress batch rows outside the run's nodes")
                ni = ni[ok]
        else:
            ok = slice(None)  # type: ignore[assignment]
        index: np.ndarray | slice = slice(None) if whole else ni
        raw = np.empty((3, len(ni)), np.int64)
        raw[0] = ev.tokens_done[ok]
        raw[1] = ev.samples_done[ok]
        raw[2] = ev.prompt_tokens_done[ok] if ev.prompt_tokens_done is not None else self._raw[2, index]
        self._apply_counters(index, ev.t, raw)

    def _latency(self, ev: LatencyBatch) -> None:
        i = self._node(ev.node)
        if i is None or ev.metric not in self.latency:
            return
        self.latency[ev.metric][i].add(ev.values_s, ev.counts)
        self.rack_latency[ev.metric].add(ev.values_s, ev.counts)
        finite = ev.values_s[np.isfinite(ev.values_s)]
        if finite.size:
            self.latency_max[ev.metric] = float(np.fmax(self.latency_max[ev.metric], finite.max()))
        self._seen(i, ev.t)

    def _status(self, ev: NodeStatus) -> None:
        i = self._node(ev.node)
        if i is None or ev.state not in STATE_CODE:
            return
        before = NODE_STATES[self.explicit_state[i]]
        self.explicit_state[i] = STATE_CODE[ev.state]
        self.state_reason[i] = ev.reason
        name = ev.node
        self.alerts.condition(
            ev.t, name, "down", ev.state == "down", f"{name} down: {ev.reason}", "critical", f"{name} back up"
        )
        if ev.state == "finished" and before != "finished":
            self.alerts.event(ev.t, name, "finished", f"{name} finished", "info")
        if ev.state in ("up", "finished"):
            self._seen(i, ev.t)

    def _log_line(self, ev: LogLine) -> None:
        i = self._node(ev.node)
        if i is None:
            return
        lines = self.log_lines[i]
        lines.append((ev.t, ev.text))
        if len(lines) > self.config.log_lines_per_node:
            del lines[: len(lines) - self.config.log_lines_per_node]

    # ------------------------------------------------------------------ time
    def advance(self, t: float) -> None:
        """Sample every tick strictly before ``t`` (state then holds all events up to that tick)."""
        if self.run is None or not math.isfinite(t):
            return
        tick = self.config.tick_s
        if (t - self.ticks_sampled * tick) / tick > _MAX_FILL_TICKS:
            self.ticks_sampled = int(t // tick)
        while self.ticks_sampled * tick < t:
            self._sample(self.ticks_sampled * tick)
            self.ticks_sampled += 1
        self.now = max(self.now, t)

    def _sample(self, t: float) -> None:
        state = self.effective_state(t)
        up = state == 0
        power = self.gpu_values[:, :, _POWER]
        node_power = np.where(up, np.where(np.isnan(power), 0.0, power).sum(axis=1), 0.0)
        if t > self._last_sample_t:
            self.energy_j += float(node_power.sum()) * (t - self._last_sample_t)
        self._last_sample_t = t
        if not self.config.live_view:
            self.now = max(self.now, t)
            return
        tokens = self.tokens.astype(np.float64)
        self.recent_tokens.push(t, tokens)
        self.recent_samples.push(t, self.samples.astype(np.float64))
        self.recent_power.push(t, node_power)
        self.history_tokens.add(t, tokens)
        self.history_power.add(t, node_power)
        self.history_state.add(t, state)
        gpu_now = self.gpu_values[:, :, _SERIES_COLS]
        self.recent_gpu.push(t, gpu_now)
        self.history_gpu.add(t, gpu_now)
        self.now = max(self.now, t)
        self.rules.evaluate(t, state)

    def effective_state(self, t: float) -> np.ndarray:
        """Node state codes at ``t``: explicit states, plus stale for silent 'up' nodes."""
        state = self.explicit_state.copy()
        limit = self.config.stale_after_s
        # NaN (never seen) compares False: such a node is silent once the run is older than the limit.
        silent = (t - self.last_seen > limit) | (np.isnan(self.last_seen) & (t > limit))
        state[(state == 0) & silent] = STATE_CODE["stale"]
        return state

    def window_rates(self, t: float, window_s: float | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Per-node (tokens/s, samples/s) over the last ``window_s`` (default: the config's) before ``t``."""
        ring = self.recent_tokens
        slot = ring.slot_at_or_before(t - (self.config.window_s if window_s is None else window_s))
        slot = ring.oldest_slot() if slot is None else slot
        if slot is None or t - ring.times[slot] <= 0:
            n = len(self.index)
            return np.full(n, np.nan), np.full(n, np.nan)
        span = t - float(ring.times[slot])
        # recent_samples is pushed in lockstep with recent_tokens: same slot, same time.
        return (self.tokens - ring.values[slot]) / span, (
            self.samples - self.recent_samples.values[slot]
        ) / span

    def measured_means(self) -> tuple[np.ndarray, np.ndarray]:
        """Per-node (tokens/s, samples/s): counters over the node's own first-to-last-change span."""
        span = self.t_last_change - self.t_first
        with np.errstate(invalid="ignore", divide="ignore"):
            ok = span > 0
            return (
                np.where(ok, self.tokens / np.where(ok, span, 1), np.nan),
                np.where(ok, self.samples / np.where(ok, span, 1), np.nan),
            )

    # --------------------------------------------------------------- answers
    def snapshot(self, now: float | None = None) -> RackSnapshot:
        """An immutable view at ``now`` (default: the latest event time). Never mutates the core."""
        from tokenwatch.core.rack_snapshot import build_snapshot

        return build_snapshot(self, self.now if now is None else now)
