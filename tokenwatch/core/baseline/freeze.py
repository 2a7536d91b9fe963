"""Freezing a finished run into a :class:`~tokenwatch.core.baseline.reference.Baseline`: from a core's
state (a recording or a simulated run ingested to its end), or from a summary alone (MLPerf result
folders)."""

from __future__ import annotations

import math

import numpy as np

from tokenwatch.base.events import FloatArray, LatencyMetric
from tokenwatch.core._state import RackState
from tokenwatch.core._stopped_partway import node_outcomes, was_cut_short
from tokenwatch.core.baseline.reference import Baseline
from tokenwatch.core.baseline.view import BaselineLatency
from tokenwatch.core.rack_snapshot import latency_stats
from tokenwatch.core.summary import RunSummary


def freeze_state(state: RackState, name: str, source: str) -> Baseline:
    """The run in ``state`` as a baseline: its whole-run token series (the core's history), each node's
    first report and last growth, its final measured means and its latency histograms."""
    run = state.run
    times, cumulative = state.history_tokens.view()
    final_tokens = state.tokens.astype(np.float64)
    changed = _last_growth(times, cumulative)
    # Where a node's counter already shows its final value, it stopped growing at its exact last event
    # (a point of the series is only as precise as its width).
    at_end = (cumulative == final_tokens[None, :]) & (final_tokens[None, :] > 0) & np.isfinite(changed)
    changed = np.where(at_end, state.t_last_change[None, :], changed)
    rack = _rack_rates(times, cumulative)
    means, _ = state.measured_means()
    ref = state.verdict.benchmark
    latency: dict[LatencyMetric, BaselineLatency] = {
        metric: BaselineLatency(s.count, s.p50, s.p90, s.p99, s.bucket_values_s, s.bucket_counts)
        for metric, s in latency_stats(state).items()
    }
    ended = state.t_last_change[np.isfinite(state.t_last_change)]
    return Baseline(
        name=name,
        source=source,
        scenario=run.scenario,
        benchmark=None if ref is None else ref.benchmark.name,
        interactive=False if ref is None else ref.interactive,
        nodes=run.nodes,
        gpus_per_node=run.gpus_per_node,
        node_tokens_per_s=_frozen(means),
        end_s=float(ended.max()) if ended.size else math.nan,
        times=_frozen(times),
        node_tokens=_frozen(cumulative),
        node_changed_s=_frozen(changed),
        node_first_s=_frozen(state.t_first),
        rack_tokens_per_s=_frozen(rack),
        latency=latency,
        node_outcomes=node_outcomes(state, state.now, cut_short=was_cut_short(state)),
    )


def _last_growth(times: FloatArray, cumulative: FloatArray) -> FloatArray:
    """(points, nodes): the time of the latest point at or before each point at which the node's counter
    grew (NaN before its first growth)."""
    if not len(times):
        return np.zeros(cumulative.shape)
    grew = np.empty(cumulative.shape, bool)
    grew[0] = cumulative[0] > 0
    grew[1:] = cumulative[1:] > cumulative[:-1]
    index = np.where(grew, np.arange(len(times))[:, None], -1)
    last = np.maximum.accumulate(index, axis=0)
    return np.where(last >= 0, times[np.maximum(last, 0)], np.nan)


def freeze_summary(summary: RunSummary, name: str, source: str) -> Baseline:
    """Final figures only (MLPerf result folders hold no time series): the baseline is each node's
    LoadGen figure at every run time. A system result (one LoadGen run for the whole system) has no
    per-node figures to hold nodes against."""
    verdict = summary.verdict
    gpus = {node.gpus for node in summary.nodes}
    empty = np.zeros(0)
    return Baseline(
        name=name,
        source=source,
        scenario=summary.scenario,
        benchmark=verdict.benchmark if verdict is not None else None,
        interactive=verdict is not None and verdict.scenario == "Interactive",
        nodes=tuple(node.name for node in summary.nodes),
        gpus_per_node=gpus.pop() if len(gpus) == 1 else None,
        node_tokens_per_s=_frozen(np.array([node.tokens_per_s for node in summary.nodes], np.float64)),
        end_s=summary.duration_s,
        times=_frozen(empty),
        node_tokens=_frozen(np.zeros((0, len(summary.nodes)))),
        node_changed_s=_frozen(np.zeros((0, len(summary.nodes)))),
        node_first_s=_frozen(np.full(len(summary.nodes), np.nan)),
        rack_tokens_per_s=_frozen(empty),
        latency={},
        per_node=summary.layout != "system",
        node_outcomes=tuple(node.outcome for node in summary.nodes),
    )


def _rack_rates(times: FloatArray, cumulative: FloatArray) -> FloatArray:
    """The rack's tokens/s between points of the series (NaN at the first), as the live timeline's."""
    rack = np.full(len(times), np.nan)
    if len(times) >= 2:
        with np.errstate(invalid="ignore", divide="ignore"):
            rack[1:] = np.diff(cumulative.sum(axis=1)) / np.diff(times)
    return rack


def _frozen(values: FloatArray) -> FloatArray:
    out = np.array(values, dtype=np.float64)
    out.flags.writeable = False
    return out
