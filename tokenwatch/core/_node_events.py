"""The engine's own handlers: what a data event changes in the node-level part of a :class:`RackState`
(counters, GPU readings, latency histograms, node states, log lines, the engines' queues). The router
(:mod:`tokenwatch.core._ingest`) calls them; time has already been advanced to the event's ``t``.

Counters are cumulative: a counter below its last value restarted (the source started over, or a
reconnect re-read it from zero), so what it had counted is kept as an offset and nothing is lost or
counted twice.
"""

from __future__ import annotations

import math

import numpy as np

from tokenwatch.base.events import (
    GPU_METRICS,
    NODE_STATES,
    EngineQueue,
    GpuBatch,
    GpuSample,
    LatencyBatch,
    LogLine,
    NodeStatus,
    Progress,
    ProgressBatch,
)
from tokenwatch.core._state import RackState
from tokenwatch.core.causes._gpu_evidence import note_gpu_readings
from tokenwatch.core.config import STATE_CODE

_SM_CLOCK = GPU_METRICS.index("sm_clock_mhz")
_ENERGY = GPU_METRICS.index("energy_j")


def _node(state: RackState, name: str) -> int | None:
    i = state.index.get(name)
    if i is None:
        state.skips.skip(state.now, f"unknown node {name!r}")
    return i


def _seen(state: RackState, i: int | np.ndarray, t: float) -> None:
    """Node(s) ``i`` sent an event at ``t``: learn their cadence, then mark them seen."""
    if isinstance(i, int | np.integer):
        last = float(state.last_seen[i])
        state.cadence.note_one(int(i), t, last)
        if not last >= t:  # NaN (never seen) included
            state.last_seen[i] = t
        return
    rows = np.unique(i)  # a batch names a node once per GPU row
    state.cadence.note_rows(rows, t, state.last_seen[rows])
    state.last_seen[rows] = np.fmax(state.last_seen[rows], t)


def _seen_all(state: RackState, t: float) -> None:
    """Every node sent an event at ``t`` (a whole-rack batch)."""
    state.cadence.note_rows(slice(None), t, state.last_seen)
    np.fmax(state.last_seen, t, out=state.last_seen)


def on_gpu_sample(state: RackState, ev: GpuSample) -> None:
    i = _node(state, ev.node)
    if i is None:
        return
    if not 0 <= ev.gpu < state.gpu_values.shape[1]:
        state.skips.skip(state.now, f"GPU index {ev.gpu} outside 0..{state.gpu_values.shape[1] - 1}")
        return
    row = np.array([getattr(ev, m) for m in GPU_METRICS])
    _gpu_extras(state, ev.t, (np.array([i]), np.array([ev.gpu])), row[None, :])
    state.gpu_values[i, ev.gpu] = row
    state.gpu_throttle[i, ev.gpu] = ev.throttle_reasons
    state.sm_clock_max[i, ev.gpu] = np.fmax(state.sm_clock_max[i, ev.gpu], ev.sm_clock_mhz)
    state.gpu_last_seen[i, ev.gpu] = ev.t
    _seen(state, i, ev.t)


def on_gpu_batch(state: RackState, ev: GpuBatch) -> None:
    ni, gi = ev.node_index, ev.gpu
    node = state.layout.one_node(ni, gi)
    if node is not None:  # one node's GPUs in order: row slices, no gathers
        k = len(gi)
        _gpu_extras(state, ev.t, (node, slice(0, k)), ev.values)
        state.gpu_values[node, :k] = ev.values
        state.gpu_throttle[node, :k] = ev.throttle_reasons
        np.fmax(state.sm_clock_max[node, :k], ev.values[:, _SM_CLOCK], out=state.sm_clock_max[node, :k])
        state.gpu_last_seen[node, :k] = ev.t
        _seen(state, node, ev.t)
        return
    if state.layout.whole_rack(ni, gi):
        shape = state.gpu_values.shape
        _gpu_extras(state, ev.t, (slice(None), slice(None)), ev.values.reshape(shape))
        state.gpu_values[:] = ev.values.reshape(shape)
        state.gpu_throttle[:] = ev.throttle_reasons.reshape(shape[:2])
        np.fmax(state.sm_clock_max, state.gpu_values[:, :, _SM_CLOCK], out=state.sm_clock_max)
        state.gpu_last_seen[:] = ev.t
        _seen_all(state, ev.t)
        return
    ok = (ni >= 0) & (ni < len(state.index)) & (gi >= 0) & (gi < state.gpu_values.shape[1])
    if not ok.all():
        state.skips.skip(state.now, "GPU batch rows outside the run's nodes or GPUs")
        ni, gi, values, reasons = ni[ok], gi[ok], ev.values[ok], ev.throttle_reasons[ok]
    else:
        values, reasons = ev.values, ev.throttle_reasons
    _gpu_extras(state, ev.t, (ni, gi), values)
    state.gpu_values[ni, gi] = values
    state.gpu_throttle[ni, gi] = reasons
    state.sm_clock_max[ni, gi] = np.fmax(state.sm_clock_max[ni, gi], values[:, _SM_CLOCK])
    state.gpu_last_seen[ni, gi] = ev.t
    _seen(state, ni, ev.t)


def _gpu_extras(
    state: RackState, t: float, where: tuple[np.ndarray | int | slice, ...], values: np.ndarray
) -> None:
    """What a GPU reading tells beyond its latest values, read before they are overwritten: the energy
    counter's growth (the engine's), and the causes wing's evidence (a power limit that changed, XID and
    NVLink errors), handed to the wing with the rows resolved once. ``values`` is shaped like
    ``state.gpu_values[where]``."""
    if state.config.live_view:
        note_gpu_readings(state.gpu_evidence, t, where, state.gpu_values, values)
    state.energy.note(where, values[..., _ENERGY], t, state.tokens)


def on_engine_queue(state: RackState, ev: EngineQueue) -> None:
    i = _node(state, ev.node)
    if i is None:
        return
    state.engine.note(i, ev)
    _seen(state, i, ev.t)


def _apply_counters(
    state: RackState, i: np.ndarray | slice, t: float, raw: np.ndarray, *, arrival: bool = True
) -> None:
    """raw: (3, k) new raw counters (tokens, samples, prompt) of nodes ``i`` (a slice = all, in order);
    ``arrival``: the nodes were heard from (False: points a history fills in)."""
    prev = state.raw_counters[:, i]
    restarted = raw < prev
    if restarted.any():
        state.counter_offsets[:, i] += np.where(restarted, prev, 0)
    state.raw_counters[:, i] = raw
    totals = state.counter_offsets[:, i] + raw
    grew = totals[0] > state.tokens[i]
    if isinstance(i, slice):  # the whole rack in order: no gathers
        state.change_gap_s[grew] = t - state.t_read[grew]
        state.t_last_change[grew] = t
        state.tokens[:], state.samples[:], state.prompt_tokens[:] = totals
        first = np.isnan(state.t_first)
        state.counters_at_first[:, first] = totals[:2, first]
        state.t_first[first] = t
        state.t_read[:] = t
        if arrival:
            _seen_all(state, t)
            _catch_up(state, t)
        return
    state.change_gap_s[i[grew]] = t - state.t_read[i[grew]]
    state.t_last_change[i[grew]] = t
    state.tokens[i], state.samples[i], state.prompt_tokens[i] = totals
    first = np.isnan(state.t_first[i])
    state.counters_at_first[:, i[first]] = totals[:2, first]
    state.t_first[i[first]] = t
    state.t_read[i] = t
    if arrival:
        _seen(state, i, t)
        _catch_up(state, t, i)


def _catch_up(state: RackState, t: float, rows: np.ndarray | None = None) -> None:
    """Nodes ``rows`` (None: all) read at ``t``: the first reading after a mid-run attach is each one's
    catch-up (:meth:`EnergyCounters.catch_up`), as a single node's progress is. Without it a node whose
    counters come in batches (a fleet's drill-down, read through the server) divided every token since
    the run's start by the energy since its first GPU reading: twice its tok/J a minute after the attach."""
    energy = state.energy
    if t <= energy.attach_s or energy.caught_up.all():
        return
    nodes = np.arange(len(energy.caught_up)) if rows is None else np.unique(rows)
    for node in nodes[~energy.caught_up[nodes]].tolist():  # each node once in a run
        energy.catch_up(node, t, int(state.tokens[node]))


def on_progress(state: RackState, ev: Progress) -> None:
    i = _node(state, ev.node)
    if i is None:
        return
    # One node, three counters: plain Python ints (a live source sends one of these per line; the
    # array path costs several times more). A counter the source does not report keeps its value.
    raw, offsets = state.raw_counters, state.counter_offsets
    new = (ev.tokens_done, ev.samples_done, ev.prompt_tokens_done)
    totals = []
    for k in range(3):
        prev = int(raw[k, i])
        reported = new[k]
        value = prev if reported is None else int(reported)
        if value < prev:  # restarted: keep what it had counted
            offsets[k, i] += prev
        raw[k, i] = value
        totals.append(int(offsets[k, i]) + value)
    if totals[0] > state.tokens[i]:
        state.change_gap_s[i] = ev.t - state.t_read[i]
        state.t_last_change[i] = ev.t
    state.tokens[i], state.samples[i], state.prompt_tokens[i] = totals
    if math.isnan(state.t_first[i]):
        state.t_first[i] = ev.t
        state.counters_at_first[0, i], state.counters_at_first[1, i] = totals[0], totals[1]
    state.t_read[i] = ev.t
    if not ev.filled:  # a filled-in point of history is no arrival: the node's cadence is its records'
        _seen(state, i, ev.t)
    if not state.energy.caught_up[i] and ev.t > state.energy.attach_s:
        state.energy.catch_up(i, ev.t, totals[0])


def on_progress_batch(state: RackState, ev: ProgressBatch) -> None:
    ni = ev.node_index
    whole = state.layout.whole_nodes(ni)
    rows: np.ndarray | slice = slice(None)
    if not whole:
        ok = (ni >= 0) & (ni < len(state.index))
        if not ok.all():
            state.skips.skip(state.now, "progress batch rows outside the run's nodes")
            ni, rows = ni[ok], ok
    index: np.ndarray | slice = slice(None) if whole else ni
    raw = np.empty((3, len(ni)), np.int64)
    raw[0] = ev.tokens_done[rows]
    raw[1] = ev.samples_done[rows]
    prompt = ev.prompt_tokens_done
    raw[2] = prompt[rows] if prompt is not None else state.raw_counters[2, index]
    _apply_counters(state, index, ev.t, raw, arrival=not ev.filled)


def on_latency(state: RackState, ev: LatencyBatch) -> None:
    i = _node(state, ev.node)
    if i is None or ev.metric not in state.latency:
        return
    state.latency[ev.metric][i].add(ev.values_s, ev.counts)
    state.rack_latency[ev.metric].add(ev.values_s, ev.counts)
    finite = ev.values_s[np.isfinite(ev.values_s)]
    if finite.size:
        state.latency_max[ev.metric] = float(np.fmax(state.latency_max[ev.metric], finite.max()))
        state.node_latency_max[ev.metric][i] = np.fmax(state.node_latency_max[ev.metric][i], finite.max())
    _seen(state, i, ev.t)


def on_status(state: RackState, ev: NodeStatus) -> None:
    i = _node(state, ev.node)
    if i is None or ev.state not in STATE_CODE:
        return
    before = NODE_STATES[state.explicit_state[i]]
    if ev.state != before:
        state.state_since[i] = ev.t
    state.explicit_state[i] = STATE_CODE[ev.state]
    state.state_reason[i] = ev.reason
    name = ev.node
    state.alerts.condition(
        ev.t, name, "down", ev.state == "down", f"{name} down: {ev.reason}", "critical", f"{name} back up"
    )
    if ev.state == "finished" and before != "finished":
        state.alerts.event(ev.t, name, "finished", f"{name} finished", "info")
    if ev.state in ("up", "finished"):
        _seen(state, i, ev.t)


def on_log_line(state: RackState, ev: LogLine) -> None:
    i = _node(state, ev.node)
    if i is None:
        return
    lines = state.log_lines[i]
    lines.append((ev.t, ev.text))
    if len(lines) > state.config.log_lines_per_node:
        del lines[: len(lines) - state.config.log_lines_per_node]
