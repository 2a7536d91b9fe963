"""The core's clock: every ``tick_s`` of run time the state is sampled into its bounded series, energy is
integrated and the alert rules run. Time only moves with events, so a replay of the same events
reproduces every tick exactly.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from tokenwatch.base.events import GPU_METRICS
from tokenwatch.core._alert_rules import evaluate_rules
from tokenwatch.core._power_limits import flush_changes
from tokenwatch.core._state import RackState
from tokenwatch.core.config import GPU_SERIES_METRICS
from tokenwatch.core.fleet._board import fleet_tick, fleet_tick_steps
from tokenwatch.core.verdict._tick import verdict_tick

_SERIES_COLS = np.array([GPU_METRICS.index(m) for m in GPU_SERIES_METRICS])
_POWER = GPU_METRICS.index("power_w")
MAX_FILL_TICKS = 100_000  # a time jump larger than this is not back-filled tick by tick
HISTORY_LOOKBACK_S = 180.0  # the straggler window (60 s) and its sustain, with room
HISTORY_FORECAST_EVERY_S = 60.0


def sample_ticks_before(state: RackState, t: float) -> None:
    """Sample every tick strictly before ``t`` not sampled yet (state then holds all events up to it)."""
    tick = state.config.tick_s
    if (t - state.ticks_sampled * tick) / tick > MAX_FILL_TICKS:
        state.ticks_sampled = int(t // tick)
    while state.ticks_sampled * tick < t:
        sample(state, state.ticks_sampled * tick)
        state.ticks_sampled += 1
    state.now = max(state.now, t)


def sample_steps_before(state: RackState, t: float) -> Iterator[None]:
    """:func:`sample_ticks_before` in steps: it yields after each tick and between a fleet's racks at a
    verdict tick (:func:`fleet_tick_steps`). Closed part way (the session stopped), the tick it was in
    counts as sampled, its fleet forecasts left as the last tick's, so no tick is ever sampled twice."""
    tick = state.config.tick_s
    if (t - state.ticks_sampled * tick) / tick > MAX_FILL_TICKS:
        state.ticks_sampled = int(t // tick)
    while state.ticks_sampled * tick < t:
        try:
            yield from sample_steps(state, state.ticks_sampled * tick)
        finally:
            state.ticks_sampled += 1
        yield
    state.now = max(state.now, t)


def sample(state: RackState, t: float) -> None:
    """One tick at ``t``: energy, the series (when the live view is on), the alert rules and forecasts."""
    if _sample_to_forecasts(state, t):
        fleet_tick(state, t)


def sample_steps(state: RackState, t: float) -> Iterator[None]:
    """:func:`sample`, yielding between the racks of a fleet's verdict tick (its last part)."""
    if _sample_to_forecasts(state, t):
        yield from fleet_tick_steps(state, t)


def _sample_to_forecasts(state: RackState, t: float) -> bool:
    """A tick up to the fleet's forecasts, the last of its work: True when they are to be made now."""
    state.version += 1
    if _unread_fleet_history(state, t) and t % HISTORY_FORECAST_EVERY_S >= state.config.tick_s:
        # A fleet's old history with none of its nodes read (its rack figures alone): every node's tick
        # would write the same nothing (no power, no tokens) 60 times a minute, 18,000 nodes at 1,000
        # racks. The minute's tick writes it once, with the forecasts it records there anyway.
        state.last_sample_t = t
        state.now = max(state.now, t)
        return False
    codes = state.effective_state(t)
    no_gpu_yet = np.isnan(state.gpu_last_seen).all()  # a log's history: nothing of the GPUs to sample
    # Energy and power count every GPU with a fresh reading: a finished node idling still draws power;
    # a silent or down one's last reading is not a measurement of now.
    if no_gpu_yet:
        fresh = measured = np.zeros(state.gpu_last_seen.shape, bool)
        node_power = np.zeros(len(codes))
    else:
        fresh = state.gpu_freshness(t, codes) == 0
        power = state.gpu_values[:, :, _POWER]
        measured = fresh & ~np.isnan(power)
        node_power = np.where(measured, power, 0.0).sum(axis=1)
    state.energy.tick(
        state.last_sample_t,
        t,
        np.asarray(measured.any(axis=1)),
        node_power,
        state.tokens,
        state.t_read,
        state.config.tick_s,
    )
    if t > state.last_sample_t:
        state.energy_j += float(node_power.sum()) * (t - state.last_sample_t)
    state.last_sample_t = t
    state.now = max(state.now, t)
    if not state.config.live_view:
        return False
    tokens = state.tokens.astype(np.float64)
    # A history older than the recent series hold before the attach would only be overwritten in them.
    recent = t >= state.attach_s - state.recent_tokens.capacity * state.config.tick_s
    if recent:
        state.recent_tokens.push(t, tokens)
        state.recent_samples.push(t, state.samples)  # int64 counts: a fleet that counts none makes no storage
        state.recent_read_t.push(t, state.t_read)  # in lockstep with recent_tokens: same slot, same time
        state.recent_state.push(t, codes)
    state.history_tokens.add(t, tokens)
    state.history_power.add(t, node_power)
    state.history_state.add(t, codes)
    # Series hold what was measured: a silent GPU's last reading is not carried on as a flat line. No GPU
    # read yet (a log's history, a fleet's backfill of rack figures): NaN, written without an array of it.
    keep_gpu_history = state.config.whole_run_gpu_series
    if no_gpu_yet:
        if keep_gpu_history:
            state.history_gpu.add_blank(t)
        if recent:
            state.recent_gpu.push_blank(t)  # no storage made while no GPU was ever read
            state.recent_throttle.push_blank(t)
    elif keep_gpu_history or recent:
        gpu_now = np.where(fresh[:, :, None], state.gpu_values[:, :, _SERIES_COLS], np.nan)
        if keep_gpu_history:
            state.history_gpu.add(t, gpu_now)
        if recent:
            state.recent_gpu.push(t, gpu_now)
            state.recent_throttle.push(t, np.where(fresh, state.gpu_throttle, np.uint64(0)))
    state.engine.tick(t, t - state.engine.seen_t <= state.stale_limit_s)
    flush_changes(state.gpu_evidence.power_limits, t, state.run.nodes, state.run.gpus_per_node, state.alerts)
    if t < state.attach_s - HISTORY_LOOKBACK_S:
        # The old history of a watch that attached mid-run (hours of 72 nodes are ingested before the
        # first frame): its series and energy are the run's, its forecasts are recorded once a minute;
        # the rules and cause hints judge from HISTORY_LOOKBACK_S before the attach, which holds every
        # window they read, so the first frame's alerts are those of now.
        if t % HISTORY_FORECAST_EVERY_S < state.config.tick_s:
            verdict_tick(state, t)
            return True
        return False
    evaluate_rules(state, t, codes)
    verdict_tick(state, t)
    return True


def _unread_fleet_history(state: RackState, t: float) -> bool:
    """A tick of a fleet's history before the attach (older than the rules' lookback), where no node
    has been read yet: nothing of the nodes to sample."""
    return (
        t < state.attach_s - HISTORY_LOOKBACK_S
        and state.fleet_figures is not None
        and bool(np.isnan(state.last_seen).all())
    )
