"""Everything the core knows about one run, in one object: counters, telemetry, series, histograms, alerts.

A :class:`RackState` is made per run (:func:`~tokenwatch.core._new_state.new_state`, from its
``RunStarted``) and is the only mutable thing in the core. Ingestion (:mod:`tokenwatch.core._ingest`), the
per-tick sampling and alert rules (:mod:`tokenwatch.core._ticks`, :mod:`tokenwatch.core._alert_rules`) and
every reader (the snapshot builder, run and node histories, the summary) are functions of it;
:class:`~tokenwatch.core.rack.RackCore` is the facade that front ends talk to.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from tokenwatch.base.events import (
    GPU_METRICS,
    FloatArray,
    IntArray,
    LatencyMetric,
)
from tokenwatch.core._batch_layout import BatchLayout
from tokenwatch.core._engine_queue import EngineQueues
from tokenwatch.core._ring import DownsampledSeries, RecentRing
from tokenwatch.core._run_info import RunInfo
from tokenwatch.core._window_bases import bases_elsewhere
from tokenwatch.core.alerts import AlertLog
from tokenwatch.core.cadence import NodeCadence
from tokenwatch.core.causes._cause import CauseMemory
from tokenwatch.core.causes._gpu_evidence import GpuEvidence
from tokenwatch.core.config import STATE_CODE, CoreConfig
from tokenwatch.core.energy import EnergyCounters
from tokenwatch.core.fleet._memo import FleetMemo
from tokenwatch.core.fleet._state import FleetState
from tokenwatch.core.histogram import LogHistogram
from tokenwatch.core.verdict._state import VerdictState, loadgen_in_progress

_STALE = STATE_CODE["stale"]
_DOWN = STATE_CODE["down"]
_IDLE = STATE_CODE["idle"]


@dataclass(slots=True, eq=False)
class RuleMemory:
    """What the alert rules remember between ticks: since when a condition holds, and what is raised."""

    straggler_since: FloatArray
    throttle_since: FloatArray
    straggling: np.ndarray  # (nodes,) bool, read by snapshots
    throttling: np.ndarray  # (nodes, gpus) bool, read by snapshots
    stale_alerted: np.ndarray
    straggler_alerted: np.ndarray
    throttle_alerted: np.ndarray
    reference_clock_mhz: float = math.nan  # the rack's typical top SM clock, refreshed every few ticks
    noise: FloatArray = field(default_factory=lambda: np.zeros(0))  # each node's rate noise (tokens/s)
    noise_due_t: float = -math.inf  # when to read it again (once per straggler sub-window)
    reference_due_tick: int = 0

    @classmethod
    def for_rack(cls, nodes: int, gpus: int) -> RuleMemory:
        return cls(
            straggler_since=np.full(nodes, np.nan),
            throttle_since=np.full((nodes, gpus), np.nan),
            straggling=np.zeros(nodes, bool),
            throttling=np.zeros((nodes, gpus), bool),
            stale_alerted=np.zeros(nodes, bool),
            straggler_alerted=np.zeros(nodes, bool),
            throttle_alerted=np.zeros(nodes, bool),
        )


@dataclass(slots=True, eq=False)
class BucketMemo:
    """The last per-node latency buckets computed for a set of bounds, so a scrape redoes only the nodes
    whose histograms grew (a histogram only grows, so an unchanged total means unchanged counts)."""

    entries: dict[
        tuple[LatencyMetric, tuple[float, ...]], tuple[IntArray, IntArray, IntArray, FloatArray]
    ] = field(default_factory=dict)


@dataclass(slots=True)
class SkipLog:
    """Events the core could not use: counted, and each distinct reason warned about once."""

    alerts: AlertLog
    count: int = 0
    warned: set[str] = field(default_factory=set)

    def skip(self, t: float, why: str) -> None:
        self.count += 1
        if why not in self.warned:
            self.warned.add(why)
            self.alerts.event(t, None, "warning", f"skipped event: {why}")


@dataclass(slots=True, eq=False)
class RackState:
    """One run's state. Node arrays are indexed like ``run.nodes``; GPU arrays are (nodes, gpus[, metric]).

    Counters are cumulative generated tokens / samples / prompt tokens; times are seconds since run
    start (NaN = never); ``explicit_state`` holds the codes sources reported (0 up, 1 stale, 2 down,
    3 finished) before silence is taken into account (:meth:`effective_state`).
    """

    config: CoreConfig
    run: RunInfo
    index: dict[str, int]
    alerts: AlertLog
    skips: SkipLog
    tokens: IntArray
    samples: IntArray
    prompt_tokens: IntArray
    raw_counters: IntArray  # (3, nodes) the sources' last raw counters: tokens, samples, prompt tokens
    counter_offsets: IntArray  # (3, nodes) what restarted counters had counted before
    t_first: FloatArray
    # (2, nodes) tokens and samples at each node's first reading: a watch that attaches mid-run reads
    # counters that include work from before it saw the node, which no rate it forms may cover.
    counters_at_first: IntArray
    t_read: FloatArray  # run time of each node's latest counter reading (NaN = none yet)
    t_last_change: FloatArray
    # Seconds between the reading that last saw each node's tokens grow and the reading before it (NaN =
    # none): its work ended somewhere in that gap, which a loaded machine's late scrape can stretch well
    # past the source's usual interval.
    change_gap_s: FloatArray
    last_seen: FloatArray
    explicit_state: np.ndarray
    state_reason: list[str]
    gpu_values: FloatArray  # (nodes, gpus, len(GPU_METRICS)) latest readings
    gpu_throttle: np.ndarray  # (nodes, gpus) uint64 clocks-event reasons
    sm_clock_max: FloatArray  # (nodes, gpus) highest SM clock each GPU has shown
    gpu_last_seen: FloatArray  # (nodes, gpus) run time of each GPU's latest sample (NaN = never)
    state_since: FloatArray  # run time of each node's latest explicit state change (NaN = none yet)
    cadence: NodeCadence  # each node's gaps between events and the staleness limit they give
    vouched: np.ndarray  # (nodes,) bool: silence is idle, not stale (see VOUCHED_NODES_META)
    latency: dict[LatencyMetric, list[LogHistogram]]
    rack_latency: dict[LatencyMetric, LogHistogram]
    latency_max: dict[LatencyMetric, float]
    log_lines: list[list[tuple[float, str]]]
    recent_tokens: RecentRing
    recent_samples: RecentRing
    recent_read_t: RecentRing  # t_read per tick, in lockstep with recent_tokens: when each value was read
    recent_state: RecentRing  # node state codes per tick (int8), in lockstep with recent_tokens
    recent_gpu: RecentRing  # fresh readings only: NaN where a GPU was silent, down or stale
    history_tokens: DownsampledSeries
    history_power: DownsampledSeries
    history_state: DownsampledSeries  # node state codes, int8 (the newest in each point)
    history_gpu: DownsampledSeries  # fresh readings only, like recent_gpu
    rules: RuleMemory
    layout: BatchLayout
    bucket_memo: BucketMemo
    # (nodes, gpus) uint64 clock-event reasons per tick, beside recent_gpu (same capacity and times);
    # 0 where a GPU had no fresh reading: the node screen draws the reasons over time.
    recent_throttle: RecentRing
    verdict: VerdictState  # the MLPerf verdict's own inputs (core/verdict/_state.py)
    # Per node, so one rack of a fleet has its own figures (core/fleet/_rack_view.py): the largest latency
    # seen per metric (s).
    node_latency_max: dict[LatencyMetric, FloatArray]
    fleet: (
        FleetMemo | None
    )  # a run of more than one rack: its racks and their forecasts (core/fleet/_board.py)
    # Energy and causes: energy counters and integrated power per node, the engines' queues (the node's
    # idle state reads them too), the causes wing's evidence from GPU readings (power-limit changes, XID /
    # NVLink errors: core/causes/_gpu_evidence.py) and the stragglers' cause hints (core/causes/_judge.py).
    energy: EnergyCounters
    engine: EngineQueues
    gpu_evidence: GpuEvidence
    causes: CauseMemory
    # Rack-level figures of a fleet watched through Prometheus (core/fleet/_state.py); None otherwise.
    fleet_figures: FleetState | None = None
    now: float = 0.0
    attach_s: float = 0.0  # how far into the run a live watch joined it (0: from its start)
    ended: bool = False
    end_reason: str = ""
    energy_j: float = 0.0
    ticks_sampled: int = 0
    last_sample_t: float = 0.0
    version: int = 0  # moves on every event applied and every tick: what a memo of a view is keyed on

    # ------------------------------------------------------------------ reads
    @property
    def stale_limit_s(self) -> FloatArray:
        """Per node: seconds of silence after which it is stale, ``max(stale_after, 3 x its cadence)``
        (:mod:`tokenwatch.core.cadence`)."""
        return self.cadence.stale_limit_s

    def effective_state(self, t: float) -> np.ndarray:
        """Node state codes at ``t``: explicit states; an 'up' node silent past its limit is idle where its
        sources are vouched for (a supervised live node: a source that stopped answering is said
        explicitly), else stale; an 'up' node whose engine has read empty (no request running or
        waiting) and whose counters have not moved for its idle hold is idle, unless its LoadGen run is
        in progress (its query plan came, its result has not)."""
        state = self.explicit_state.copy()
        limit = self.stale_limit_s
        # NaN (never seen) compares False: such a node is silent once the run is older than the limit.
        silent = (t - self.last_seen > limit) | (np.isnan(self.last_seen) & (t > self.cadence.stale_after_s))
        up = state == 0
        state[up & silent] = np.where(self.vouched[up & silent], _IDLE, _STALE)
        if self.engine.any_seen:
            # Hysteresis: a loaded engine's queue empties for a moment between requests (a CPU engine
            # whose clients were starved read empty at 2 of 29 looks during a run); idle needs it empty,
            # and its counters still, for longer than its staleness limit and the idle hold.
            hold = np.maximum(limit, self.config.engine_idle_after_s)
            with np.errstate(invalid="ignore"):
                still = ~(t - self.t_last_change <= hold)  # NaN (no work yet) counts as still
            # A LoadGen run in progress is not idle for an empty queue.
            in_run = loadgen_in_progress(self.verdict)
            state[(state == 0) & self.engine.empty_since(t, hold) & still & ~in_run] = _IDLE
        return state

    def gpu_freshness(self, t: float, codes: np.ndarray) -> np.ndarray:
        """Per-GPU codes at ``t`` (see ``core.snapshot.GPU_FRESHNESS``): 0 a sample within its node's
        staleness limit, 1 older (or its node stale), 2 its node down, 3 never reported."""
        limit = self.stale_limit_s[:, None]
        out = np.zeros(self.gpu_last_seen.shape, np.int8)
        with np.errstate(invalid="ignore"):
            out[(t - self.gpu_last_seen > limit) | (codes[:, None] == _STALE)] = 1
        out[np.isnan(self.gpu_last_seen)] = 3
        out[codes == _DOWN] = 2
        return out

    def why_stopped(self, i: int, code: int) -> tuple[float, str]:
        """(since when, why) node ``i`` is down or stale (``code``, its effective state): a state a source
        reported carries its own reason and time; a node that merely went silent, its last report."""
        if code == _DOWN or self.explicit_state[i] == code:
            return float(self.state_since[i]), self.state_reason[i]
        if np.isnan(self.last_seen[i]):
            return math.nan, "never reported"
        return float(self.last_seen[i]), f"no data for {self.cadence.stale_after_s:g} s"

    def window_rates(self, t: float, window_s: float | None = None) -> tuple[FloatArray, FloatArray]:
        """Per-node (tokens/s, samples/s) over the last ``window_s`` (default: the config's) before ``t``.

        A rate is formed only over the time its readings cover: from the reading the window's first tick
        holds to the node's newest reading while it reports (a node silent past its staleness limit is
        measured up to ``t``, so its rate falls). A node first read inside the window (a watch that
        attached mid-run, a rack fetched when it was opened) is measured from that first reading, never
        from a point where the core knew nothing of it (its counters held work done before); a node read
        less often than the window (every 30 s through a fleet's server) over its newest two readings,
        never 30 s of growth divided by 10. A gap (silence past the node's staleness limit, a hole in a
        server's history) is never spanned: the rate starts at the first reading after it. NaN until two
        readings bound a span."""
        ring = self.recent_tokens
        slot = ring.slot_at_or_before(t - (self.config.window_s if window_s is None else window_s))
        slot = ring.oldest_slot() if slot is None else slot
        n = len(self.index)
        if slot is None or t - ring.times[slot] <= 0:
            return np.full(n, np.nan), np.full(n, np.nan)
        # recent_samples and recent_read_t are pushed in lockstep with recent_tokens: same slots.
        base_tokens = ring.values[slot].copy()
        base_samples = self.recent_samples.values[slot].copy()
        base_t = self.recent_read_t.values[slot].copy()
        never = np.isnan(self.t_first)
        base_t[never] = float(ring.times[slot])  # never read: 0 tokens over the window, as before
        with np.errstate(invalid="ignore"):
            reporting = t - self.t_read <= self.stale_limit_s
            # While a node reports: no reading yet at the window's start, or one older than it by more
            # than the node's limit (a gap), and the rate starts at the first reading after it; or only
            # its newest reading since, and it is the one before. A silent node is measured from the
            # window's start up to now (its rate falls).
            after = np.where(np.isnan(base_t), -np.inf, base_t)
            gap = reporting & ((ring.times[slot] - base_t > self.stale_limit_s) | np.isnan(base_t))
            elsewhere = ~never & (gap | (reporting & ~(base_t < self.t_read)))
        if elsewhere.any():
            bases_elsewhere(self, np.flatnonzero(elsewhere), gap, after, (base_tokens, base_samples, base_t))
        end_t = np.where(reporting, self.t_read, t)
        with np.errstate(invalid="ignore", divide="ignore"):
            span = end_t - base_t
            span = np.where(span > 0, span, np.nan)
            return (self.tokens - base_tokens) / span, (self.samples - base_samples) / span

    def measured_means(self) -> tuple[FloatArray, FloatArray]:
        """Per-node (tokens/s, samples/s): the figures the node's LoadGen wrote in its result where it has
        (exact, and the ones MLPerf publishes), else the counters' growth over its own first-to-last-change
        span (what the counters held at the first reading is work from before the span)."""
        span = self.t_last_change - self.t_first
        grown_tokens = self.tokens - self.counters_at_first[0]
        grown_samples = self.samples - self.counters_at_first[1]
        with np.errstate(invalid="ignore", divide="ignore"):
            ok = span > 0
            tokens = np.where(ok, grown_tokens / np.where(ok, span, 1), np.nan)
            samples = np.where(ok, grown_samples / np.where(ok, span, 1), np.nan)
        exact_tokens, exact_samples = self.verdict.result_tokens_per_s, self.verdict.result_samples_per_s
        return (
            np.where(np.isnan(exact_tokens), tokens, exact_tokens),
            np.where(np.isnan(exact_samples), samples, exact_samples),
        )

    def has_power(self) -> bool:
        """Whether any GPU has ever reported its power draw (else energy is unknown, not 0 J)."""
        return bool(np.isfinite(self.gpu_values[:, :, GPU_METRICS.index("power_w")]).any())
