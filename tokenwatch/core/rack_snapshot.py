"""Builds :class:`RackSnapshot` from a :class:`RackState` without touching it."""

from __future__ import annotations

import math

import numpy as np

from tokenwatch.base.durations import format_clock
from tokenwatch.base.events import GPU_METRICS, LATENCY_METRICS, LatencyMetric
from tokenwatch.core._loadgen_latency import loadgen_latency
from tokenwatch.core._node_columns import later_columns, power_sums, sparkline_maker
from tokenwatch.core._run_info import RunInfo
from tokenwatch.core._state import RackState
from tokenwatch.core._summarize_state import interrupted_status, summarize_state
from tokenwatch.core.alerts import AlertLog
from tokenwatch.core.baseline.compare import baseline_view
from tokenwatch.core.config import STATE_CODE
from tokenwatch.core.energy import (
    energy_source,
    node_energy,
    node_window,
    tokens_per_joule,
    window_energy,
)
from tokenwatch.core.final_figure import rack_sum
from tokenwatch.core.fleet._board import fleet_table
from tokenwatch.core.fleet._snapshot import racks_projection, with_fleet, with_groups
from tokenwatch.core.fleet._state import fleet_table as fleet_racks_table
from tokenwatch.core.histogram import bucket_value, quantiles_of
from tokenwatch.core.node_spread import NodeSpread
from tokenwatch.core.run_clock import no_clock, run_clock
from tokenwatch.core.run_history import node_tokens_history
from tokenwatch.core.snapshot import (
    FRESH,
    Aggregate,
    GpuTable,
    LatencyStats,
    Later,
    NodeColumns,
    NodeTable,
    RackSnapshot,
    RunFigures,
    StoppedNode,
    Timeline,
)
from tokenwatch.core.summary import RunSummary
from tokenwatch.core.verdict._inputs import shown_limits
from tokenwatch.core.verdict._tick import verdict_view

_POWER = GPU_METRICS.index("power_w")
_ALERTS_IN_SNAPSHOT = 200
# The node-level timeline's place in a snapshot that takes the fleet's (with_fleet replaces it).
_NO_TIMELINE = Timeline(np.zeros(0), np.zeros(0), np.zeros(0), math.nan)
_UP, _STALE, _DOWN, _FINISHED, _IDLE = (STATE_CODE[s] for s in ("up", "stale", "down", "finished", "idle"))


def empty_snapshot(now: float = 0.0, said: AlertLog | None = None) -> RackSnapshot:
    """What front ends show before a run has started (``said``: what sources said meanwhile)."""
    run = RunInfo("waiting for a run", "Offline", "live", (), 0, None, None, 0.0)
    nan = math.nan
    z = np.zeros(0)
    zi = np.zeros(0, np.int64)
    return RackSnapshot(
        t=now,
        run=run,
        ended=False,
        end_reason="",
        progress_pct=None,
        clock=no_clock(now),
        aggregate=Aggregate(nan, nan, nan, nan, 0, 0, 0, 0, nan, nan, nan, 0.0, 0, 0, 0),
        node_spread=NodeSpread.of(z),
        stragglers=(),
        nodes=NodeTable(
            names=(),
            reason=(),
            tokens_per_s=z,
            mean_tokens_per_s=z,
            mean_samples_per_s=z,
            progress_pct=z,
            samples_done=zi,
            tokens_done=zi,
            power_w=z,
            straggler=z.astype(bool),
            throttling=z.astype(bool),
            later=Later.now(NodeColumns((), z, z, z, z, (), (), np.zeros((0, 0)))),
        ),
        gpus=GpuTable(
            np.zeros((0, 0, len(GPU_METRICS))), np.zeros((0, 0), np.uint64), np.zeros((0, 0), np.int8)
        ),
        latency={},
        timeline=Timeline(z, z, z, nan),
        alerts=said.newest_first(_ALERTS_IN_SNAPSHOT) if said is not None else (),
        active_alerts=(),
        sla_s={},
    )


def build_snapshot(state: RackState, now: float) -> RackSnapshot:
    run = state.run
    cfg = state.config
    n = len(run.nodes)
    state_codes = state.effective_state(now)
    up = state_codes == _UP
    stopped = (state_codes == _STALE) | (state_codes == _DOWN)
    rates, sample_rates = state.window_rates(now)
    # A down or stale node has no live rate (its counters are only as new as its last report); the
    # aggregate is over the nodes that report.
    rates = np.where(stopped, np.nan, rates)
    sample_rates = np.where(stopped, np.nan, sample_rates)
    means, sample_means = state.measured_means()

    # Only fresh readings are figures: a silent GPU's last values are not shown as if they were live.
    freshness = state.gpu_freshness(now, state_codes)
    gpu = np.where((freshness == FRESH)[:, :, None], state.gpu_values, np.nan)
    fresh_power = np.isfinite(gpu[:, :, _POWER])
    per_node = power_sums(gpu)
    node_power = np.where(fresh_power.any(axis=1), per_node[:, 0], np.nan)
    node_limit = per_node[:, 1]
    gpus_reporting = int((freshness == FRESH).sum())
    power_w = float(np.nansum(node_power)) if fresh_power.any() else math.nan
    power_limit_w = float(np.nansum(node_limit)) if np.isfinite(node_limit).any() else math.nan

    node_energy_j, from_counter = node_energy(state.energy, np.isfinite(state.gpu_last_seen))
    has_energy = node_energy_j > 0  # NaN (no GPU reading) compares False
    energy_j = float(node_energy_j[has_energy].sum()) if has_energy.any() else state.energy_j
    # tokens over the window the energy covers (from the attach, where GPU readings have no history)
    _, window_tokens = node_window(state.energy, from_counter, state.tokens)
    window_j = window_energy(state.energy, node_energy_j, from_counter)
    node_tpj = tokens_per_joule(window_tokens, window_j)
    energy_tokens = float(window_tokens[has_energy].sum()) if has_energy.any() else float(state.tokens.sum())
    window_total_j = float(window_j[has_energy].sum()) if has_energy.any() else energy_j
    agg_rate = float(np.nansum(rates)) if np.isfinite(rates).any() else math.nan
    agg_samples = float(np.nansum(sample_rates)) if np.isfinite(sample_rates).any() else math.nan
    gpus = run.gpus
    tokens_done = int(state.tokens.sum())
    samples_done = int(state.samples.sum())
    aggregate = Aggregate(
        tokens_per_s=agg_rate,
        tokens_per_s_cumulative=rack_sum(means) if np.isfinite(means).any() else math.nan,
        per_gpu_tokens_per_s=agg_rate / gpus if gpus else math.nan,
        samples_per_s=agg_samples,
        nodes=n,
        nodes_up=int((~stopped).sum()),
        gpus=gpus,
        gpus_reporting=gpus_reporting,
        power_w=power_w,
        power_limit_w=power_limit_w,
        tokens_per_joule=agg_rate / power_w if power_w and power_w > 0 else math.nan,
        energy_j=energy_j,
        tokens_done=tokens_done,
        samples_done=samples_done,
        prompt_tokens_done=int(state.prompt_tokens.sum()),
        energy_source=energy_source(from_counter, has_energy),
        run_tokens_per_joule=energy_tokens / window_total_j if window_total_j > 0 else math.nan,
    )

    elapsed = now
    progress_pct = _progress(state, elapsed, samples_done, state_codes)
    node_progress = _node_progress(state, elapsed, state_codes)
    running = up & (state.tokens > 0)
    spark = sparkline_maker(state, cfg.sparkline_points)

    causes = tuple(state.causes.causes)
    nodes = NodeTable(
        names=run.nodes,
        reason=tuple(state.state_reason),
        tokens_per_s=rates,
        mean_tokens_per_s=means,
        mean_samples_per_s=sample_means,
        progress_pct=node_progress,
        samples_done=state.samples.copy(),
        tokens_done=state.tokens.copy(),
        power_w=node_power,
        straggler=state.rules.straggling.copy(),
        throttling=np.asarray(state.rules.throttling.any(axis=1)),
        later=later_columns(state_codes, rates, running, gpu, (has_energy, from_counter), causes, spark),
        tokens_per_joule=node_tpj,
        causes=causes,
    )
    summary = summarize_state(state) if state.ended else None
    # A fleet known rack by rack projects the sum of its racks' own forecasts (every surface shows it:
    # the header's figure and clock, the energy to finish, the baseline), never one of the nodes fetched.
    racks_fc = None
    # One table of a fleet known rack by rack per snapshot: its projection and its board read it.
    racks_table = fleet_racks_table(state.fleet_figures, now) if state.fleet_figures is not None else None
    if state.fleet_figures is not None and racks_table is not None and not state.ended:
        racks_fc = racks_projection(state.fleet_figures, racks_table, now)
    verdict = verdict_view(state, now, power_w, racks_fc)
    # A fleet known rack by rack takes its table, and its timeline once it has one, from the racks'
    # figures (with_fleet): the node-level ones, over every node of 1,000 racks, are not made to be dropped.
    by_racks = state.fleet_figures
    racks_timeline = (
        by_racks is not None and by_racks.totals is not None and len(by_racks.totals.view()[0]) > 0
    )
    snap = RackSnapshot(
        t=now,
        run=run,
        ended=state.ended,
        end_reason=state.end_reason,
        progress_pct=progress_pct,
        clock=run_clock(now, run.nominal_duration_s, state.ended, verdict.forecast),
        aggregate=aggregate,
        node_spread=NodeSpread.of(np.where(stopped, np.nan, means)),
        stragglers=tuple(run.nodes[i] for i in np.flatnonzero(state.rules.straggling)),
        nodes=nodes,
        gpus=GpuTable(gpu, state.gpu_throttle.copy(), freshness),
        latency=latency_stats(state),
        timeline=_NO_TIMELINE if racks_timeline else timeline(state),
        alerts=state.alerts.newest_first(_ALERTS_IN_SNAPSHOT),
        active_alerts=state.alerts.active_newest_first(),
        sla_s=shown_limits(state),
        summary=summary,
        banner=end_banner(state, state_codes) if state.ended else "",
        verdict=verdict,
        baseline=baseline_view(state, now, verdict.forecast) if state.config.baseline is not None else None,
        stopped_nodes=_stopped_nodes(state, state_codes, means, node_progress),
        run_figures=_run_figures(summary, state_codes) if summary is not None else None,
        fleet=fleet_table(state, nodes, state_codes, now) if by_racks is None else None,
        power_limit_changes=tuple(state.gpu_evidence.power_limits.changes),
    )
    # A fleet known rack by rack (watched through Prometheus): its board, header and timeline.
    if state.fleet_figures is not None and racks_table is not None:
        snap = with_fleet(snap, state.fleet_figures, racks_table, steady_mean)
    kept = state.fleet_figures if state.fleet_figures is not None else state.fleet
    return with_groups(snap, kept.places if kept is not None else None)


def _stopped_nodes(
    state: RackState, codes: np.ndarray, means: np.ndarray, progress: np.ndarray
) -> tuple[StoppedNode, ...]:
    out = []
    for i in np.flatnonzero((codes == _STALE) | (codes == _DOWN)).tolist():
        since, reason = state.why_stopped(i, int(codes[i]))
        out.append(
            StoppedNode(
                name=state.run.nodes[i],
                state="down" if codes[i] == _DOWN else "stale",
                since_s=since,
                reason=reason,
                mean_tokens_per_s=float(means[i]),
                progress_pct=float(progress[i]),
            )
        )
    return tuple(out)


def _run_figures(summary: RunSummary, codes: np.ndarray) -> RunFigures:
    nan = math.nan
    return RunFigures(
        tokens_per_s=summary.tokens_per_s,
        per_gpu_tokens_per_s=summary.per_gpu_tokens_per_s,
        gpus=summary.gpus_counted,
        power_mean_w=summary.power_mean_w if summary.power_mean_w is not None else nan,
        tokens_per_joule=summary.tokens_per_joule if summary.tokens_per_joule is not None else nan,
        duration_s=summary.duration_s,
        nodes_finished=int((codes == _FINISHED).sum()),
        complete=summary.complete,
        note=summary.left_out_note,
    )


def end_banner(state: RackState, codes: np.ndarray) -> str:
    """What happened, in one line, once the run has ended: how many nodes finished and why the others did
    not (``ended: 17 of 18 nodes finished, node07 down since 02:00``), or where an interrupt cut it
    (``INTERRUPTED at 07:44 (8.8 % of samples)``). The end's own reason is added only when nodes were
    still running (a time limit, ``--stop-after``): then it is why they did not finish."""
    run = state.run
    if state.end_reason == "interrupted":
        return interrupted_status(state)
    finished = int((codes == _FINISHED).sum())
    others = []
    for i in np.flatnonzero(codes != _FINISHED).tolist():
        if codes[i] in (_UP, _IDLE):
            others.append(f"{run.nodes[i]} {'still running' if codes[i] == _UP else 'idle'}")
            continue
        since, _ = state.why_stopped(i, int(codes[i]))
        when = f" since {format_clock(since)}" if np.isfinite(since) else ""
        others.append(f"{run.nodes[i]} {'down' if codes[i] == _DOWN else 'stale'}{when}")
    shown = others[:3] + ([f"+{len(others) - 3} more"] if len(others) > 3 else [])
    detail = (", " + ", ".join(shown)) if shown else ""
    why = f" ({state.end_reason})" if (codes == _UP).any() and state.end_reason else ""
    return f"ended{why}: {finished} of {len(run.nodes)} nodes finished{detail}"


def _progress(state: RackState, elapsed: float, samples_done: int, codes: np.ndarray) -> float | None:
    """How far the run is, in % of its samples (of its nominal length when the sample count is unknown).
    When it will end is the clock's (:mod:`tokenwatch.core.run_clock`)."""
    run = state.run
    if run.total_samples:
        return min(100.0, samples_done / run.total_samples * 100.0)
    if run.nominal_duration_s:
        # With no sample count, the run is done only when every node said it finished: a watch that
        # stops (--stop-after, Ctrl-C) with work undone shows how far run time got, not 100 %.
        if state.ended and bool((codes == _FINISHED).all()):
            return 100.0
        return min(100.0, elapsed / run.nominal_duration_s * 100.0)
    return None


def _node_progress(state: RackState, elapsed: float, state_codes: np.ndarray) -> np.ndarray:
    run = state.run
    n = len(run.nodes)
    if run.total_samples:
        share = run.total_samples / n
        pct = np.minimum(100.0, state.samples / share * 100.0)
    elif run.nominal_duration_s:
        # By the clock: a node that stopped reporting got as far as its last report, not as far as now.
        gone = (state_codes == _DOWN) | (state_codes == _STALE)
        reached = np.where(gone, state.last_seen, elapsed)
        pct = np.minimum(100.0, reached / run.nominal_duration_s * 100.0)
    else:
        pct = np.full(n, np.nan)
    return np.where(state_codes == _FINISHED, 100.0, pct)


def latency_stats(state: RackState) -> dict[LatencyMetric, LatencyStats]:
    out: dict[LatencyMetric, LatencyStats] = {}
    for metric in LATENCY_METRICS:
        hist = state.rack_latency[metric]
        if not hist.total:
            continue
        nonzero = np.flatnonzero(hist.counts)
        exact = loadgen_latency(state, metric)
        if exact is None:
            p50, p90, p99 = quantiles_of(hist.counts, (0.5, 0.9, 0.99))
            figures = (p50, p90, p99, hist.mean(), state.latency_max[metric])
        else:
            figures = exact
        out[metric] = LatencyStats(
            metric,
            hist.total,
            *figures,
            bucket_value(nonzero),
            hist.counts[nonzero].copy(),
            exact is not None,
        )
    return out


def timeline(state: RackState) -> Timeline:
    times, cum = node_tokens_history(state)
    _, power = state.history_power.view()
    if len(times) < 2:
        return Timeline(
            times, np.full(len(times), np.nan), power.sum(axis=1) if len(power) else power, math.nan
        )
    rate = np.empty(len(times))
    rate[1:] = np.diff(cum.sum(axis=1)) / np.diff(times)
    rate[0] = np.nan
    return Timeline(times, rate, power.sum(axis=1), steady_mean(rate))


def steady_mean(rates: np.ndarray) -> float:
    """Mean rate over the steady span: from the first to the last point at or above 80 % of the run's
    90th-percentile rate (warm-up and tail left out), every point between counted.

    Counting the low points inside the span matters for engines that complete work in bursts (a
    batch of 256 samples finishing at once, then seconds with none): the mean of the burst points
    alone would be the burst height (16,384 tok/s on a real H200 run whose LoadGen figure was 5,881)."""
    finite = rates[np.isfinite(rates)]
    if finite.size == 0:
        return math.nan
    high = np.flatnonzero(finite >= 0.8 * np.percentile(finite, 90))
    if high.size == 0:
        return math.nan
    if high.size == 1:
        return float(finite[high[0]])
    # The work done after the first high point over the time to the last: a burst at each end of
    # the span would otherwise be counted once too often.
    return float(finite[high[0] + 1 : high[-1] + 1].mean())
