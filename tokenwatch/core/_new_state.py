"""Making a run's empty :class:`~tokenwatch.core._state.RackState` from its ``RunStarted``: every array
sized for its nodes and GPUs, every series within its float budget, each wing's part made by the wing.
"""

from __future__ import annotations

import math

import numpy as np

from tokenwatch.base.events import (
    GPU_METRICS,
    LATENCY_METRICS,
    VOUCHED_NODES_META,
    RunStarted,
)
from tokenwatch.core._batch_layout import BatchLayout
from tokenwatch.core._engine_queue import EngineQueues
from tokenwatch.core._ring import DownsampledSeries, RecentRing
from tokenwatch.core._run_info import RunInfo
from tokenwatch.core._state import BucketMemo, RackState, RuleMemory, SkipLog
from tokenwatch.core.alerts import AlertLog
from tokenwatch.core.cadence import NodeCadence
from tokenwatch.core.causes._cause import CauseMemory
from tokenwatch.core.causes._gpu_evidence import GpuEvidence
from tokenwatch.core.config import GPU_SERIES_METRICS, CoreConfig
from tokenwatch.core.energy import EnergyCounters
from tokenwatch.core.fleet._memo import new_fleet_memo
from tokenwatch.core.histogram import LogHistogram
from tokenwatch.core.verdict._state import new_verdict_state

# The fewest points a recent ring keeps, whatever the fleet's size: the straggler window (60 s) and its
# sustain, with room, at 1-s ticks.
RECENT_FLOOR_POINTS = 240


def attached_at(ev: RunStarted) -> float:
    """How far into the run a live watch joined it (``meta["attached_at_s"]``; 0: from its start)."""
    try:
        value = float(ev.meta.get("attached_at_s", 0.0))
    except (TypeError, ValueError):
        return 0.0
    return value if math.isfinite(value) else 0.0


def node_stale_after_s(ev: RunStarted, config: CoreConfig) -> float:
    """The silence after which a node is stale: the config's, or longer where the run's source says its
    nodes are read less often (a fleet watched through Prometheus reads every node once per alerting
    pass: ``meta["fleet"]["node_stale_after_s"]``, from the server's scrape interval and latency offset)."""
    fleet = ev.meta.get("fleet")
    said = fleet.get("node_stale_after_s") if isinstance(fleet, dict) else None
    if isinstance(said, int | float) and not isinstance(said, bool) and math.isfinite(said):
        return max(config.stale_after_s, float(said))
    return config.stale_after_s


def new_state(ev: RunStarted, config: CoreConfig, alerts: AlertLog, skips: SkipLog) -> RackState:
    """The empty state of the run ``ev`` starts, sized for its nodes and GPUs."""
    cfg = config
    run = RunInfo(
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
    # Per-node series within their float budget; the recent rings always hold the rules' windows. Sized as
    # for five rings, as before a fifth (the nodes' power per tick, read by nothing) was dropped: the same
    # lengths at every fleet size.
    r = int(min(cfg.recent_points, max(RECENT_FLOOR_POINTS, cfg.node_series_floats // 2 // (5 * max(1, n)))))
    h = int(min(cfg.history_points, max(16, cfg.node_series_floats // 2 // (3 * max(1, n)))))
    h -= h % 2
    # Per-GPU series get what is left of a fixed float budget, so 4,608 GPUs still fit.
    per_point = max(1, n * g * len(GPU_SERIES_METRICS))
    gpu_recent = int(min(r, max(16, cfg.gpu_series_floats // 2 // per_point)))
    gpu_hist = int(min(h, max(16, cfg.gpu_series_floats // 2 // per_point)))
    if not cfg.whole_run_gpu_series:
        gpu_hist = 4  # never added to: the smallest series there is
    gpu_shape = (n, g, len(GPU_SERIES_METRICS))
    return RackState(
        config=cfg,
        run=run,
        index={name: i for i, name in enumerate(ev.nodes)},
        alerts=alerts,
        skips=skips,
        tokens=np.zeros(n, np.int64),
        samples=np.zeros(n, np.int64),
        prompt_tokens=np.zeros(n, np.int64),
        raw_counters=np.zeros((3, n), np.int64),
        counter_offsets=np.zeros((3, n), np.int64),
        t_first=np.full(n, np.nan),
        counters_at_first=np.zeros((2, n), np.int64),
        t_read=np.full(n, np.nan),
        t_last_change=np.full(n, np.nan),
        change_gap_s=np.full(n, np.nan),
        last_seen=np.full(n, np.nan),
        explicit_state=np.zeros(n, np.int8),
        state_reason=["waiting for data"] * n,
        gpu_values=np.full((n, g, len(GPU_METRICS)), np.nan),
        gpu_throttle=np.zeros((n, g), np.uint64),
        sm_clock_max=np.full((n, g), np.nan),
        gpu_last_seen=np.full((n, g), np.nan),
        state_since=np.full(n, np.nan),
        cadence=NodeCadence.for_nodes(n, node_stale_after_s(ev, cfg)),
        vouched=np.isin(np.array(ev.nodes, dtype=object), list(ev.meta.get(VOUCHED_NODES_META, ()))),
        latency={m: [LogHistogram() for _ in range(n)] for m in LATENCY_METRICS},
        rack_latency={m: LogHistogram() for m in LATENCY_METRICS},
        latency_max=dict.fromkeys(LATENCY_METRICS, math.nan),
        log_lines=[[] for _ in range(n)],
        recent_tokens=RecentRing(r, (n,)),
        recent_samples=RecentRing(r, (n,), np.int64),  # counts, as state.samples
        recent_read_t=RecentRing(r, (n,)),
        recent_state=RecentRing(r, (n,), np.int8),
        recent_gpu=RecentRing(gpu_recent, gpu_shape),
        history_tokens=DownsampledSeries(h, (n,), cfg.tick_s, "last"),
        history_power=DownsampledSeries(h, (n,), cfg.tick_s, "mean"),
        history_state=DownsampledSeries(h, (n,), cfg.tick_s, "last", np.int8),  # state codes: 1 byte
        history_gpu=DownsampledSeries(gpu_hist - gpu_hist % 2, gpu_shape, cfg.tick_s, "mean"),
        rules=RuleMemory.for_rack(n, g),
        layout=BatchLayout(n, g),
        bucket_memo=BucketMemo(),
        recent_throttle=RecentRing(gpu_recent, (n, g), np.uint64),
        verdict=new_verdict_state(ev, cfg),
        node_latency_max={m: np.full(n, np.nan) for m in LATENCY_METRICS},
        fleet=new_fleet_memo(run, cfg, alerts, ev.t),
        energy=EnergyCounters.for_rack(n, g, attached_at(ev)),
        attach_s=attached_at(ev),
        gpu_evidence=GpuEvidence.for_rack(n, g),
        engine=EngineQueues.for_nodes(n, r),
        causes=CauseMemory.for_nodes(n),
        now=ev.t,
        last_sample_t=ev.t,
    )
