"""Warm-up: until the rack's pace has stopped climbing, no projection is a number.

A run starts on a ramp (engines fill their batches, KV caches warm, the first long prompts prefill): its
pace in the first minute or two says nothing of its steady pace, and a projection made from it is far low
(70 % under the final figure at 0:20 of a 10-minute run), with a band that cannot hold what comes. So the
forecast says "warming up" until the steady state can be told: from the first moment at which the rack's
pace over its last ``warm_window_s`` is no more than ``warm_rise`` above its pace over the window before
(a ramp climbs tens of percent from window to window; a steady rack's windows differ by its noise, well
under 1 % for a 72-GPU rack). The moment is found afresh at every tick from the run's own token series, so
the verdict stays a pure function of the data (a replay, or a seek, says the same); once the run has been
steady, a later dip and recovery (a node down and back) is a change of pace, not a warm-up.

A ramp that never flattens within ``warm_max_s`` (a slow creep, a run too noisy to tell) ends the warm-up
there anyway: the band then carries what the pace measure makes of it.
"""

from __future__ import annotations

import math

import numpy as np

from tokenwatch.base.events import FloatArray

WARMING_UP = "warming up"  # what every surface says in place of the projected figure


def steady_from(
    times: FloatArray,
    rack_tokens: FloatArray,
    start: float,
    now: float,
    window_s: float,
    rise: float,
    max_s: float,
) -> float | None:
    """The run time from which the rack's pace is steady, or None while it is still warming up.

    ``times`` / ``rack_tokens``: the rack's cumulative output tokens (ascending times, the last at ``now``);
    ``start``: the run's start. Windows are laid from ``start`` on, ``window_s`` long each."""
    if not (math.isfinite(start) and now > start):
        return None
    count = int((now - start) // window_s)
    if count >= 2 and times.size:
        edges = start + window_s * np.arange(count + 1, dtype=np.float64)
        cumulative = np.interp(edges, times, rack_tokens)
        pace = np.diff(cumulative)  # tokens per window
        flat = (pace[1:] > 0) & (pace[1:] <= pace[:-1] * (1.0 + rise))
        if flat.any():
            return float(edges[int(np.argmax(flat)) + 2])
    return start + max_s if now - start >= max_s else None
