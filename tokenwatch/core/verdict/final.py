"""The final MLPerf verdict of a run, each rule as LoadGen judges it (``summarize --json``'s ``verdict``).

Every node is its own LoadGen run and the rack is VALID when every node is. A node whose detail log
holds LoadGen's result is judged from that log (LoadGen's own figures, percentiles and flags; its
"Result is" lines are LoadGen's own). Otherwise it is judged from what the core measured: its
figures over its own span, its sample counts, and for Server the samples over each latency limit,
counted exactly (the LoadGen trace, the simulator's counters) or bounded (histograms). A node that never
finished has no LoadGen result at all: the run cannot be VALID.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tokenwatch.base.events import IntArray
from tokenwatch.base.formatting import json_number
from tokenwatch.core._state import RackState
from tokenwatch.core.config import STATE_CODE
from tokenwatch.core.final_figure import final_tokens_per_s, left_out, left_out_note
from tokenwatch.core.verdict._inputs import planned_totals, run_settings, start_times
from tokenwatch.mlperf.figures import Count, FinalFigures, RunSettings, figures_from_detail
from tokenwatch.mlperf.rules_forecast import worst_node
from tokenwatch.mlperf.verdict import Check, Verdict, all_met, judge, loadgen_result_lines, result_lines

_FINISHED = STATE_CODE["finished"]


@dataclass(frozen=True, slots=True)
class NodeVerdict:
    name: str
    verdict: Verdict | None  # None: cannot be judged (``missing`` says why)
    loadgen_valid: bool | None  # LoadGen's own "Result is" (its detail log), None when it wrote none
    lines: tuple[str, ...]  # the "Result is" block: LoadGen's own where it wrote one
    missing: str = ""

    @property
    def valid(self) -> bool | None:
        if self.loadgen_valid is not None:
            return self.loadgen_valid
        if self.missing and self.verdict is None:
            return False if self.missing.startswith("did not finish") else None
        return None if self.verdict is None else self.verdict.valid


@dataclass(frozen=True, slots=True)
class RunVerdict:
    """The rack's verdict: VALID when every node is. ``checks``: each rule at its worst node."""

    benchmark: str | None
    scenario: str
    valid: bool | None
    judged_by: str  # "LoadGen" (every node's own result), "tokenwatch" (measured), or both
    checks: tuple[Check, ...]
    lines: tuple[str, ...]
    nodes: tuple[NodeVerdict, ...]
    # A recording's: the rack's final figure (every surface's, core/final_figure.py) and which nodes
    # MLPerf's figure has no result for; None and "" for result folders (their summary's aggregate).
    tokens_per_s: float | None = None
    note: str = ""

    def to_json(self) -> dict[str, Any]:
        figure = {} if self.tokens_per_s is None else {"tokens_per_s": json_number(self.tokens_per_s, 6)}
        return {
            "benchmark": self.benchmark,
            "scenario": self.scenario,
            "valid": self.valid,
            **figure,
            **({"note": self.note} if self.note else {}),
            "judged_by": self.judged_by,
            "result_lines": list(self.lines),
            "checks": [
                {
                    "name": c.name,
                    "value": json_number(c.value, 6),
                    "limit": json_number(c.limit, 6),
                    "ok": c.ok,
                    "margin": json_number(c.margin, 6),
                    "detail": c.detail,
                    # Only where the value is one node's of several that differ, and a histogram's estimate.
                    **({"node": c.node} if c.node else {}),
                    **({"estimated": True} if c.estimated else {}),
                }
                for c in self.checks
            ],
            "nodes": [
                {
                    "name": n.name,
                    "valid": n.valid,
                    "loadgen_valid": n.loadgen_valid,
                    "result_lines": list(n.lines),
                    **({"missing": n.missing} if n.missing else {}),
                }
                for n in self.nodes
            ],
        }


def node_from_detail(name: str, values: Mapping[str, Any]) -> NodeVerdict | None:
    """A node judged by its LoadGen detail log (None when the log holds no result)."""
    lines = loadgen_result_lines(values)
    if lines is None:
        return None
    loadgen_valid = str(values.get("result_validity", "")).upper() == "VALID"
    try:
        settings = RunSettings.from_detail(values)
        verdict: Verdict | None = judge(settings, figures_from_detail(settings, values))
    except ValueError as exc:
        return NodeVerdict(name, None, loadgen_valid, tuple(lines), str(exc))
    return NodeVerdict(name, verdict, loadgen_valid, tuple(lines))


def combine(benchmark: str | None, scenario: str, nodes: Sequence[NodeVerdict]) -> RunVerdict:
    """The rack's verdict from its nodes'."""
    verdicts = [n.verdict for n in nodes if n.verdict is not None]
    flags = [n.valid for n in nodes]
    valid = all_met(flags) if nodes else None
    own = [n.loadgen_valid is not None for n in nodes]
    judged_by = "LoadGen" if own and all(own) else "tokenwatch" if not any(own) else "LoadGen and tokenwatch"
    checks = worst_checks([(n.name, n.verdict) for n in nodes if n.verdict is not None])
    if len(nodes) == 1:
        lines = nodes[0].lines
    else:
        lines = tuple(
            result_lines(
                scenario,
                valid,
                all_met([v.perf_constraints_met for v in verdicts]) if verdicts else None,
                all_met([v.min_duration_met for v in verdicts]) if verdicts else None,
                all_met([v.min_queries_met for v in verdicts]) if verdicts else None,
                all_met([v.early_stopping_met for v in verdicts]) if verdicts else None,
            )
        )
    return RunVerdict(benchmark, scenario, valid, judged_by, checks, lines, tuple(nodes))


def worst_checks(verdicts: Sequence[tuple[str, Verdict]]) -> tuple[Check, ...]:
    """Each rule at its worst node (``verdicts``: each node's name and verdict): failing before undecided
    before passing, then the least margin (the rack passes a rule only by as much as its closest node
    does). The check names its node where that node alone has its value, as the live verdict's rules do
    (``mlperf.rules_forecast.worst_node``): a sample count every node was given names none."""
    worst: dict[str, tuple[int, Check]] = {}  # each rule's worst check and its place in the rule's own
    names: dict[str, list[str]] = {}
    values: dict[str, list[float]] = {}
    for name, verdict in verdicts:
        for check in verdict.checks:
            names.setdefault(check.name, []).append(name)
            values.setdefault(check.name, []).append(math.nan if check.value is None else check.value)
            shown = worst.get(check.name)
            if shown is None or _worse(check, shown[1]):
                worst[check.name] = (len(values[check.name]) - 1, check)
    return tuple(
        dataclasses.replace(
            check, node=worst_node(tuple(names[check.name]), np.array(values[check.name]), at)
        )
        for at, check in worst.values()
    )


def _worse(a: Check, b: Check) -> bool:
    rank = {False: 0, None: 1, True: 2}
    if rank[a.ok] != rank[b.ok]:
        return rank[a.ok] < rank[b.ok]
    return a.margin is not None and (b.margin is None or a.margin < b.margin)


def final_verdict(state: RackState) -> RunVerdict:
    """The verdict on everything the core has ingested (a finished run, or a recording of one)."""
    run, verdict = state.run, state.verdict
    settings, _ = run_settings(state)
    codes = state.effective_state(state.now)
    _, schedule = planned_totals(state)
    start = start_times(state, state.now)
    # Each metric's per-node totals, once: every node's figures read its own element of them.
    totals = {metric: verdict.counts[metric].totals() for metric in ("ttft", "tpot")}
    nodes = []
    for i, name in enumerate(run.nodes):
        values = verdict.details[i]
        from_log = node_from_detail(name, values)
        if from_log is not None:
            nodes.append(from_log)
            continue
        if codes[i] != _FINISHED:
            how = {0: "still running", 1: "stale", 2: "down"}.get(int(codes[i]), "unknown")
            nodes.append(NodeVerdict(name, None, None, (), f"did not finish ({how})"))
            continue
        own = verdict.settings[i] or settings
        if own is None:
            reason = "its LoadGen settings (the detail log) or a benchmark (--benchmark)"
            nodes.append(NodeVerdict(name, None, None, (), f"needs {reason}"))
            continue
        basis = schedule[i] if schedule is not None else math.nan
        judged = judge(own, _measured_figures(state, i, own, float(start[i]), basis, totals))
        nodes.append(NodeVerdict(name, judged, None, tuple(judged.summary_lines())))
    ref = verdict.benchmark
    scenario = verdict.scenario_label or run.scenario
    rack = combine(None if ref is None else ref.benchmark.name, scenario, nodes)
    return dataclasses.replace(
        rack, tokens_per_s=final_tokens_per_s(state), note=left_out_note(left_out(state))
    )


def _measured_figures(
    state: RackState,
    i: int,
    settings: RunSettings,
    start: float,
    schedule_s: float,
    totals: dict[str, tuple[IntArray, IntArray, IntArray]],
) -> FinalFigures:
    """LoadGen's figures as the core measured them for node ``i``; ``totals``: each metric's
    ``LimitCounts.totals()``, per node."""
    end = float(state.t_last_change[i])
    span = end - start if math.isfinite(end) and end > start else math.nan
    samples = int(state.samples[i])
    tokens = float(state.tokens[i])
    if settings.scenario == "Offline":
        queries, basis = 1, span
    else:
        queries, basis = samples, schedule_s
    over: dict[str, Count | None] = {}
    p99: dict[str, int | None] = {}
    for metric in ("ttft", "tpot"):
        counts = state.verdict.counts[metric]
        judged, low, high = totals[metric]
        limit_ns = settings.ttft_limit_ns if metric == "ttft" else settings.tpot_limit_ns
        same_limit = limit_ns is not None and round(counts.limit_s[i] * 1e9) == limit_ns
        over[metric] = Count(int(low[i]), int(high[i])) if judged[i] and same_limit else None
        hist = state.latency[metric][i]
        p99[metric] = round(float(hist.quantiles([0.99])[0]) * 1e9) if hist.total else None
    return FinalFigures(
        queries,
        samples,
        tokens / span if span > 0 else None,
        samples / span if span > 0 else None,
        basis,
        p99["ttft"],
        p99["tpot"],
        over["ttft"],
        over["tpot"],
        p99_exact=False,
    )
