"""Each node's :class:`~tokenwatch.core.node_outcome.NodeOutcome` read from a core's state: the nodes
down or stale at a run time, since when, and the share of their samples they completed."""

from __future__ import annotations

import math

import numpy as np

from tokenwatch.base.events import FloatArray
from tokenwatch.core.config import STATE_CODE
from tokenwatch.core.node_outcome import WHOLE, NodeOutcome
from tokenwatch.core.state import RackState

_DOWN = STATE_CODE["down"]
_STALE = STATE_CODE["stale"]


def node_outcomes(state: RackState, t: float) -> tuple[NodeOutcome, ...]:
    """Each node's outcome at run time ``t`` (the state's now, or its end): down or stale nodes with
    since when and the share of their samples done; every other node :data:`WHOLE`."""
    codes = state.effective_state(t)
    planned = _planned_samples(state)
    out: list[NodeOutcome] = []
    for i, code in enumerate(codes.tolist()):
        if code not in (_DOWN, _STALE):
            out.append(WHOLE)
            continue
        since, _ = state.why_stopped(i, code)
        share = state.samples[i] / planned[i] if planned[i] > 0 else math.nan
        worked = float(state.t_last_change[i] - state.t_first[i])
        out.append(
            NodeOutcome("down" if code == _DOWN else "stale", float(since), min(1.0, float(share)), worked)
        )
    return tuple(out)


def _planned_samples(state: RackState) -> FloatArray:
    """The samples each node's LoadGen was given (its detail log's plan, else the run's total split
    evenly); NaN where neither is known."""
    plan = np.asarray(state.verdict.plan_samples, np.float64)
    total = state.run.total_samples
    if total:
        plan = np.where(np.isnan(plan), total / max(1, len(state.run.nodes)), plan)
    return plan
