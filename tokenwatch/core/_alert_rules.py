"""Alert rules evaluated on every tick of run time: stale nodes, stragglers, throttling, SLA breaches.

Each rule is a function of the :class:`RackState`; it is edge-triggered into the state's alert log (one
alert when a condition starts, one when it ends) and keeps only the little it must remember (how long a
condition has held) in ``state.rules``.
"""

from __future__ import annotations

import math

import numpy as np

from tokenwatch.base import throttle
from tokenwatch.base.column_median import median_columns
from tokenwatch.base.events import GPU_METRICS, LatencyMetric
from tokenwatch.core._state import RackState
from tokenwatch.core.causes._judge import update_causes
from tokenwatch.core.node_spread import below_median_pct, eligible_median, median_of
from tokenwatch.core.verdict._inputs import shown_limits

_SM_CLOCK = GPU_METRICS.index("sm_clock_mhz")
_REFERENCE_EVERY_TICKS = 30
_STRAGGLER_CLEAR_FRACTION = 0.6


def evaluate_rules(state: RackState, t: float, codes: np.ndarray) -> None:
    """All rules at tick ``t``; ``codes`` holds the nodes' effective state codes."""
    _stale(state, t, codes)
    _stragglers(state, t, codes)
    _throttle(state, t, codes)
    if state.run.scenario == "Server":
        _sla(state, t)


def _stale(state: RackState, t: float, codes: np.ndarray) -> None:
    memory, names = state.rules, state.run.nodes
    stale = codes == 1
    if state.fleet_figures is not None or "fleet" in state.run.meta:
        # A fleet's nodes are read only for the racks on screen and the alerting pass: one never read
        # is not known to be silent (its rack's figures say whether the rack is), so it raises nothing
        # (else a backfill of rack figures alone would raise every node's stale alert, tick after tick).
        stale &= ~np.isnan(state.last_seen)
    for i in np.flatnonzero(stale | memory.stale_alerted).tolist():
        name = names[i]
        reason = (
            state.state_reason[i]
            if state.explicit_state[i] == 1
            else f"no data for {state.stale_limit_s[i]:g} s"
        )
        state.alerts.condition(
            t,
            name,
            "stale",
            bool(stale[i]),
            f"{name} stale: {reason}",
            cleared_message=f"{name} reporting again",
        )
    memory.stale_alerted = stale


def _stragglers(state: RackState, t: float, codes: np.ndarray) -> None:
    """Running nodes below the median of running nodes, beyond their own noise, for long enough."""
    cfg, memory, names = state.config, state.rules, state.run.nodes
    rates, _ = state.window_rates(t, cfg.straggler_window_s)
    running = (codes == 0) & (state.tokens > 0) & (t >= min(cfg.straggler_window_s, cfg.window_s * 3))
    median = eligible_median(rates, running)  # read once: both the deficit and the margin are against it
    below = below_median_pct(rates, running, median)
    # A node is slow only when it is below the median by more than straggler_pct *and* by more than its
    # own deficit's noise allows: a node that sits near the threshold, its rate wobbling with Poisson
    # arrivals or a slow drift, is not raised and cleared every few minutes.
    margin = _straggler_margin(state, t, rates, median)
    # Hysteresis: a node becomes a straggler past straggler_pct (held for straggler_hold_s) and stops
    # being one only back within a smaller band, so noise around the threshold is one alert, not ten.
    slow = below - margin > cfg.straggler_pct
    clear_pct = cfg.straggler_pct * _STRAGGLER_CLEAR_FRACTION
    still_slow = memory.straggling & (below > clear_pct)  # NaN (not running) compares False: cleared
    memory.straggler_since = np.where(slow, np.fmin(memory.straggler_since, t), np.nan)
    memory.straggling = (slow & (t - memory.straggler_since >= cfg.straggler_hold_s)) | still_slow
    update_causes(
        state, t, codes
    )  # the hints first: a new straggler's alert says why (core/causes/_judge.py)
    for i in np.flatnonzero(memory.straggling | memory.straggler_alerted).tolist():
        name = names[i]
        cause = state.causes.causes[i]
        state.alerts.condition(
            t,
            name,
            "straggler",
            bool(memory.straggling[i]),
            f"{name} straggler: {below[i]:.1f}% below the median node"
            + (f"; {cause.text}" if cause is not None else ""),
            cleared_message=f"{name} back within {clear_pct:g}% of the median",
        )
    memory.straggler_alerted = memory.straggling.copy()


def own_noise(state: RackState, t: float) -> np.ndarray:
    """Per node: the standard error of its straggler-window rate, in tokens/s.

    Read from the node's own rates over ``straggler_subwindow_s`` sub-windows of the window: the median
    of their successive differences (so one real step in the rate, a fault starting, is not taken for
    noise), scaled to a standard deviation, over the square root of their number. NaN where the window
    does not hold four sub-windows yet. It changes with each sub-window, so it is read once per
    sub-window and kept (``RuleMemory.noise``) in between: a median per node per tick would dominate a tick.
    """
    cfg, memory = state.config, state.rules
    if t < memory.noise_due_t:
        return memory.noise
    memory.noise_due_t = t + cfg.straggler_subwindow_s
    n = len(state.run.nodes)
    ring = state.recent_tokens
    count = int(cfg.straggler_window_s // cfg.straggler_subwindow_s)
    ends = t - cfg.straggler_subwindow_s * np.arange(count, -1, -1, dtype=np.float64)
    order = ring.slots_at_or_before(ends)
    if len(order) < 5:
        memory.noise = np.full(n, np.nan)
        memory.noise_due_t = t  # not enough history yet: look again next tick
        return memory.noise
    times, tokens = ring.times[order], ring.values[order]
    rates = np.diff(tokens, axis=0) / np.diff(times)[:, None]
    # median |X - Y| of two independent normals of sd s is 0.954 s (absolute values: no negative zero)
    sd = median_columns(np.abs(np.diff(rates, axis=0))) / 0.954
    memory.noise = np.asarray(sd / np.sqrt(len(rates)))
    return memory.noise


def _straggler_margin(state: RackState, t: float, rates: np.ndarray, median: float) -> np.ndarray:
    """How far beyond ``straggler_pct`` each node must be: ``straggler_noise_sigmas`` x its own noise, and
    never less than that many x ``straggler_noise_floor_pct`` (slow wander of a rate that sub-windows of
    one window cannot see)."""
    cfg = state.config
    noise_pct = own_noise(state, t) / median * 100.0 if median > 0 else np.full(len(rates), np.nan)
    noise = np.fmax(noise_pct, cfg.straggler_noise_floor_pct)
    return np.asarray(cfg.straggler_noise_sigmas * noise)


def _throttle(state: RackState, t: float, codes: np.ndarray) -> None:
    cfg, memory, names = state.config, state.rules, state.run.nodes
    reference = _reference_clock(state)  # on its own 30-tick schedule, whether or not it is read
    limiting = (state.gpu_throttle & np.uint64(throttle.LIMITING_REASONS)) != 0
    if nothing_throttles(limiting, memory.throttle_alerted):
        # What the rule below would write on such a tick (most ticks of most runs), without its clock
        # comparisons: nothing throttling, nothing alerted, no hold running.
        memory.throttle_since = np.full(limiting.shape, np.nan)
        memory.throttling = np.zeros(limiting.shape, bool)
        memory.throttle_alerted = np.zeros(len(names), bool)
        return
    clock = state.gpu_values[:, :, _SM_CLOCK]
    dropped = clock < reference * (1 - cfg.throttle_clock_drop_pct / 100)
    now_throttled = limiting & dropped & (codes[:, None] == 0)
    memory.throttle_since = np.where(now_throttled, np.fmin(memory.throttle_since, t), np.nan)
    memory.throttling = now_throttled & (t - memory.throttle_since >= cfg.throttle_hold_s)
    node_throttling: np.ndarray = np.asarray(memory.throttling.any(axis=1))
    for i in np.flatnonzero(node_throttling | memory.throttle_alerted).tolist():
        name = names[i]
        message = ""
        if node_throttling[i]:
            g = int(np.argmax(memory.throttling[i]))
            reasons = ", ".join(throttle.reason_names(int(state.gpu_throttle[i, g])))
            drop = (1 - clock[i, g] / reference) * 100
            message = (
                f"{name} throttling: GPU{g} SM clock {clock[i, g]:.0f} MHz "
                f"({drop:.0f}% below {reference:.0f}) [{reasons}]"
            )
        state.alerts.condition(
            t,
            name,
            "throttle",
            bool(node_throttling[i]),
            message,
            cleared_message=f"{name} clocks recovered",
        )
    memory.throttle_alerted = node_throttling


def nothing_throttles(limiting: np.ndarray, alerted: np.ndarray) -> bool:
    """No GPU reports a limiting reason and no node is alerted: the throttle rule has nothing to judge
    (a GPU throttles only with a limiting reason; an alert to clear needs one raised)."""
    return not limiting.any() and not alerted.any()


def _sla(state: RackState, t: float) -> None:
    limits = shown_limits(state)  # the verdict's limits where known: one pair on every surface
    slas: tuple[tuple[LatencyMetric, float], ...] = (("ttft", limits["ttft"]), ("tpot", limits["tpot"]))
    for metric, limit in slas:
        hist = state.rack_latency[metric]
        if hist.total:
            p99 = hist.quantiles([0.99])[0]
            state.alerts.condition(
                t,
                None,
                f"sla_{metric}",
                p99 > limit,
                f"SLA breach: {metric.upper()} p99 {p99:.3g} s > {limit:g} s",
                "critical",
                f"{metric.upper()} p99 back under {limit:g} s",
            )


def _reference_clock(state: RackState) -> float:
    """The rack's typical top SM clock (median over GPUs of each one's maximum), refreshed every
    30 ticks: it moves slowly, and a median per tick would dominate the core's cost."""
    memory = state.rules
    if state.ticks_sampled >= memory.reference_due_tick:
        finite = state.sm_clock_max[np.isfinite(state.sm_clock_max)]
        memory.reference_clock_mhz = median_of(finite) if finite.size else math.nan
        memory.reference_due_tick = state.ticks_sampled + _REFERENCE_EVERY_TICKS
    return memory.reference_clock_mhz
