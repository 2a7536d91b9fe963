"""Each node's :class:`~tokenwatch.core.node_outcome.NodeOutcome` read from a core's state: the nodes
down or stale at a run time, since when, and the share of their samples they completed."""

from __future__ import annotations

import math

import numpy as np

from tokenwatch.base.events import FloatArray
from tokenwatch.core._state import RackState
from tokenwatch.core.config import STATE_CODE
from tokenwatch.core.node_outcome import WHOLE, NodeOutcome, Stopped

_DOWN = STATE_CODE["down"]
_STALE = STATE_CODE["stale"]
_FINISHED = STATE_CODE["finished"]


def node_outcomes(state: RackState, t: float, *, cut_short: bool = False) -> tuple[NodeOutcome, ...]:
    """Each node's outcome at run time ``t`` (the state's now, or its end): down or stale nodes with
    since when and the share of their samples done; with ``cut_short`` (the run was interrupted, or its
    stream stops with no run end) every node still at work is unfinished at ``t``; every other node
    :data:`WHOLE`."""
    codes = state.effective_state(t)
    planned = _planned_samples(state)
    out: list[NodeOutcome] = []
    for i, code in enumerate(codes.tolist()):
        unfinished = cut_short and code != _FINISHED
        if code not in (_DOWN, _STALE) and not unfinished:
            out.append(WHOLE)
            continue
        since = state.why_stopped(i, code)[0] if code in (_DOWN, _STALE) else t
        share = state.samples[i] / planned[i] if planned[i] > 0 else math.nan
        worked = float(state.t_last_change[i] - state.t_first[i])
        how: Stopped = "down" if code == _DOWN else "stale" if code == _STALE else "unfinished"
        out.append(NodeOutcome(how, float(since), min(1.0, float(share)), worked))
    return tuple(out)


def _planned_samples(state: RackState) -> FloatArray:
    """The samples each node's LoadGen was given (its detail log's plan, else the run's total split
    evenly); NaN where neither is known."""
    plan = np.asarray(state.verdict.plan_samples, np.float64)
    total = state.run.total_samples
    if total:
        plan = np.where(np.isnan(plan), total / max(1, len(state.run.nodes)), plan)
    return plan


def was_cut_short(state: RackState) -> bool:
    """Whether the run stopped before its end: interrupted, or a stream that stops with no run end."""
    return not state.ended or state.end_reason == "interrupted"
