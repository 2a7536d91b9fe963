"""What the core keeps and how it judges: its tunables and the names its arrays are indexed by."""

from __future__ import annotations

from dataclasses import dataclass, field

from tokenwatch.base.events import NODE_STATES, NodeState
from tokenwatch.core.baseline.reference import Baseline
from tokenwatch.mlperf.pace import Assumptions

# GPU metrics kept as time series (limits and totals are constants, not worth a series).
GPU_SERIES_METRICS: tuple[str, ...] = (
    "power_w",
    "sm_clock_mhz",
    "mem_clock_mhz",
    "hbm_used_mib",
    "hbm_busy_pct",
    "util_pct",
    "temp_c",
)
# The core keeps node states as int8 codes: the index into NODE_STATES (0 up, 1 stale, 2 down,
# 3 finished, 4 idle).
STATE_CODE: dict[NodeState, int] = {state: code for code, state in enumerate(NODE_STATES)}


@dataclass(frozen=True, slots=True)
class CoreConfig:
    """Tunables. Times in seconds; ``*_pct`` in percent."""

    tick_s: float = 1.0
    window_s: float = 10.0
    recent_points: int = 600
    history_points: int = 1024
    sparkline_points: int = 60
    straggler_pct: float = 5.0
    straggler_hold_s: float = 15.0
    straggler_window_s: float = 60.0  # sustained slowness, not one noisy 10-s window
    # A node is a straggler only when it is below the median by more than straggler_pct plus this many
    # standard errors of its own window rate (from its rates over sub-windows of the window; at least
    # the floor, in percentage points): a node whose rate is noisy (Poisson arrivals, bursty logs) must
    # be further below to count, so noise at the threshold raises nothing.
    straggler_noise_sigmas: float = 3.0
    straggler_subwindow_s: float = 5.0
    straggler_noise_floor_pct: float = 0.5
    stale_after_s: float = 5.0
    # An engine that reports its queue (vLLM, SGLang) is idle once it has read empty and its counters
    # have stood still this long (and its staleness limit): vLLM's own stats interval is 10 s, and one
    # empty reading between two requests is not an idle server.
    engine_idle_after_s: float = 15.0
    ttft_sla_s: float = 2.0
    tpot_sla_s: float = 0.2
    # The metrics whose SLA the user set (--ttft-sla / --tpot-sla): theirs is the one alerted on and shown,
    # even where the verdict knows LoadGen's limit (the verdict still judges by LoadGen's).
    sla_set_by_user: frozenset[str] = frozenset()
    throttle_clock_drop_pct: float = 10.0
    throttle_hold_s: float = 3.0
    alert_log_size: int = 500
    log_lines_per_node: int = 200
    gpu_series_floats: int = 8_000_000  # memory budget for per-GPU series (recent + history)
    # The same for the per-node series (5 recent rings, 3 whole-run series): the full recent_points and
    # history_points up to ~2,600 nodes (64 racks are 1,152); a 1,000-rack fleet's 18,000 nodes get
    # fewer points (each halving of a whole-run series copies it, and the rings are resident: 1 GB at
    # full size).
    node_series_floats: int = 16_000_000
    # A summary needs only counters, energy and latency histograms: `tokenwatch summarize` turns the
    # live-view work (series, alerts) off and reads a recording several times faster.
    live_view: bool = True
    # Each rack's own MLPerf forecast at every verdict tick (the fleet board, a rack's verdict panel): off
    # where nothing reads them (headless, --jsonl, /metrics, the recording), where 64 of them were most of
    # the core's cost. Off, the fleet table projects no rack until the run has ended (its final figures
    # are made when read); ``core.fleet.rack_forecast`` makes one on demand.
    rack_forecasts: bool = True
    # The GPUs' whole-run series (``history_gpu``, a quarter of a 64-rack tick's work: 32,000 values a
    # tick, halved as the run grows): read only by ``RackCore.history()`` (a report, an export), which
    # builds its own core from the recording. Off where nothing asks the core for it (headless).
    whole_run_gpu_series: bool = True
    # The MLPerf verdict: the benchmark judged by (None: the run's own, if it names one), how
    # often the forecast is recorded and its alerts judged, and what the projection assumes.
    benchmark: str | None = None
    verdict_interval_s: float = 10.0
    forecast: Assumptions = field(default_factory=Assumptions)
    # A reference run to compare with at every snapshot (``--baseline``); immutable, shared by
    # every copy of the core.
    baseline: Baseline | None = None
