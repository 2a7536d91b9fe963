"""The run against its baseline: at a snapshot's run time (live), and between two summaries (afterwards).

Both compare the same figure, the **measured mean**: a node's generated tokens over its own duration (first
report to its last growth), and the rack's the sum over its nodes, as the published rack figure is made.
Live, both runs are read at the same run time ``t`` (the baseline from its frozen series, the run from the
core's state), so a run that is 2 % behind its reference after the same warm-up reads -2 %, and at the end
the live figure is the summaries' comparison (``summarize --baseline``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from tokenwatch.base.events import FloatArray, IntArray
from tokenwatch.base.formatting import json_number
from tokenwatch.core._state import RackState
from tokenwatch.core._stopped_partway import node_outcomes
from tokenwatch.core.baseline.reference import Baseline, RunIdentity, judge_fit, match_nodes
from tokenwatch.core.baseline.view import BaselineView, MatchedBy
from tokenwatch.core.node_outcome import WHOLE, NodeOutcome, covers_line, node_mark
from tokenwatch.core.summary import RunSummary
from tokenwatch.mlperf.forecast import Forecast

_NAN = math.nan


def delta_pct(value: float, reference: float) -> float:
    """``value`` against ``reference`` in % (negative: below it); NaN where either is unknown."""
    if math.isfinite(value) and math.isfinite(reference) and reference > 0:
        return (value / reference - 1.0) * 100.0
    return _NAN


def _deltas(values: FloatArray, references: FloatArray) -> FloatArray:
    with np.errstate(invalid="ignore", divide="ignore"):
        ok = np.isfinite(values) & np.isfinite(references) & (references > 0)
        return np.where(ok, (values / np.where(ok, references, 1.0) - 1.0) * 100.0, np.nan)


def baseline_means_at(baseline: Baseline, t: float) -> FloatArray:
    """Each baseline node's measured mean at run time ``t``: tokens at ``t`` over (its last growth at or
    before ``t`` - its first report). Between two points of the series the counter is interpolated and a
    node still growing is taken as grown at ``t``; a node that finished between them, at its exact end.
    A baseline with final figures only (result folders) has those at every ``t``."""
    if not baseline.has_series:
        return baseline.node_tokens_per_s.copy()
    times = baseline.times
    k = int(np.searchsorted(times, t, side="right")) - 1
    if k < 0:
        return np.full(len(baseline.nodes), np.nan)
    tokens = baseline.node_tokens[k]
    changed = baseline.node_changed_s[k]
    if k + 1 < len(times) and t > times[k]:
        after = baseline.node_tokens[k + 1]
        after_changed = baseline.node_changed_s[k + 1]
        moving = after > tokens
        done = moving & (after_changed <= t)
        share = (t - times[k]) / (times[k + 1] - times[k])
        tokens = np.where(done, after, np.where(moving, tokens + (after - tokens) * share, tokens))
        changed = np.where(done, after_changed, np.where(moving, t, changed))
    span = changed - baseline.node_first_s
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(span > 0, tokens / np.where(span > 0, span, 1.0), np.nan)


def _nansum(values: FloatArray) -> float:
    finite = values[np.isfinite(values)]
    return float(finite.sum()) if finite.size else _NAN


def run_identity(state: RackState) -> RunIdentity:
    """The run as the core knows it (its benchmark is the verdict's: a flag, the run's own, a detail log)."""
    run = state.run
    ref = state.verdict.benchmark
    return RunIdentity(
        scenario=run.scenario,
        benchmark=None if ref is None else ref.benchmark.name,
        interactive=False if ref is None else ref.interactive,
        nodes=run.nodes,
        gpus_per_node=run.gpus_per_node,
        duration_s=run.nominal_duration_s,
    )


def baseline_view(state: RackState, now: float, forecast: Forecast | None) -> BaselineView | None:
    """The comparison at ``now`` (None without a baseline). ``forecast``: the verdict's, for the
    projected final figure and end while the run goes."""
    baseline = state.config.baseline
    if baseline is None:
        return None
    n = len(state.run.nodes)
    fit = judge_fit(baseline, run_identity(state))
    final = baseline.tokens_per_s
    times, rates = baseline.times, baseline.rack_tokens_per_s
    if fit.refusal is not None:
        nan_nodes = np.full(n, np.nan)
        return BaselineView(
            baseline.name, baseline.source, "none", (), fit.refusal, now, _NAN, _NAN, _NAN, nan_nodes,
            ("",) * n, final, baseline.end_s, _NAN, _NAN, _NAN, _NAN, times, rates, baseline.latency,
        )  # fmt: skip
    means, _ = state.measured_means()
    reference = baseline_means_at(baseline, now)
    have = fit.counterparts >= 0
    matched = np.where(have, reference[np.where(have, fit.counterparts, 0)], np.nan)
    tokens_per_s = _nansum(means)
    reference_tokens_per_s = baseline.reference_total(reference, fit.counterparts)
    final = baseline.reference_total(baseline.node_tokens_per_s, fit.counterparts)
    if baseline.uniform and len(baseline.nodes):  # as many expected nodes as the run has
        rates = rates * (n / len(baseline.nodes))
    if state.ended:
        projected = tokens_per_s
        end = float(np.nanmax(state.t_last_change)) if np.isfinite(state.t_last_change).any() else _NAN
    else:
        band = forecast.tokens_per_s if forecast is not None else None
        ends = forecast.end_s if forecast is not None else None
        projected = band.value if band is not None else _NAN
        end = ends.value if ends is not None else _NAN
    return BaselineView(
        name=baseline.name,
        source=baseline.source,
        matched_by=fit.matched_by,
        notes=fit.notes,
        refused="",
        t=now,
        tokens_per_s=tokens_per_s,
        baseline_tokens_per_s=reference_tokens_per_s,
        delta_pct=delta_pct(tokens_per_s, reference_tokens_per_s),
        node_delta_pct=_deltas(means, matched),
        counterpart=tuple(baseline.nodes[j] if j >= 0 else "" for j in fit.counterparts.tolist()),
        final_tokens_per_s=final,
        end_s=baseline.end_s,
        projected_tokens_per_s=projected,
        projected_delta_pct=delta_pct(projected, final),
        projected_end_s=end,
        finish_gap_s=end - baseline.end_s if math.isfinite(end) else _NAN,
        timeline_times=times,
        timeline_tokens_per_s=rates,
        latency=baseline.latency,
        **_marks(state, baseline, fit.counterparts, now),
    )


def _marks(state: RackState, baseline: Baseline, counterparts: IntArray, now: float) -> dict[str, Any]:
    """The view's ``node_marks`` and ``covers`` at ``now``: the run's nodes down or stale by then, and
    their counterparts' in the baseline at the same run time."""
    names = state.run.nodes
    ours = node_outcomes(state, now, cut_short=state.ended and state.end_reason == "interrupted")
    theirs = [baseline.outcome(j, now) for j in counterparts.tolist()]
    base_side = None
    if baseline.per_node and len(counterparts) == len(names):
        base_side = _baseline_side(baseline, counterparts, now)
    run_side, word = list(zip(names, ours, strict=True)), "finished" if state.ended else "up"
    return {
        "node_marks": tuple(node_mark(o, b) for o, b in zip(ours, theirs, strict=True)),
        "covers": covers_line(run_side, base_side, word),
        "covers_brief": covers_line(run_side, base_side, word, brief=True),
    }


def _baseline_side(baseline: Baseline, counterparts: IntArray, t: float) -> list[tuple[str, NodeOutcome]]:
    """The baseline's nodes as its rack figure holds them, with their outcomes at run time ``t``: the run's
    counterparts for a uniform (expected) baseline, else all its own nodes (its rack figure sums them)."""
    if baseline.uniform:
        return [(baseline.nodes[j], baseline.outcome(j, t)) for j in counterparts.tolist() if j >= 0]
    return [(name, baseline.outcome(j, t)) for j, name in enumerate(baseline.nodes)]


@dataclass(frozen=True, slots=True)
class NodeDelta:
    name: str
    baseline_node: str | None  # its counterpart in the baseline (None: none)
    tokens_per_s: float
    baseline_tokens_per_s: float
    delta_pct: float
    outcome: NodeOutcome = WHOLE  # the node's in this run: whether it stopped partway
    baseline_outcome: NodeOutcome = WHOLE  # its counterpart's in the baseline

    def mark(self) -> str:
        """What either did when one stopped partway (``this run: down from 03:00, 30 % of its
        samples``); empty when both did their work."""
        return node_mark(self.outcome, self.baseline_outcome)


@dataclass(frozen=True, slots=True)
class BaselineComparison:
    """A finished run against its baseline: the rack figure and each node's, in % (negative = slower)."""

    name: str
    source: str
    tokens_per_s: float  # the baseline's final rack figure
    run_tokens_per_s: float
    delta_pct: float
    matched_by: MatchedBy
    notes: tuple[str, ...]
    nodes: tuple[NodeDelta, ...]
    covers: str = ""  # what the rack figures cover, where a node of either run stopped partway

    def to_json(self) -> dict[str, Any]:
        """The ``"baseline"`` object of ``summarize --json`` (NaN becomes null)."""
        return {
            "name": self.name,
            "source": self.source,
            "tokens_per_s": json_number(self.tokens_per_s, 1),
            "delta_pct": json_number(self.delta_pct, 3),
            "matched_by": self.matched_by,
            "notes": list(self.notes),
            "covers": self.covers or None,
            "nodes": [
                {
                    "name": node.name,
                    "baseline_node": node.baseline_node,
                    "delta_pct": json_number(node.delta_pct, 3),
                    "this_run": node.outcome.to_json(),
                    "in_baseline": node.baseline_outcome.to_json(),
                }
                for node in self.nodes
            ],
        }


def summary_identity(summary: RunSummary) -> RunIdentity:
    """A finished run's summary as what a baseline is judged against."""
    verdict = summary.verdict
    gpus = {node.gpus for node in summary.nodes}
    return RunIdentity(
        scenario=summary.scenario,
        benchmark=verdict.benchmark if verdict is not None else None,
        interactive=verdict is not None and verdict.scenario == "Interactive",
        nodes=tuple(node.name for node in summary.nodes),
        gpus_per_node=gpus.pop() if len(gpus) == 1 else None,
        duration_s=summary.duration_s,
    )


def compare_summary(summary: RunSummary, baseline: Baseline) -> BaselineComparison:
    """The summary's rack figure and node figures against the baseline's final ones (the runs' fit is
    judged as before a run: :func:`~tokenwatch.core.baseline.reference.judge_fit`; a refusal is the
    caller's to raise before this)."""
    notes = judge_fit(baseline, summary_identity(summary)).notes
    names = tuple(node.name for node in summary.nodes)
    counterparts: IntArray
    matched_by: MatchedBy
    if baseline.uniform:
        counterparts, matched_by = (
            np.arange(len(names), dtype=np.int64) % max(1, len(baseline.nodes)),
            "expected",
        )
    elif baseline.per_node:
        counterparts, matched_by, _ = match_nodes(baseline.nodes, names)
    else:
        counterparts, matched_by = np.full(len(names), -1, np.int64), "none"
    nodes = []
    for node, j in zip(summary.nodes, counterparts.tolist(), strict=True):
        reference = float(baseline.node_tokens_per_s[j]) if j >= 0 else _NAN
        other = baseline.nodes[j] if j >= 0 else None
        change = delta_pct(node.tokens_per_s, reference)
        nodes.append(
            NodeDelta(
                node.name, other, node.tokens_per_s, reference, change, node.outcome, baseline.outcome(j)
            )
        )
    reference = baseline.reference_total(baseline.node_tokens_per_s, counterparts)
    base_side = _baseline_side(baseline, counterparts, math.inf) if baseline.per_node else None
    covers = covers_line([(n.name, n.outcome) for n in summary.nodes], base_side, "finished")
    return BaselineComparison(
        name=baseline.name,
        source=baseline.source,
        tokens_per_s=reference,
        run_tokens_per_s=summary.tokens_per_s,
        delta_pct=delta_pct(summary.tokens_per_s, reference),
        matched_by=matched_by,
        notes=notes,
        nodes=tuple(nodes),
        covers=covers,
    )
