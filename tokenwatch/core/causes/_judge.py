"""Why a straggler is slow: a one-line, ranked hint from the evidence the sources hold, with its figures.

For every node the straggler rule holds (:mod:`tokenwatch.core._alert_rules`), each piece of evidence over
the straggler test's own window (so the hint does not flicker) is weighed against the rack:

==============  ==============================================================================  ========
kind            evidence                                                                         rank
==============  ==============================================================================  ========
``power_limit`` its power limit lowered during the run, or below the rack's typical limit       first
``xid``         an XID error raised during the run                                               second
``nvlink``      NVLink errors counted in the window                                              third
``throttle``    SM clock below the rack's typical clock with HW slowdown / power brake set       by size
``thermal``     a GPU hotter than the rack's typical one, thermal slowdown, clock down           by size
``power_cap``   SM clock down with only the software power cap set                               by size
``clock``       SM clock down with no clock-event reason                                         by size
``hbm``         HBM use far from the rack's typical                                              by size
``util``        GPU utilisation well below the rack's                                            by size
``engine``      none of those: the GPUs look like the rack's (the engine's queue if known)       last
``unknown``     no GPU telemetry to judge by                                                     last
==============  ==============================================================================  ========

The first-ranked piece is the hint; the next one, if any, is added as a short figure
(``GPU2 SM clock -18 % vs rack typical (HW slowdown, SW thermal) since 14:05; GPU2 87 °C``). Each hint
says when its evidence began (``since_t``), found on the node's own series where the step happened; a
hint that keeps its kind and GPU keeps its first start, so one longer than the recent series stays true.

Hints are judged every ``straggler_subwindow_s`` while a node is a straggler (and at once when it becomes
one, so its alert can say why); the rack's typical values are medians over the running nodes' GPUs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from tokenwatch.base import throttle
from tokenwatch.base.durations import format_clock
from tokenwatch.base.formatting import group
from tokenwatch.core._power_limits import gpu_list
from tokenwatch.core._state import RackState
from tokenwatch.core.causes._cause import Cause
from tokenwatch.core.causes._evidence import (
    RackEvidence,
    rack_evidence,
    rate_since,
    series_since,
    span_means,
    span_reasons,
)
from tokenwatch.core.nan_math import nan_quiet

CLOCK_DROP_PCT = 5.0  # SM clock this far below the rack's typical clock is evidence
THERMAL_EXCESS_C = 8.0  # a GPU this much hotter than the rack's typical GPU
HBM_DIFF_PCT = 10.0  # HBM use this far (relative) from the rack's typical
UTIL_DROP_POINTS = 10.0  # utilisation this many points below the rack's
LIMIT_BELOW_PCT = 2.0  # a power limit this far below the rack's typical limit
QUEUE_RATIO = 1.5  # a waiting queue this many times the median's is worth saying
_NO_GPU_CAUSE = frozenset({"engine", "unknown"})
_HW = throttle.HW_SLOWDOWN | throttle.HW_POWER_BRAKE_SLOWDOWN
_THERMAL = throttle.SW_THERMAL_SLOWDOWN | throttle.HW_THERMAL_SLOWDOWN
_REASON_WORDS = {
    throttle.HW_SLOWDOWN: "HW slowdown",
    throttle.HW_POWER_BRAKE_SLOWDOWN: "power brake",
    throttle.HW_THERMAL_SLOWDOWN: "HW thermal",
    throttle.SW_THERMAL_SLOWDOWN: "SW thermal",
    throttle.SW_POWER_CAP: "SW power cap",
}


@dataclass(frozen=True, slots=True)
class _Candidate:
    score: float
    cause: Cause
    short: str  # the figure as a secondary piece of evidence (``GPU2 87 °C``)


def update_causes(state: RackState, t: float, codes: np.ndarray) -> None:
    """Judge the stragglers' hints (every ``straggler_subwindow_s``, and at once for a new straggler);
    forget the hint of a node that is no longer one."""
    memory = state.causes
    slow = state.rules.straggling
    if not slow.any():
        if memory.causes.count(None) != len(memory.causes):  # (a count in C: 18,000 nodes a tick)
            memory.causes = [None] * len(memory.causes)
        return
    fresh = [i for i in np.flatnonzero(slow).tolist() if memory.causes[i] is None]
    if t + 1e-9 < memory.next_due_t and not fresh:
        return
    memory.next_due_t = t + state.config.straggler_subwindow_s
    evidence = rack_evidence(state, t, codes)
    causes: list[Cause | None] = [None] * len(memory.causes)
    for i in np.flatnonzero(slow).tolist():
        cause = judge_node(state, evidence, i)
        before = memory.causes[i]
        if before is not None and before.kind not in _NO_GPU_CAUSE and cause.kind in _NO_GPU_CAUSE:
            # The GPU evidence is over but the window still holds its slowness: the hint stays what it
            # was until the straggler clears (it does not turn into "look at the engine" for a minute).
            causes[i] = before
            continue
        if before is not None and (before.kind, before.gpu) == (cause.kind, cause.gpu):
            since = np.fmin(before.since_t, cause.since_t)  # the evidence began when it first did
            cause = replace(cause, since_t=float(since))
        elif before is not None and before.kind != cause.kind:
            name = state.run.nodes[i]
            state.alerts.event(t, name, "cause", f"{name} straggler, now: {cause.text}", "info")
        causes[i] = cause
    memory.causes = causes


def judge_node(state: RackState, ev: RackEvidence, i: int) -> Cause:
    """The ranked hint for node ``i`` (a straggler)."""
    candidates = [
        c
        for c in (
            _power_limit(state, ev, i),
            _xid(state, i),
            _nvlink(state, ev, i),
            _clock(state, ev, i),
            _thermal(state, ev, i),
            _hbm(ev, i),
            _util(ev, i),
        )
        if c is not None
    ]
    if not candidates:
        return _no_gpu_cause(ev, i)
    candidates.sort(key=lambda c: -c.score)
    best = candidates[0].cause
    if math.isnan(best.since_t):
        best = replace(best, since_t=rate_since(ev.peer_rates, i))
    extra = next((c.short for c in candidates[1:] if c.short and c.short not in best.evidence), "")
    return replace(best, extra=extra)


# ----------------------------------------------------------------------------- the pieces of evidence
def _power_limit(state: RackState, ev: RackEvidence, i: int) -> _Candidate | None:
    limits = ev.limit[i]
    node = state.run.nodes[i]
    mine = [c for c in state.gpu_evidence.power_limits.changes if c.node == node]
    lowered = [c for c in mine if c.lowered]
    if lowered:
        change = lowered[-1]
        back = next((c for c in mine if c.t > change.t and not c.lowered and c.gpus == change.gpus), None)
        in_force = np.allclose(limits[list(change.gpus)], change.new_w, atol=1.0)
        # A cap lifted within the window still explains the window's slowness: it says when it ended.
        if in_force or (back is not None and back.t >= ev.t - ev.window_s):
            gpu = None if change.all_gpus and change.gpus_per_node > 1 else change.gpus[0]
            text = change.text(with_node=False)
            if not in_force and back is not None:
                text += f" (back to {group(back.new_w)} W at {format_clock(back.t)})"
            cause = Cause("power_limit", text, gpu, change.t, "power_w")
            return _Candidate(1000.0, cause, f"power limit {group(change.new_w)} W")
    typical = ev.typical_limit_w
    with np.errstate(invalid="ignore"):
        low = limits < typical * (1 - LIMIT_BELOW_PCT / 100)
    if not low.any():
        return None
    gpus = tuple(np.flatnonzero(low).tolist())
    on, gpu = _on(gpus, len(limits))
    text = f"power limit {group(float(np.nanmin(limits[low])))} W vs rack typical {group(typical)} W on {on}"
    return _Candidate(900.0, Cause("power_limit", text, gpu, math.nan, "power_w"), "power limit")


def _xid(state: RackState, i: int) -> _Candidate | None:
    when = state.gpu_evidence.errors.xid_t[i]
    if not np.isfinite(when).any():
        return None
    g = int(np.nanargmin(when))
    xid = int(state.gpu_evidence.errors.xid[i, g])
    t = float(when[g])
    cause = Cause("xid", f"GPU{g} XID {xid} at {format_clock(t)}", g, t)
    return _Candidate(800.0, cause, f"GPU{g} XID {xid}")


def _nvlink(state: RackState, ev: RackEvidence, i: int) -> _Candidate | None:
    errors = state.gpu_evidence.errors
    new = errors.nvlink_new()[i]
    recent = errors.nvlink_last_growth_t[i] >= ev.t - ev.window_s
    if not (np.isfinite(new) & (new > 0) & recent).any():
        return None
    g = int(np.nanargmax(np.where(recent, new, np.nan)))
    since = float(errors.nvlink_first_growth_t[i, g])
    text = f"GPU{g} NVLink errors +{group(float(new[g]))} since {format_clock(since)}"
    return _Candidate(500.0, Cause("nvlink", text, g, since), f"GPU{g} NVLink errors")


def _clock_drop(ev: RackEvidence, i: int) -> np.ndarray:
    """Per GPU of node ``i``: how far its SM clock is below the rack's typical clock, in %."""
    typical = ev.typical_of("sm_clock_mhz")
    if not typical > 0:
        return np.full(ev.gpu_mean.shape[1], np.nan)
    return np.asarray((1.0 - ev.mean("sm_clock_mhz")[i] / typical) * 100.0)


def _gpus_with(drop: np.ndarray, worst: float) -> tuple[int, ...]:
    """The GPUs that share the worst GPU's evidence (at least half its size)."""
    with np.errstate(invalid="ignore"):
        return tuple(np.flatnonzero(drop >= max(CLOCK_DROP_PCT, worst / 2)).tolist())


def _on(gpus: tuple[int, ...], count: int) -> tuple[str, int | None]:
    """(words, gpu): ``all 4 GPUs`` (None) or ``GPU2`` (2) or ``GPU1,3`` (1)."""
    if len(gpus) == count > 1:
        return f"all {count} GPUs", None
    return gpu_list(gpus), gpus[0]


def _clock(state: RackState, ev: RackEvidence, i: int) -> _Candidate | None:
    drop = _clock_drop(ev, i)
    if not (np.isfinite(drop) & (drop >= CLOCK_DROP_PCT)).any():
        return None
    gpus = _gpus_with(drop, float(np.nanmax(drop)))
    typical = ev.typical_of("sm_clock_mhz")
    window_now = float(np.nanmean(ev.mean("sm_clock_mhz")[i, list(gpus)]))
    since = series_since(state, i, gpus, "sm_clock_mhz", typical, window_now)
    if math.isnan(since):
        return None  # the clock is back: what the window still holds is over
    # Told at its size since it began (a step inside the window is not averaged with what came before).
    span = (1.0 - span_means(state, i, "sm_clock_mhz", since) / typical) * 100.0
    worst = float(np.nanmax(span[list(gpus)]))
    reasons = span_reasons(state, i, gpus, since) & throttle.LIMITING_REASONS
    excess = span_means(state, i, "temp_c", since) - ev.typical_of("temp_c")
    hot = bool(np.nanmax(excess[list(gpus)]) >= THERMAL_EXCESS_C) if np.isfinite(excess).any() else False
    if reasons & _HW:
        kind = "throttle"
    elif reasons & _THERMAL and hot:
        return None  # the thermal piece tells it, with the temperature first
    elif reasons & _THERMAL:
        kind = "throttle"
    elif reasons & throttle.SW_POWER_CAP:
        kind = "power_cap"
    else:
        kind = "clock"
    on, gpu = _on(gpus, len(drop))
    why = _reason_words(reasons) or "no clock-event reason"
    if kind == "power_cap":
        power = float(np.nanmean(span_means(state, i, "power_w", since)[list(gpus)]))
        # amd-smi and xpu-smi report no limit: an all-NaN mean is unknown, quietly.
        limit = float(nan_quiet(np.nanmean, ev.limit[i, list(gpus)]))
        why = f"SW power cap: {group(power)} of {group(limit)} W" if math.isfinite(limit) else why
    text = f"{on} SM clock -{worst:.0f} % vs rack typical ({why})"
    return _Candidate(worst, Cause(kind, text, gpu, since, "sm_clock_mhz"), f"SM clock -{worst:.0f} %")


def _thermal(state: RackState, ev: RackEvidence, i: int) -> _Candidate | None:
    typical = ev.typical_of("temp_c")
    window_excess = ev.mean("temp_c")[i] - typical
    if not (np.isfinite(window_excess) & (window_excess >= THERMAL_EXCESS_C)).any():
        return None
    gw = int(np.nanargmax(window_excess))
    gpus = tuple(
        np.flatnonzero(window_excess >= max(THERMAL_EXCESS_C, float(window_excess[gw]) / 2)).tolist()
    )
    window_now = float(np.nanmean(ev.mean("temp_c")[i, list(gpus)]))
    since = series_since(state, i, gpus, "temp_c", typical, window_now)
    if math.isnan(since):
        return None
    temp = span_means(state, i, "temp_c", since)
    excess = temp - typical
    g = gpus[int(np.nanargmax(excess[list(gpus)]))]
    on, gpu = _on(gpus, len(temp))
    # The clock's drop is told over its own span: a GPU heats for a while before it slows down.
    clock_typical = ev.typical_of("sm_clock_mhz")
    window_clock = float(ev.mean("sm_clock_mhz")[i, g])
    clock_since = series_since(state, i, (g,), "sm_clock_mhz", clock_typical, window_clock)
    clock_since = clock_since if window_clock < clock_typical and math.isfinite(clock_since) else since
    drop = (1.0 - span_means(state, i, "sm_clock_mhz", clock_since) / clock_typical) * 100.0
    reasons = span_reasons(state, i, gpus, since) & _THERMAL
    hbm = ev.hbm_temp_c[i, g]
    hbm_text = f", HBM {hbm:.0f} °C" if math.isfinite(hbm) else ""
    short = f"GPU{g} {temp[g]:.0f} °C"
    lead = f"{on} {temp[g]:.0f} °C{hbm_text}" if gpu is None else f"{short}{hbm_text}"
    text = f"{lead}, +{excess[g]:.0f} °C vs rack typical"
    slowed = bool(reasons) and bool(np.isfinite(drop[g])) and drop[g] >= CLOCK_DROP_PCT
    if slowed:
        text += f" ({_reason_words(reasons)}): SM clock -{drop[g]:.0f} %"
    # Heat that slows the clock is a cause as large as the clock drop; heat alone is weaker evidence.
    score = float(max(drop[g], excess[g])) if slowed else float(excess[g]) / 2
    return _Candidate(score, Cause("thermal", text, gpu, since, "temp_c"), short)


def _hbm(ev: RackEvidence, i: int) -> _Candidate | None:
    used = ev.mean("hbm_used_mib")[i]
    typical = ev.typical_of("hbm_used_mib")
    if not typical > 0:
        return None
    diff = (used / typical - 1.0) * 100.0
    if not (np.isfinite(diff) & (np.abs(diff) >= HBM_DIFF_PCT)).any():
        return None
    g = int(np.nanargmax(np.abs(diff)))
    text = f"GPU{g} HBM use {used[g] / 1024:,.0f} GiB vs rack typical {typical / 1024:,.0f} GiB"
    cause = Cause("hbm", text, g, math.nan, "hbm_used_mib")
    return _Candidate(abs(float(diff[g])) / 2, cause, f"GPU{g} HBM {used[g] / 1024:,.0f} GiB")


def _util(ev: RackEvidence, i: int) -> _Candidate | None:
    util = ev.mean("util_pct")[i]
    typical = ev.typical_of("util_pct")
    gap = typical - util
    if not (np.isfinite(gap) & (gap >= UTIL_DROP_POINTS)).any():
        return None
    g = int(np.nanargmax(gap))
    text = (
        f"GPU{g} utilisation {util[g]:.0f} % vs rack typical {typical:.0f} %: waiting on the engine or host"
    )
    return _Candidate(float(gap[g]) / 2, Cause("util", text, g, math.nan), f"GPU{g} util {util[g]:.0f} %")


def _no_gpu_cause(ev: RackEvidence, i: int) -> Cause:
    """No GPU evidence: the engine, with its queue against the rack's where the server reports one."""
    since = rate_since(ev.peer_rates, i)
    has_gpus = bool(np.isfinite(ev.gpu_mean[i]).any())
    queue = _queue_words(ev, i)
    if has_gpus:
        text = "no GPU cause found: clocks, power and temperature match the rack; look at the engine"
        kind = "engine"
    else:
        text = "no GPU telemetry to judge by; look at the engine"
        kind = "unknown"
    text += f" ({queue})" if queue else ""
    return Cause(kind, text, None, since)


def _queue_words(ev: RackEvidence, i: int) -> str:
    running, waiting = ev.queue[i, 0], ev.queue[i, 1]
    typical_waiting = ev.typical_queue[1]
    if math.isfinite(waiting) and math.isfinite(typical_waiting):
        if typical_waiting > 0 and waiting >= QUEUE_RATIO * typical_waiting:
            return f"queue {waiting / typical_waiting:.1f}x the median"
        if typical_waiting == 0 and waiting >= 1:
            return f"{waiting:.0f} waiting, the median node none"
    typical_running = ev.typical_queue[0]
    if math.isfinite(running) and math.isfinite(typical_running) and typical_running > 0:
        ratio = running / typical_running
        if ratio <= 1 / QUEUE_RATIO:
            return f"running {running:.0f} requests vs the median's {typical_running:.0f}"
        return "its queue like the rack's"
    return ""


def _reason_words(mask: int) -> str:
    return ", ".join(word for bit, word in _REASON_WORDS.items() if mask & bit)
