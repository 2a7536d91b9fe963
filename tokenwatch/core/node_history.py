"""Per-node detail for the node screen and reports: per-GPU time series and the node's throughput share."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tokenwatch.base.events import FloatArray, UIntArray
from tokenwatch.core._state import RackState
from tokenwatch.core.config import GPU_SERIES_METRICS, STATE_CODE

_STALE, _DOWN = STATE_CODE["stale"], STATE_CODE["down"]


@dataclass(frozen=True, slots=True, eq=False)
class NodeHistory:
    """Recent full-resolution series of one node (copies). ``gpu_series[metric]`` is (gpus, points).

    The series end where the node's data ended: ticks at which a GPU was silent (its node down or
    stale) are NaN, as are the node's rate and share while it was down or stale.
    """

    node: str
    times: FloatArray
    gpu_series: dict[str, FloatArray]
    tokens_per_s: FloatArray  # the node's rate per tick (len(times) - 1 points, aligned on times[1:])
    share_pct: FloatArray  # the node's share of the rack's rate per tick, in %
    log_lines: tuple[tuple[float, str], ...]
    # (gpus, points) uint64 clock-event reason bitmasks on ``times`` (names: tokenwatch.base.throttle);
    # 0 where a GPU had no reason set or no fresh reading.
    throttle_reasons: UIntArray


def node_history(state: RackState, node: str, last: int | None = None) -> NodeHistory:
    """Raises KeyError for a node the run does not have."""
    i = state.index[node]
    times, gpu = state.recent_gpu.column(i, last)  # (points, gpus, metrics): this node's columns only
    series = {m: gpu[:, :, k].T.copy() for k, m in enumerate(GPU_SERIES_METRICS)}
    _, reasons = state.recent_throttle.column(i, last)  # pushed in lockstep with recent_gpu: same times
    t_tok, tokens = state.recent_tokens.view(None if last is None else last + 1)
    if len(t_tok) >= 2:
        dt = np.diff(t_tok)
        rack = np.diff(tokens.sum(axis=1)) / dt
        _, codes = state.recent_state.column(i, None if last is None else last + 1)
        silent = (codes[1:] == _STALE) | (codes[1:] == _DOWN)
        mine = np.where(silent, np.nan, np.diff(tokens[:, i]) / dt)
        with np.errstate(invalid="ignore", divide="ignore"):
            share = np.where(rack > 0, mine / rack * 100.0, np.nan)
    else:
        mine = share = np.zeros(0)
    return NodeHistory(
        node, times, series, mine, share, tuple(state.log_lines[i]), reasons.T.astype(np.uint64)
    )
