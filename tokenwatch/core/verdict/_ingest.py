"""The verdict wing's handlers of the events it takes (detail-log records, a source's latency limit counts,
latency batches counted against the limits): each writes only the verdict's own part of the state
(``RackState.verdict``, made by :func:`~tokenwatch.core.verdict._state.new_verdict_state`), reading the
engine's node index, run and histograms and saying what it skips or alerts through the engine's logs.

A node's detail log brings its LoadGen settings (the limits it judges by, from then on the ones counted
against) and its query plan (when it started, how many samples or queries it will issue); the settings
are checked against the benchmark's rules at once, each failure an alert with the fix in words.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tokenwatch.base.events import LatencyBatch, LatencyLimitCounts, LoadGenDetail
from tokenwatch.base.formatting import group
from tokenwatch.core._state import RackState
from tokenwatch.core.verdict._inputs import plan_of
from tokenwatch.core.verdict._state import LIMIT_METRICS, result_figures
from tokenwatch.mlperf.figures import RunSettings
from tokenwatch.mlperf.settings_check import SettingCheck, check_settings

PLAN_KEYS = ("generated_query_count", "generated_samples_per_query", "generated_query_duration")
NOT_CHECKED = 3


def apply_detail(state: RackState, ev: LoadGenDetail) -> None:
    i = state.index.get(ev.node)
    if i is None:
        state.skips.skip(state.now, f"unknown node {ev.node!r}")
        return
    verdict = state.verdict
    values = verdict.details[i]
    values.update(ev.values)
    verdict.details_version += 1
    if any(key in ev.values for key in PLAN_KEYS):
        if np.isnan(verdict.plan_t[i]):
            verdict.plan_t[i] = ev.t  # written right before the first query: the node's LoadGen start
        verdict.plan_samples[i], verdict.plan_schedule_s[i] = plan_of(values, state.run.scenario)
    scenario = str(values.get("effective_scenario", state.run.scenario))
    verdict.result_tokens_per_s[i], verdict.result_samples_per_s[i] = result_figures(values, scenario)
    if "effective_scenario" not in values:
        return
    try:
        settings: RunSettings | None = RunSettings.from_detail(values)
    except ValueError:
        settings = None
    verdict.settings[i] = verdict.shared.setdefault(repr(settings), settings)
    if settings is not None and settings.scenario == "Server":
        for metric, limit_ns in (("ttft", settings.ttft_limit_ns), ("tpot", settings.tpot_limit_ns)):
            if limit_ns is not None and limit_ns > 0:
                counts = verdict.counts[metric]  # type: ignore[index]
                counts.set_limit(i, limit_ns / 1e9, state.latency[metric][i], loadgen=True)  # type: ignore[index]
    scenario = verdict.scenario_label or str(values["effective_scenario"])
    checks = check_settings(verdict.benchmark, scenario, values)
    by_name = {check.name: check for check in checks}
    verdict.setting_checks[i] = verdict.shared.setdefault(repr(by_name), by_name)
    for check in checks:
        rank = verdict.setting_rank.get(check.name)
        if rank is None:  # (not setdefault: its default, a node-long array, would be made every call)
            rank = verdict.setting_rank[check.name] = np.full(len(state.index), NOT_CHECKED, np.int8)
        rank[i] = 0 if check.ok is False else 1 if check.ok is None else 2
        if check.ok is False and check.name not in verdict.settings_alerted:
            verdict.settings_alerted.add(check.name)
            # Once per setting, however many nodes share it: a fact of the run's start, not a condition.
            state.alerts.event(
                ev.t, None, f"setting_{check.name}", setting_message(check, ev.node), "critical"
            )


def setting_message(check: SettingCheck, node: str) -> str:
    """``LoadGen setting min_duration is 60,000 ms on node01, the rules need 600,000 ms: set ...``."""
    return (
        f"LoadGen setting {check.name} is {_shown(check.value, check.name)} on {node}, "
        f"the rules need {_shown(check.expected, check.name)}: {check.fix}"
    )


def _shown(value: Any, name: str) -> str:
    if isinstance(value, tuple):
        return "other seeds"
    if isinstance(value, bool) or value is None:
        return str(value).lower() if isinstance(value, bool) else "unknown"
    if isinstance(value, int):
        if name == "min_duration":
            return f"{group(value)} ms"
        if name.endswith("_limit"):
            return f"{value / 1e6:g} ms"
        return group(value)
    return str(value)


def apply_limit_counts(state: RackState, ev: LatencyLimitCounts) -> None:
    if ev.metric not in LIMIT_METRICS:
        return
    ni = ev.node_index
    ok = (ni >= 0) & (ni < len(state.index)) & (ev.judged >= ev.over) & (ev.over >= 0)
    if not ok.all():
        state.skips.skip(state.now, "latency limit counts outside the run's nodes or out of range")
    counts = state.verdict.counts[ev.metric]
    counts.counter_limit_s[ni[ok]] = ev.limit_s
    counts.counter_judged[ni[ok]] = ev.judged[ok]
    counts.counter_over[ni[ok]] = ev.over[ok]


def count_latency(state: RackState, ev: LatencyBatch) -> None:
    """TTFT/TPOT observations against the node's limit: raw ones exactly, histogram deltas as bounds.
    A node the run does not name is left to the engine's handler of the same batch, which says so."""
    i = state.index.get(ev.node)
    if i is None or ev.metric not in LIMIT_METRICS:
        return
    counts = state.verdict.counts[ev.metric]
    if ev.counts is None:
        counts.add_raw(i, ev.values_s)
    else:
        counts.add_histogram(i, ev.values_s, ev.counts)
