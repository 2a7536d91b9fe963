"""A verdict decided before the run ends: a state that makes VALID impossible turns the projection to
INVALID at the next verdict tick, says why in a sentence, and how much run time stopping now would save.

This module's case is a node down for good (rules broken beyond recovery: :mod:`verdict_beyond`).
Each node is its own LoadGen run and the rack is VALID only when every node's is; a node whose LoadGen
is down cannot write its result, so the rack cannot be VALID.

When is a node down *for good*? A source's down carries no end time, and a node that comes back (an
exporter restarted, an SSH blip, a node rebooted by hand, the simulator's ``node07:down@30m-35m``) may
still finish. Deciding on such a node would tell the user to stop a run that ends VALID, the one mistake
a verdict to bet on must not make; deciding late only costs the minutes of the grace. So a node counts as
lost once it has been down for ``LOST_AFTER_DOWN_S`` (10 min): past the forecast's ``outage_s`` (2 min,
an outage its band already covers) and past a big node's reboot, after which its LoadGen run, which
does not survive the node going down, is gone. Once the run has ended, an unfinished node fails the
verdict whatever the grace (``verdict_view``).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from tokenwatch.base.durations import format_clock
from tokenwatch.core._state import RackState
from tokenwatch.core.config import STATE_CODE
from tokenwatch.core.verdict._beyond import beyond_recovery
from tokenwatch.core.verdict._inputs import projection
from tokenwatch.mlperf.forecast import Band, Forecast, RuleForecast

_DOWN = STATE_CODE["down"]
_SHOWN_NODES = 3
SAVES = "; stopping now saves "  # what a decided sentence adds after its reason
LOST_AFTER_DOWN_S = 600.0  # a node down this long is lost (see the module's docstring), s


def lost_nodes(state: RackState, now: float) -> np.ndarray:
    """Nodes reported down for ``LOST_AFTER_DOWN_S`` or longer: their LoadGen cannot finish."""
    down = state.explicit_state == _DOWN
    with np.errstate(invalid="ignore"):
        long_gone = now - state.state_since >= LOST_AFTER_DOWN_S
    return np.asarray(down & long_gone, dtype=bool)


def rest_end(state: RackState, now: float, lost: np.ndarray) -> Band | None:
    """The projected end of the nodes still running, with its band (None when it cannot be projected, or
    none run): the run ends when they do, without the lost nodes."""
    keep = ~lost
    if not keep.any():
        return None
    fc = projection(state, now, keep)
    return None if fc.end_s is None or not math.isfinite(fc.end_s.value) else fc.end_s


def rest_end_s(state: RackState, now: float, lost: np.ndarray) -> float | None:
    """:func:`rest_end`'s value alone (what a saving is counted to)."""
    end = rest_end(state, now, lost)
    return None if end is None else end.value


def saving_words(saved_s: float, gpus: int) -> str:
    """``50 min x 72 GPUs`` (seconds under a minute; the GPUs the whole rack holds)."""
    amount = f"{round(saved_s / 60):,} min" if saved_s >= 60 else f"{max(0, round(saved_s))} s"
    return f"{amount} x {gpus} GPUs"


def decided_reason(state: RackState, lost: np.ndarray) -> str:
    """``cannot be VALID: node07 down since 30:00, its LoadGen cannot finish``."""
    idx = np.flatnonzero(lost)
    names = [state.run.nodes[i] for i in idx]
    shown = ", ".join(names[:_SHOWN_NODES])
    if len(names) > _SHOWN_NODES:
        shown += f" +{len(names) - _SHOWN_NODES} more"
    since = format_clock(float(np.min(state.state_since[idx])))
    whose = "its LoadGen cannot finish" if len(names) == 1 else "their LoadGen runs cannot finish"
    return f"cannot be VALID: {shown} down since {since}, {whose}"


def decided_sentence(state: RackState, now: float, lost: np.ndarray, end: Band | None) -> str:
    """The reason and what stopping now saves: ``...; stopping now saves 50 min x 72 GPUs`` (the rest
    of the rack's projected ``end`` minus now, times the rack's GPUs; left out when that end is unknown)."""
    sentence = decided_reason(state, lost)
    if end is not None and end.value > now:
        sentence += f"{SAVES}{saving_words(end.value - now, state.run.gpus)}"
    return sentence


def decide(state: RackState, now: float, fc: Forecast) -> Forecast:
    """``fc`` decided INVALID when a node is lost (see the module's docstring) or a rule is broken beyond
    recovery (:mod:`tokenwatch.core.verdict._beyond`), else ``fc`` itself."""
    lost = lost_nodes(state, now)
    if not lost.any():
        why = beyond_recovery(state, fc)
        if not why:
            return fc
        saved_to = rest_end_s(state, now, lost)
        if saved_to is not None and saved_to > now:
            why += f"{SAVES}{saving_words(saved_to - now, state.run.gpus)}"
        return dataclasses.replace(fc, valid=False, decided=why)
    n = float(len(lost))
    can_finish = n - float(lost.sum())
    rule = RuleForecast("every_node_finished", can_finish, can_finish, n, None, False, "nodes")
    rules = tuple(r for r in fc.rules if r.name != "every_node_finished")
    # The run ends when the nodes still running do: the projected end is theirs (a lost node's own end,
    # were it to resume, is no end this run will have; every clock shows this one).
    end = rest_end(state, now, lost)
    return dataclasses.replace(
        fc, rules=(rule, *rules), valid=False, decided=decided_sentence(state, now, lost, end), end_s=end
    )
