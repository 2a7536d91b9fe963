"""The evidence a cause hint is judged from, read off the state over the straggler test's window.

Per GPU, the mean of each telemetry series over the window (from the recent per-GPU ring, sampled every
``straggler_subwindow_s``: a mean of a dozen points per GPU, not sixty, so 4,608 GPUs cost a few
milliseconds), the clock-event reasons set at any point of it, and the rack's typical value of each
series (the median over the running nodes' GPUs). And the moment a piece of evidence began: walking back
from now over a node's full-resolution series while the series stays on the far side of the halfway
mark between the rack's typical value and the node's value now, so a step is found where it happened
and noise on either side of it does not move it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from tokenwatch.base.events import GPU_METRICS, FloatArray
from tokenwatch.core._state import RackState
from tokenwatch.core.config import GPU_SERIES_METRICS, STATE_CODE
from tokenwatch.core.nan_math import nan_quiet, nanmean_first_axis
from tokenwatch.core.node_spread import median_of

SERIES = {name: k for k, name in enumerate(GPU_SERIES_METRICS)}
_LIMIT = GPU_METRICS.index("power_limit_w")
_HBM_TOTAL = GPU_METRICS.index("hbm_total_mib")
_HBM_TEMP = GPU_METRICS.index("hbm_temp_c")
_UP = STATE_CODE["up"]


@dataclass(frozen=True, slots=True, eq=False)
class RackEvidence:
    """The rack over the window ending at ``t``. ``gpu_mean`` (nodes, gpus, series) per-GPU means, NaN
    where a GPU had no fresh reading; ``typical`` (series,) their median over the running nodes' GPUs;
    ``reasons`` (nodes, gpus) every clock-event reason set at some point of the window; ``limit`` the
    GPUs' current power limits (nodes, gpus) and ``typical_limit_w`` their median; ``queue`` (nodes, 3)
    the engines' mean gauges over the window and ``typical_queue`` their medians over running nodes."""

    t: float
    window_s: float
    running: np.ndarray
    gpu_mean: FloatArray
    typical: FloatArray
    reasons: np.ndarray
    limit: FloatArray
    typical_limit_w: float
    hbm_total_mib: FloatArray
    hbm_temp_c: FloatArray
    queue: FloatArray
    typical_queue: FloatArray
    peer_rates: PeerRates | None = None

    def mean(self, metric: str) -> FloatArray:
        return self.gpu_mean[:, :, SERIES[metric]]

    def typical_of(self, metric: str) -> float:
        return float(self.typical[SERIES[metric]])


@dataclass(frozen=True, slots=True, eq=False)
class PeerRates:
    """The nodes' rates over the recent ring's ``straggler_subwindow_s`` sub-windows, read once per
    judgement: ``times`` (k + 1,) the sub-window edges, ``rates`` (k, nodes), and per sub-window the
    running nodes' rates sorted (NaN last) with their NaN count, so the median of a node's peers (the
    running nodes but itself) is two look-ups, not a median over the rack for every straggler."""

    times: FloatArray
    rates: FloatArray
    running: np.ndarray
    sorted_running: FloatArray
    nan_running: np.ndarray

    def peer_median(self, node: int) -> FloatArray | None:
        """Per sub-window, the median rate of the running nodes other than ``node`` (NaN where one of them
        has no rate, as ``np.median`` gives); None when it has no peer. Equal to ``np.median`` over them."""
        m = self.sorted_running.shape[1]
        if not self.running[node]:
            size, removed = m, None
        else:
            size, value = m - 1, self.rates[:, node]
            # Its value's place in each sorted row (NaN sorts last: removing the last one).
            with np.errstate(invalid="ignore"):
                below = (self.sorted_running < value[:, None]).sum(axis=1)
            removed = np.where(np.isnan(value), m - 1, below)
        if size <= 0:
            return None
        rows = np.arange(self.rates.shape[0])
        middle = np.array([(size - 1) // 2, size // 2])[None, :].repeat(len(rows), axis=0)
        if removed is not None:
            middle = middle + (middle >= removed[:, None])
        pair = self.sorted_running[rows[:, None], middle]
        nans = self.nan_running - (np.isnan(self.rates[:, node]) if removed is not None else 0)
        return np.where(nans > 0, np.nan, (pair[:, 0] + pair[:, 1]) / 2.0)


def peer_rates(state: RackState, t: float, running: np.ndarray) -> PeerRates | None:
    """The rates :func:`rate_since` compares a node with; None when the ring is too short."""
    ring = state.recent_tokens
    oldest = ring.oldest()
    if oldest is None or not running.any():
        return None
    step = state.config.straggler_subwindow_s
    count = int((t - oldest[0]) // step)
    if count < 2:
        return None
    slots = ring.slots_at_or_before(t - step * np.arange(count, -1, -1.0))
    times, tokens = ring.times[slots], ring.values[slots]
    if len(times) < 3:
        return None
    rates = np.diff(tokens, axis=0) / np.diff(times)[:, None]
    ranked = np.sort(rates[:, running], axis=1)
    return PeerRates(times, rates, running, ranked, np.isnan(ranked).sum(axis=1))


def rack_evidence(state: RackState, t: float, codes: np.ndarray) -> RackEvidence:
    cfg = state.config
    window = cfg.straggler_window_s
    ring = state.recent_gpu
    ends = t - cfg.straggler_subwindow_s * np.arange(int(window // cfg.straggler_subwindow_s), -1, -1.0)
    slots = ring.slots_at_or_before(ends)
    slots = slots[ring.times[slots] > t - window - 1e-9] if len(slots) else slots
    n, g = state.gpu_values.shape[:2]
    running = (codes == _UP) & (state.tokens > 0)
    if len(slots):
        gpu_mean = nanmean_first_axis(ring.values[slots])  # the gather is a fresh copy
        reasons = np.bitwise_or.reduce(state.recent_throttle.values[slots], axis=0)
    else:
        gpu_mean = np.full((n, g, len(GPU_SERIES_METRICS)), np.nan)
        reasons = np.zeros((n, g), np.uint64)
    typical = _median_over(gpu_mean[running].reshape(-1, len(GPU_SERIES_METRICS)))
    limit = state.gpu_values[:, :, _LIMIT]
    finite_limits = limit[running][np.isfinite(limit[running])]
    queue = state.engine.window_mean(t, window) if state.engine.any_seen else np.full((n, 3), np.nan)
    return RackEvidence(
        t=t,
        window_s=window,
        running=running,
        gpu_mean=gpu_mean,
        typical=typical,
        reasons=reasons,
        limit=limit,
        typical_limit_w=median_of(finite_limits) if finite_limits.size else math.nan,
        hbm_total_mib=state.gpu_values[:, :, _HBM_TOTAL],
        hbm_temp_c=state.gpu_values[:, :, _HBM_TEMP],
        queue=queue,
        typical_queue=_median_over(queue[running]) if state.engine.any_seen else np.full(3, np.nan),
        peer_rates=peer_rates(state, t, running),
    )


def _median_over(rows: FloatArray) -> FloatArray:
    """Per column, the median of the finite values (NaN for a column with none)."""
    out = np.full(rows.shape[1], np.nan)
    for k in range(rows.shape[1]):
        column = rows[:, k]
        column = column[np.isfinite(column)]
        if column.size:
            out[k] = median_of(column)
    return out


def series_since(
    state: RackState, node: int, gpus: tuple[int, ...], metric: str, typical: float, now_value: float
) -> float:
    """When the node's ``metric`` on ``gpus`` moved to where it is now: the start of the newest run of
    points (over the recent full-resolution ring) at which every one of those GPUs was past the halfway
    mark between ``typical`` and ``now_value``. Points with no reading neither end nor extend the run.
    NaN when the series does not show it (no points)."""
    times, values = state.recent_gpu.column(node)
    if not len(times) or not (math.isfinite(typical) and math.isfinite(now_value)):
        return math.nan
    series = values[:, list(gpus), SERIES[metric]]  # (points, len(gpus))
    mark = (typical + now_value) / 2.0
    with np.errstate(invalid="ignore"):
        past = series < mark if now_value < typical else series > mark
    missing = np.asarray(np.isnan(series).all(axis=1))
    holds = np.asarray(past.all(axis=1)) | missing
    return _run_start(times, holds, ~missing)


def rate_since(peers: PeerRates | None, node: int) -> float:
    """When the node's rate fell to where it is now against the median running node: over the recent
    ring's ``straggler_subwindow_s`` sub-windows (``peers``, :func:`peer_rates`), the start of the newest
    run of sub-windows at which it was below the median by more than half its deficit over the last one.
    NaN when the ring is too short."""
    if peers is None:
        return math.nan
    median = peers.peer_median(node)
    if median is None:
        return math.nan
    with np.errstate(invalid="ignore", divide="ignore"):
        deficit = np.where(median > 0, 1.0 - peers.rates[:, node] / median, np.nan)
    now = float(np.nanmean(deficit[-2:])) if np.isfinite(deficit[-2:]).any() else math.nan
    if not now > 0:
        return math.nan
    with np.errstate(invalid="ignore"):
        holds = deficit > now / 2.0
    return _run_start(peers.times[:-1], holds, np.isfinite(deficit))


def _run_start(times: FloatArray, holds: np.ndarray, measured: np.ndarray) -> float:
    """The time of the first point of the newest run of ``holds`` ending at the newest point (None-points,
    ``~measured``, continue a run); NaN when the newest measured point does not hold."""
    measured_idx = np.flatnonzero(measured)
    if not measured_idx.size or not holds[measured_idx[-1]]:
        return math.nan
    broken = np.flatnonzero(~holds)
    first = int(broken[-1]) + 1 if broken.size else 0
    # The run starts at its first measured point (a leading gap is not evidence).
    inside = measured_idx[measured_idx >= first]
    return float(times[inside[0]]) if inside.size else math.nan


def span_means(state: RackState, node: int, metric: str, since: float) -> FloatArray:
    """Per GPU of ``node``: the mean of ``metric`` from ``since`` to now (the evidence's own span, so a
    step that began inside the window is told at its size, not averaged with what came before it)."""
    times, values = state.recent_gpu.column(node)
    inside = values[times >= since - 1e-9, :, SERIES[metric]]
    if not len(inside):
        return np.full(values.shape[1], np.nan)
    return nan_quiet(np.nanmean, inside, axis=0)


def span_reasons(state: RackState, node: int, gpus: tuple[int, ...], since: float) -> int:
    """The clock-event reasons set on ``gpus`` at some point from ``since`` to now."""
    times, masks = state.recent_throttle.column(node)
    inside = masks[times >= since - 1e-9][:, list(gpus)]
    return int(np.bitwise_or.reduce(inside, axis=None)) if inside.size else 0
