"""Alert rules evaluated on every tick of run time: stale nodes, stragglers, throttling, SLA breaches.

Each rule is edge-triggered into the core's :class:`AlertLog` (one alert when a condition starts, one
when it ends) and keeps only the little state it needs (how long a condition has held).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from tokenwatch import throttle
from tokenwatch.core.node_spread import below_median_pct
from tokenwatch.events import GPU_METRICS, LatencyMetric

if TYPE_CHECKING:
    from tokenwatch.core.rack import RackCore

_SM_CLOCK = GPU_METRICS.index("sm_clock_mhz")
_REFERENCE_EVERY_TICKS = 30
_STRAGGLER_CLEAR_FRACTION = 0.6


class AlertRules:
    def __init__(self, core: RackCore, nodes: int, gpus_per_node: int) -> None:
        self.core = core
        self.straggler_since = np.full(nodes, np.nan)
        self.throttle_since = np.full((nodes, gpus_per_node), np.nan)
        self.straggling = np.zeros(nodes, bool)  # read by snapshots
        self.throttling = np.zeros((nodes, gpus_per_node), bool)  # read by snapshots
        self._stale_alerted = np.zeros(nodes, bool)
        self._straggler_alerted = np.zeros(nodes, bool)
        self._throttle_alerted = np.zeros(nodes, bool)
        self._reference = math.nan
        self._reference_due = 0

    def evaluate(self, t: float, state: np.ndarray) -> None:
        """All rules at tick ``t``; ``state`` holds the nodes' effective state codes."""
        core = self.core
        cfg, run = core.config, core.run
        assert run is not None
        stale = state == 1
        for i in np.flatnonzero(stale | self._stale_alerted).tolist():
            name = run.nodes[i]
            reason = (
                core.state_reason[i]
                if core.explicit_state[i] == 1
                else f"no data for {cfg.stale_after_s:g} s"
            )
            core.alerts.condition(
                t,
                name,
                "stale",
                bool(stale[i]),
                f"{name} stale: {reason}",
                cleared_message=f"{name} reporting again",
            )
        self._stale_alerted = stale
        # Stragglers: running nodes below the median of running nodes, for long enough.
        rates, _ = core.window_rates(t, cfg.straggler_window_s)
        running = (state == 0) & (core.tokens > 0) & (t >= min(cfg.straggler_window_s, cfg.window_s * 3))
        below = below_median_pct(rates, running)
        # Hysteresis: a node becomes a straggler past straggler_pct (held for straggler_hold_s) and stops
        # being one only back within a smaller band, so noise around the threshold is one alert, not ten.
        slow = below > cfg.straggler_pct
        clear_pct = cfg.straggler_pct * _STRAGGLER_CLEAR_FRACTION
        still_slow = self.straggling & (below > clear_pct)  # NaN (not running) compares False: cleared
        self.straggler_since = np.where(slow, np.fmin(self.straggler_since, t), np.nan)
        self.straggling = (slow & (t - self.straggler_since >= cfg.straggler_hold_s)) | still_slow
        for i in np.flatnonzero(self.straggling | self._straggler_alerted).tolist():
            name = run.nodes[i]
            core.alerts.condition(
                t,
                name,
                "straggler",
                bool(self.straggling[i]),
                f"{name} straggler: {below[i]:.1f}% below the median node",
                cleared_message=f"{name} back within {clear_pct:g}% of the median",
            )
        self._straggler_alerted = self.straggling.copy()
        self._throttle(t, state)
        if run.scenario == "Server":
            slas: tuple[tuple[LatencyMetric, float], ...] = (
                ("ttft", cfg.ttft_sla_s),
                ("tpot", cfg.tpot_sla_s),
            )
            for metric, limit in slas:
                hist = core.rack_latency[metric]
                if hist.total:
                    p99 = hist.quantiles([0.99])[0]
                    core.alerts.condition(
                        t,
                        None,
                        f"sla_{metric}",
                        p99 > limit,
                        f"SLA breach: {metric.upper()} p99 {p99:.3g} s > {limit:g} s",
                        "critical",
                        f"{metric.upper()} p99 back under {limit:g} s",
                    )

    def _throttle(self, t: float, state: np.ndarray) -> None:
        core = self.core
        cfg, run = core.config, core.run
        assert run is not None
        reference = self._reference_clock()
        clock = core.gpu_values[:, :, _SM_CLOCK]
        limiting = (core.gpu_throttle & np.uint64(throttle.LIMITING_REASONS)) != 0
        dropped = clock < reference * (1 - cfg.throttle_clock_drop_pct / 100)
        now_throttled = limiting & dropped & (state[:, None] == 0)
        self.throttle_since = np.where(now_throttled, np.fmin(self.throttle_since, t), np.nan)
        self.throttling = now_throttled & (t - self.throttle_since >= cfg.throttle_hold_s)
        node_throttling: np.ndarray = np.asarray(self.throttling.any(axis=1))
        for i in np.flatnonzero(node_throttling | self._throttle_alerted).tolist():
            name = run.nodes[i]
            message = ""
            if node_throttling[i]:
                g = int(np.argmax(self.throttling[i]))
                names = ", ".join(throttle.reason_names(int(core.gpu_throttle[i, g])))
                drop = (1 - clock[i, g] / reference) * 100
                message = (
                    f"{name} throttling: GPU{g} SM clock {clock[i, g]:.0f} MHz "
                    f"({drop:.0f}% below {reference:.0f}) [{names}]"
                )
            core.alerts.condition(
                t,
                name,
                "throttle",
                bool(node_throttling[i]),
                message,
                cleared_message=f"{name} clocks recovered",
            )
        self._throttle_alerted = node_throttling

    def _reference_clock(self) -> float:
        """The rack's typical top SM clock (median over GPUs of each one's maximum), refreshed every
        30 ticks: it moves slowly, and a median per tick would dominate the core's cost."""
        core = self.core
        if core.ticks_sampled >= self._reference_due:
            finite = core.sm_clock_max[np.isfinite(core.sm_clock_max)]
            self._reference = float(np.median(finite)) if finite.size else math.nan
            self._reference_due = core.ticks_sampled + _REFERENCE_EVERY_TICKS
        return self._reference
