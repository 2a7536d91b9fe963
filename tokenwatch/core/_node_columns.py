"""A snapshot's per-node columns that cost the most at fleet size, each in one numpy pass over the nodes.

At 1,000 racks (18,000 nodes, 72,000 GPUs) a Python loop per node, or one numpy pass per GPU figure, per
snapshot cost milliseconds each (:func:`tokenwatch.core.rack_snapshot.build_snapshot` reads these). Each
gives the figures the plain per-node form gave, to the bit (``tests/core/test_node_columns.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from tokenwatch.base.events import GPU_METRICS, NODE_STATES, FloatArray, NodeState
from tokenwatch.core._state import RackState
from tokenwatch.core.causes._cause import Cause
from tokenwatch.core.config import STATE_CODE
from tokenwatch.core.node_spread import below_median_pct
from tokenwatch.core.snapshot import Later, NodeColumns

_POWER = GPU_METRICS.index("power_w")
_LIMIT = GPU_METRICS.index("power_limit_w")
_SM = GPU_METRICS.index("sm_clock_mhz")
_HBM = GPU_METRICS.index("hbm_used_mib")
_TEMP = GPU_METRICS.index("temp_c")
_STALE, _DOWN = STATE_CODE["stale"], STATE_CODE["down"]
_STATE_NAMES = np.array(NODE_STATES, dtype=object)
_ENERGY_SOURCE_NAMES = np.array(["", "", "power", "counter"], dtype=object)  # 2 x has energy + from counter


def state_names(codes: np.ndarray) -> tuple[NodeState, ...]:
    """Each node's state name from its code."""
    return tuple(_STATE_NAMES[codes].tolist())


def energy_source_names(has_energy: np.ndarray, from_counter: np.ndarray) -> tuple[str, ...]:
    """Per node: ``counter`` or ``power`` (where its energy comes from), "" where it has none."""
    return tuple(_ENERGY_SOURCE_NAMES[2 * has_energy.astype(np.int64) + from_counter].tolist())


@dataclass(frozen=True, slots=True)
class GpuSums:
    """Per node, over its GPUs, in one numpy pass: ``sums`` of power, power limit, SM clock and HBM used
    (NaN left out, 0 where none: ``np.nansum``'s figures) and the mean SM clock (``np.nanmean``'s)."""

    sums: FloatArray
    sm_mean: FloatArray


_SUMMED = [_POWER, _LIMIT, _SM, _HBM]


def gpu_sums(gpu: FloatArray) -> GpuSums:
    """The per-node sums of ``gpu`` (nodes, GPUs, ``GPU_METRICS``): see :class:`GpuSums`."""
    picked = gpu[:, :, _SUMMED]
    known = ~np.isnan(picked)
    sums = np.where(known, picked, 0.0).sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        sm_mean = sums[:, 2] / known[:, :, 2].sum(axis=1)
    return GpuSums(sums, sm_mean)


def sparklines(state: RackState, points: int) -> np.ndarray:
    """(nodes, points) per-tick rates, oldest first; NaN for ticks at which the node was down or stale
    (its counter stood still because nothing came, not because it did no work)."""
    return sparkline_maker(state, points)()


def sparkline_maker(state: RackState, points: int) -> Callable[[], np.ndarray]:
    """What makes :func:`sparklines`' figures of now whenever it is called: the ring rows they are made
    from copied now (the rings go on), the rates made when called. At 18,000 nodes x 60 points the copy
    is ~1 ms, the rates ~4 ms that a fleet board, which draws no sparkline, no longer pays."""
    ring = state.recent_tokens
    slots = ring.ordered_slots()[-(points + 1) :]
    nodes = len(state.run.nodes)
    if len(slots) < 2:
        return lambda: np.zeros((nodes, 0))
    first, last = int(slots[0]), int(slots[-1])
    states = state.recent_state.values  # pushed in lockstep with the tokens: the same slots
    if last > first:  # one run of storage: one copy of it
        cum, codes = ring.values[first : last + 1].copy(), states[first + 1 : last + 1].copy()
    else:
        cum, codes = ring.values.take(slots, axis=0), states.take(slots[1:], axis=0)
    gaps = np.diff(ring.times[slots])

    def make() -> np.ndarray:
        rates = np.subtract(cum[1:], cum[:-1])
        rates /= gaps[:, None]
        silent = codes == _STALE
        silent |= codes == _DOWN
        np.copyto(rates, np.nan, where=silent)
        by_node: np.ndarray = rates.T
        return by_node

    return make


def power_sums(gpu: FloatArray) -> FloatArray:
    """Per node, (power, power limit) summed over its GPUs: the first two of :func:`gpu_sums`' sums, to
    the bit (the same reduction over the same GPUs), without the SM clock's and HBM's."""
    summed: FloatArray = np.empty((len(gpu), 2))
    # Figure by figure from strided views: picking both out first (a fancy index) was a copy of them.
    for column, metric in enumerate((_POWER, _LIMIT)):
        values = gpu[:, :, metric]
        summed[:, column] = np.where(np.isnan(values), 0.0, values).sum(axis=1)
    return summed


def later_columns(
    codes: np.ndarray,
    rates: FloatArray,
    running: np.ndarray,
    gpu: FloatArray,
    energy: tuple[np.ndarray, np.ndarray],
    causes: tuple[Cause | None, ...],
    sparkline: Callable[[], np.ndarray],
) -> Later:
    """The node table's :class:`NodeColumns`, made when first read from these private copies taken with
    the snapshot (state ``codes``, windowed ``rates``, the ``running`` nodes, the fresh ``gpu`` values,
    ``energy`` = (has energy, from its counter), the straggler ``causes``) and ``sparkline``
    (:func:`sparkline_maker`'s, over its own copies): none reads the core's own arrays, so the figures are
    the snapshot's whenever they are read."""

    def make() -> NodeColumns:
        per_node = gpu_sums(gpu)
        has_energy, from_counter = energy
        return NodeColumns(
            state=state_names(codes),
            delta_vs_median_pct=-below_median_pct(rates, running),
            sm_clock_mhz=per_node.sm_mean,
            hbm_used_mib=np.where(np.isfinite(gpu[:, :, _HBM]).any(axis=1), per_node.sums[:, 3], np.nan),
            temp_c=np.fmax.reduce(gpu[:, :, _TEMP], axis=1),  # what np.nanmax does, without its warning
            energy_source=energy_source_names(has_energy, from_counter),
            cause_text=("",) * len(causes)
            if causes.count(None) == len(causes)
            else tuple(c.text if c is not None else "" for c in causes),
            sparkline_tokens_per_s=sparkline(),
        )

    return Later(make)
