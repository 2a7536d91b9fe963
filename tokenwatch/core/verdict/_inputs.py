"""The forecast's inputs read off a :class:`RackState` (see :mod:`tokenwatch.mlperf.forecast`).

Per node: cumulative tokens over the run (the whole-run series, then the 1-s recent ring, then now),
its LoadGen start (the query plan's arrival, else its first data), when it last made progress, whether it
finished, how many samples or queries its LoadGen issues (its detail log; the simulator's quota; else the
config's total split evenly, as the core's progress figures do) and when its query schedule ends.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

from tokenwatch.base.events import FloatArray, LatencyMetric
from tokenwatch.base.nan_to_zero import nan_to_zero
from tokenwatch.core._state import RackState
from tokenwatch.core.cadence import STALE_CADENCE_FACTOR
from tokenwatch.core.config import STATE_CODE
from tokenwatch.core.verdict._node_quantiles import node_quantile
from tokenwatch.core.verdict._pace_memo import node_pace
from tokenwatch.core.verdict._state import LIMIT_METRICS
from tokenwatch.mlperf.figures import RunSettings
from tokenwatch.mlperf.forecast import Forecast, NodeProgress, OverLimit, forecast
from tokenwatch.mlperf.rules import latency_limits

_FINISHED = STATE_CODE["finished"]
_DOWN = STATE_CODE["down"]


def start_times(
    state: RackState, now: float, series: tuple[FloatArray, FloatArray] | None = None
) -> FloatArray:
    """Each node's LoadGen start: its query plan's arrival, or its first work where that came first (the
    detail log read after the engine's first tokens); without a plan, its first data. ``series``: the
    node's tokens over the run (:func:`joined_tokens`), where the caller has them.

    Readings of no work before the plan are not the start: a watch started 32 s before LoadGen (the
    engine idle, its /metrics scraped every second from 0 tokens) projected a real run 40 % low, its
    figure spread over the idle half-minute too."""
    times, tokens = joined_tokens(state, now) if series is None else series
    grew = tokens > tokens[:1]
    first_work = np.where(grew.any(axis=0), times[np.argmax(grew, axis=0)], np.nan)
    plan = state.verdict.plan_t
    start = np.where(np.isnan(plan), state.t_first, np.fmin(plan, first_work))
    return np.where(np.isnan(start), now, start)


def joined_tokens(state: RackState, now: float) -> tuple[FloatArray, FloatArray]:
    """(times, tokens (K, n)): the whole-run series before the recent ring's first point, the ring, and
    the counters now. Without series (a summary) just the run's start and now."""
    n = len(state.run.nodes)
    ring = state.recent_tokens
    slots = ring.ordered_slots()
    if not slots.size:
        return _up_to(np.zeros(1), np.zeros((2, n)), 1, now, state)
    recent_t = ring.times[slots]
    hist_t, hist_v = state.history_tokens.view()
    older = hist_t < recent_t[0]
    # One (points + 1, nodes) array, each part copied into it once: at 18,000 nodes each copy of the
    # joined series is ~50 MB, and the concatenations and the row for now made three.
    k = int(older.sum())
    tokens = np.empty((k + len(slots) + 1, n))
    np.compress(older, hist_v, axis=0, out=tokens[:k])
    np.take(ring.values, slots, axis=0, out=tokens[k:-1], mode="clip")  # clip: unbuffered (slots are valid)
    return _up_to(np.concatenate((hist_t[older], recent_t)), tokens, len(tokens) - 1, now, state)


def _up_to(
    times: FloatArray, tokens: FloatArray, points: int, now: float, state: RackState
) -> tuple[FloatArray, FloatArray]:
    """The first ``points`` rows of ``tokens`` (one row spare after them) at ``times``, those after
    ``now`` left out, and the counters now as a last point where the series ends before it."""
    keep = times <= now
    if keep.all():
        rows = tokens[:points]
    else:
        times, rows = times[keep], tokens[:points][keep]
    if times.size and times[-1] >= now:
        return times, rows
    if rows.base is tokens:  # the spare row follows them: no copy
        end = len(rows)
        tokens[end] = state.tokens
        return np.append(times, now), tokens[: end + 1]
    return np.append(times, now), np.vstack((rows, state.tokens.astype(np.float64)))


def _number(values: dict[str, Any], key: str) -> float:
    value = values.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return math.nan
    return float(value)


def plan_of(values: dict[str, Any], scenario: str) -> tuple[float, float]:
    """(samples or queries LoadGen issues, its schedule's length in s) from a node's detail records."""
    queries = _number(values, "generated_query_count")
    per_query = _number(values, "generated_samples_per_query")
    if scenario == "Offline":
        total = queries * per_query if math.isfinite(queries) else per_query
    else:
        total = queries
    return total, _number(values, "generated_query_duration") / 1e9


def planned_totals(state: RackState) -> tuple[FloatArray | None, FloatArray | None]:
    """(samples each node's LoadGen issues, its query schedule's length in s) from the detail logs; a
    node without one takes the run's total split evenly. None where some node's is unknown."""
    run, verdict = state.run, state.verdict
    n = len(run.nodes)
    total, schedule = verdict.plan_samples, verdict.plan_schedule_s
    if run.total_samples:
        total = np.where(np.isnan(total), run.total_samples / n, total)
    if run.scenario != "Offline" and run.nominal_duration_s:
        # A run that ends at a fixed time (no query count): its nominal length is its schedule.
        schedule = np.where(np.isnan(schedule), run.nominal_duration_s, schedule)
    return (
        None if np.isnan(total).any() else total,
        None if np.isnan(schedule).any() else schedule,
    )


def never_ran(state: RackState, now: float) -> np.ndarray:
    """Nodes down that have made no progress at all: no figure of theirs can be projected (they are left
    out of the projection, and the verdict cannot be VALID while they are)."""
    down = state.effective_state(now) == _DOWN
    return np.asarray(down & (state.tokens == 0) & (state.samples == 0), dtype=bool)


def node_progress(state: RackState, now: float, keep: np.ndarray) -> NodeProgress:
    """The forecast's inputs for the nodes ``keep`` selects."""
    run = state.run
    every = bool(keep.all())
    # A fleet's series over every node are kept for its racks' forecasts at the same tick to slice (only a
    # fleet that knows every node makes them: one known rack by rack takes its racks' own projections).
    share = every and state.fleet is not None
    joined = state.verdict.joined_memo.found(state.version, now)
    if joined is not None:
        times, tokens, starts = joined
    else:
        times, tokens = joined_tokens(state, now)
        starts = start_times(state, now, (times, tokens))
        if share and state.fleet_figures is None and state.config.rack_forecasts:
            state.verdict.joined_memo.keep(state.version, now, times, tokens, starts)
    start = starts[keep]
    last = np.where(np.isnan(state.t_last_change), starts, state.t_last_change)[keep]
    finished = (state.effective_state(now) == _FINISHED)[keep]
    total, schedule = planned_totals(state)
    latency = latency_quantile(state, "e2e", 0.5)
    latency = np.where(np.isfinite(latency), latency, 0.0)[keep]
    typical = nan_to_zero(state.cadence.typical_s[keep])
    progress = NodeProgress(
        run.scenario,
        now,
        times,
        tokens if every else tokens[:, keep],  # the joined series are this call's own: no copy
        state.tokens[keep].astype(np.float64),
        state.samples[keep].astype(np.float64),
        start,
        last,
        finished,
        None if total is None else total[keep],
        None if schedule is None else start + schedule[keep],
        None,
        latency,
        typical,
        # A gap of the stale multiple of its cadence is a node gone quiet, not a late reading: no timing.
        end_gap_s=np.fmin(state.change_gap_s[keep], STALE_CADENCE_FACTOR * typical),
        nodes=run.nodes if every else tuple(n for n, k in zip(run.nodes, keep.tolist(), strict=True) if k),
    )
    # A fleet's pace over every node is kept likewise.
    pace = node_pace(state.verdict.pace_memo, state.version, progress, state.config.forecast, keep=share)
    return dataclasses.replace(progress, pace=pace)


def projection_key(state: RackState, now: float, keep: np.ndarray) -> tuple[float, int, bytes]:
    """What a projection of the nodes ``keep`` selects at ``now`` is memoised under."""
    return (now, state.version, keep.tobytes())


def projected_nodes(state: RackState, now: float) -> tuple[np.ndarray, np.ndarray]:
    """(the nodes down without any progress, left out of the projection; the nodes projected): every
    node where none has run."""
    absent = never_ran(state, now)
    return absent, ~absent if not absent.all() else np.ones(len(absent), bool)


def projection(state: RackState, now: float, keep: np.ndarray) -> Forecast:
    """The forecast of the nodes ``keep`` selects at ``now``, made once per (run time, state version,
    nodes): a verdict tick that decides INVALID asks again for the end of the nodes still running, which
    are all of them when none is lost (the same forecast, most of a tick's cost, made twice)."""
    key = projection_key(state, now, keep)
    memo = state.verdict.projection_memo
    if memo is not None and memo[0] == key:
        return memo[1]
    settings, _ = run_settings(state)
    made = state.verdict.progress_memo
    if made is not None and made[0] == key:
        progress, latency = made[1], made[2]
    else:
        progress, latency = node_progress(state, now, keep), over_limits(state, keep)
    fc = forecast(progress, settings, latency, state.config.forecast)
    state.verdict.projection_memo = (key, fc)
    return fc


def latency_quantile(state: RackState, metric: LatencyMetric, q: float) -> FloatArray:
    """Each node's quantile ``q`` of ``metric`` (s; NaN for a node with none), read once per state version
    (:mod:`tokenwatch.core.verdict._node_quantiles`)."""
    return node_quantile(state.verdict.node_quantiles, state.version, state.latency, metric, q)


def prime_latency_quantiles(state: RackState) -> None:
    """Reads now every node's quantile the forecast will ask for, so views of the state (a fleet's racks)
    made before the next change share them."""
    latency_quantile(state, "e2e", 0.5)
    for metric in LIMIT_METRICS:
        latency_quantile(state, metric, 0.99)


def over_limits(state: RackState, keep: np.ndarray) -> list[OverLimit]:
    """Each latency metric's counts against its limit (nodes ``keep``), for the metrics some source sent."""
    out = []
    for metric in LIMIT_METRICS:
        counts = state.verdict.counts[metric]
        judged, low, high = counts.totals()
        if not judged.any():
            continue
        p99 = latency_quantile(state, metric, 0.99)[keep]
        limit = counts.limit_s[np.isfinite(counts.limit_s)]
        out.append(
            OverLimit(
                metric,
                float(limit.max()) if limit.size else math.nan,
                judged[keep].astype(np.float64),
                low[keep].astype(np.float64),
                high[keep].astype(np.float64),
                p99,
            )
        )
    return out


def run_settings(state: RackState) -> tuple[RunSettings | None, str]:
    """The settings the nodes are judged by, and whose they are: the nodes' LoadGen's (their detail
    logs), else the benchmark's rules, else none."""
    for settings in state.verdict.settings:
        if settings is not None:
            return settings, "LoadGen"
    ref = state.verdict.benchmark
    if ref is None:
        return None, ""
    return RunSettings.for_benchmark(ref, state.run.scenario), ref.benchmark.name


def limits_origin(state: RackState) -> str:
    """Who set the TTFT/TPOT limits counted against, in words."""
    verdict = state.verdict
    if any(c.loadgen_limit.all() for c in verdict.counts.values()):
        return "LoadGen's own (detail log)"
    ref = verdict.benchmark
    if ref is not None and latency_limits(ref, state.run.scenario) is not None:
        return f"{ref.benchmark.name}{' Interactive' if ref.interactive else ''}"
    return "the --ttft-sla / --tpot-sla alert limits (not LoadGen's)"


def shown_limits(state: RackState) -> dict[LatencyMetric, float]:
    """The TTFT/TPOT limits every surface shows and alerts on: the ones the verdict counts against (a
    node's LoadGen's own, else the benchmark's, e.g. 450 ms TTFT for llama2-70b Interactive), else the
    ``--ttft-sla`` / ``--tpot-sla`` alert limits. One pair for the whole run, so the latency panel can
    never say "SLA 2.00 s" beside a verdict judged against 450 ms by default; a limit the user set on the
    command line is theirs to see and be alerted on."""
    cfg = state.config
    out: dict[LatencyMetric, float] = {"ttft": cfg.ttft_sla_s, "tpot": cfg.tpot_sla_s}
    for metric in LIMIT_METRICS:
        if metric in cfg.sla_set_by_user:
            continue
        limits = state.verdict.counts[metric].limit_s
        finite = limits[np.isfinite(limits)]
        if finite.size:
            out[metric] = float(finite.max())
    return out
