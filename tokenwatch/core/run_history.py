"""The whole run as downsampled series, for reports and exports (read-only; copies).

The state keeps the whole run in at most ``history_points`` points (see :class:`DownsampledSeries`);
this module turns those into the series people plot: per-node and rack tokens/s between points,
node and rack power, and per-GPU telemetry named by metric. Nothing here mutates the state.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from tokenwatch.base.events import FloatArray
from tokenwatch.core._state import RackState
from tokenwatch.core.alerts import Alert
from tokenwatch.core.config import GPU_SERIES_METRICS
from tokenwatch.core.nan_math import nan_quiet


@dataclass(frozen=True, slots=True, eq=False)
class RunHistory:
    """Series over the whole run. Times ``t`` in seconds since run start; rates in tokens/s; power in W.

    ``node_tokens_per_s[k]`` is each node's mean rate between points ``k-1`` and ``k`` (row 0 is NaN:
    there is no earlier point). ``gpu_values`` has shape (gpu points, nodes, gpus, len(gpu_metrics));
    each point is the mean of the ticks it covers, NaN where a GPU did not report (never, or its node was
    down or stale at that point).
    """

    nodes: tuple[str, ...]
    gpus_per_node: int
    point_width_s: float
    times: FloatArray
    node_tokens_per_s: FloatArray
    rack_tokens_per_s: FloatArray
    node_power_w: FloatArray
    rack_power_w: FloatArray
    node_tokens_done: FloatArray  # cumulative generated tokens per node at each point
    node_state: np.ndarray  # (points, nodes) state codes at each point: 0 up, 1 stale, 2 down, 3 finished
    gpu_times: FloatArray
    gpu_metrics: tuple[str, ...]
    gpu_values: FloatArray
    alerts: tuple[Alert, ...] = ()  # the (bounded) alert log, oldest first

    @property
    def points(self) -> int:
        return len(self.times)

    def gpu_metric(self, name: str) -> FloatArray:
        """(gpu points, nodes, gpus) of one metric; KeyError names the metrics there are."""
        if name not in self.gpu_metrics:
            raise KeyError(f"no GPU series {name!r}; there are {', '.join(self.gpu_metrics)}")
        return self.gpu_values[..., self.gpu_metrics.index(name)]

    def gpu_rows(self, name: str) -> FloatArray:
        """(nodes * gpus, gpu points): one row per GPU, node-major (node01 GPU0, node01 GPU1, ...)."""
        values = self.gpu_metric(name)
        return values.reshape(len(values), -1).T.copy()

    def node_gpu_mean(self, name: str) -> FloatArray:
        """(nodes, gpu points): each node's mean over its GPUs (NaN where none reported)."""
        return nan_quiet(np.nanmean, self.gpu_metric(name), axis=2).T.copy()

    def node_rate_quantiles(self, qs: tuple[float, ...]) -> FloatArray:
        """(len(qs), points): quantiles of the nodes' rates at each point (for fleets too big to draw
        one line per node). Down nodes count as their real rate, 0."""
        return np.asarray(nan_quiet(np.nanquantile, self.node_tokens_per_s, qs, axis=1), dtype=np.float64)

    def rack_tokens_per_s_per_w(self) -> FloatArray:
        """Rack tokens/s divided by rack power at each point (NaN where no power was reported)."""
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(self.rack_power_w > 0, self.rack_tokens_per_s / self.rack_power_w, np.nan)


def node_tokens_history(state: RackState) -> tuple[FloatArray, FloatArray]:
    """(times, (points, nodes) cumulative tokens) over the whole run, each increase spread back over
    the points its counter stood still before it (:func:`spread_increases`)."""
    times, cumulative = state.history_tokens.view()
    return times, spread_increases(times, cumulative)


def spread_increases(times: FloatArray, cumulative: FloatArray) -> FloatArray:
    """``cumulative`` with every run of equal points that ends in an increase drawn straight from where
    the run began to the increase. A reading covers the time since the node's previous one: a server
    logging every 10 s, or a node back from minutes stale, brings that whole time's tokens at one point,
    which would read as one point of many times the rack's rate. A counter still standing at the end
    stays flat (nothing is known of it yet). Copies only the columns it changes."""
    points = len(times)
    if points < 3:
        return cumulative
    changed = np.ones(cumulative.shape, bool)
    changed[1:] = cumulative[1:] != cumulative[:-1]
    # Only nodes with a standing run (a point equal to the one before) followed later by an increase.
    columns = np.flatnonzero((~changed[1:-1]).any(axis=0))
    if not len(columns):
        return cumulative
    sub, moved = cumulative[:, columns], changed[:, columns]
    index = np.arange(points)[:, None]
    start = np.maximum.accumulate(np.where(moved, index, 0), axis=0)  # where each point's value began
    rose = np.zeros(sub.shape, bool)
    rose[1:] = sub[1:] > sub[:-1]
    end = np.minimum.accumulate(np.where(rose, index, points)[::-1], axis=0)[::-1]  # the next increase
    fill = ~moved & (end < points)
    if not fill.any():
        return cumulative
    end = np.minimum(end, points - 1)
    cols = np.arange(len(columns))[None, :]
    t_start, t_end = times[start], times[end]
    v_start, v_end = sub[start, cols], sub[end, cols]
    with np.errstate(invalid="ignore", divide="ignore"):
        line = v_start + (v_end - v_start) * (times[:, None] - t_start) / (t_end - t_start)
    out = cumulative.copy()
    out[:, columns] = np.where(fill, line, sub)
    return out


def run_history(state: RackState) -> RunHistory:
    """The whole-run series of everything ingested so far, and the alert log."""
    if not state.config.whole_run_gpu_series:
        raise ValueError("the core was made without the GPUs' whole-run series (whole_run_gpu_series)")
    run = state.run
    times, cumulative = node_tokens_history(state)
    _, power = state.history_power.view()
    n = len(run.nodes)
    rates = np.full((len(times), n), np.nan)
    if len(times) >= 2:
        with np.errstate(invalid="ignore", divide="ignore"):
            rates[1:] = np.diff(cumulative, axis=0) / np.diff(times)[:, None]
    rack = np.full(len(times), np.nan)
    rack[1:] = rates[1:].sum(axis=1) if len(times) >= 2 else rack[1:]
    gpu_times, gpu_values = state.history_gpu.view()
    state_times, states = state.history_state.view()
    node_state = states.astype(np.int8) if len(states) else np.zeros((0, n), np.int8)
    if len(gpu_times) and len(state_times):
        # The state carries a silent (down or stale) node's last telemetry forward; here it reads as missing.
        at = np.clip(np.searchsorted(state_times, gpu_times, side="left"), 0, len(state_times) - 1)
        silent = (node_state[at] == 1) | (node_state[at] == 2)
        gpu_values = np.where(silent[:, :, None, None], np.nan, gpu_values)
    rack_power = power.sum(axis=1) if len(power) else np.zeros(0)
    if len(power) and not state.has_power():
        rack_power = np.full(len(power), math.nan)  # no GPU ever reported power: unknown, not 0 W
    return RunHistory(
        nodes=run.nodes,
        gpus_per_node=run.gpus_per_node,
        point_width_s=state.history_tokens.width_s,
        times=times.copy(),
        node_tokens_per_s=rates,
        rack_tokens_per_s=rack,
        node_power_w=power.copy(),
        rack_power_w=rack_power,
        node_tokens_done=cumulative.copy(),
        node_state=node_state,
        gpu_times=gpu_times.copy(),
        gpu_metrics=GPU_SERIES_METRICS,
        gpu_values=gpu_values.copy(),
        alerts=state.alerts.newest_first()[::-1],
    )
