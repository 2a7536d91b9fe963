"""The run summary in the form of the published rack table, and its JSON contract.

One aggregation for every path: :func:`summarize_nodes` takes per-node results (from the
core's state after a recording, or from LoadGen summaries) and makes the rack figures: the
aggregate is the sum of the nodes' tokens/s, as the published rack figure sums its node results.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tokenwatch.core.config import STATE_CODE
from tokenwatch.core.histogram import quantiles_of
from tokenwatch.core.node_spread import NodeSpread
from tokenwatch.core.state import RackState
from tokenwatch.durations import format_clock
from tokenwatch.events import LATENCY_METRICS

PERCENTILES = {"p50": 0.5, "p90": 0.9, "p99": 0.99}
_DOWN = STATE_CODE["down"]
_STALE = STATE_CODE["stale"]


@dataclass(frozen=True, slots=True)
class NodeResult:
    """One node's measured result. ``tokens_per_s`` = generated tokens / own measured duration.
    ``gpus`` is None where nobody said (a LoadGen summary alone does not): never assumed."""

    name: str
    gpus: int | None
    tokens_per_s: float
    samples_per_s: float
    valid: bool | None = None  # None: validity unknown (a recording); False: LoadGen said INVALID
    latency_ms: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    extra: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class RunSummary:
    name: str
    scenario: str
    duration_s: float
    nodes: tuple[NodeResult, ...]
    spread: NodeSpread
    latency_ms: Mapping[str, Mapping[str, float]]
    power_mean_w: float | None
    tokens_per_joule: float | None
    warnings: tuple[str, ...] = ()
    # Result folders: "system" (one LoadGen run for the whole system) or "per-node" (one per node, summed);
    # None for recordings. ``apart``: ranging and compliance runs, listed, never in the aggregate.
    layout: str | None = None
    apart: tuple[NodeResult, ...] = ()

    @property
    def gpus(self) -> int | None:
        """The GPUs behind the aggregate; None when any node's count is unknown."""
        counts = [node.gpus for node in self.nodes]
        return None if any(c is None for c in counts) else sum(c for c in counts if c is not None)

    @property
    def tokens_per_s(self) -> float:
        return float(sum(n.tokens_per_s for n in self.nodes if math.isfinite(n.tokens_per_s)))

    @property
    def per_gpu_tokens_per_s(self) -> float:
        return self.tokens_per_s / self.gpus if self.gpus else math.nan

    def to_json(self) -> dict[str, Any]:
        """The JSON contract read by later commands and outside tools (NaN becomes null)."""
        out: dict[str, Any] = {
            "name": self.name,
            "scenario": self.scenario,
            "duration_s": _num(self.duration_s),
            "aggregate": {
                "tokens_per_s": _num(self.tokens_per_s),
                "per_gpu_tokens_per_s": _num(self.per_gpu_tokens_per_s),
                "nodes": len(self.nodes),
                "gpus": self.gpus,
            },
            "node_spread": spread_json(self.spread),
            "nodes": [_node_json(node) for node in self.nodes],
        }
        if self.latency_ms:
            out["latency_ms"] = {
                m: {k: _num(v) for k, v in pcts.items()} for m, pcts in self.latency_ms.items()
            }
        if self.power_mean_w is not None:
            out["power"] = {
                "mean_w": _num(self.power_mean_w),
                "tokens_per_joule": _num(self.tokens_per_joule),
            }
        if self.layout is not None:
            out["layout"] = self.layout
        if self.apart:
            out["not_in_aggregate"] = [_node_json(node) for node in self.apart]
        if self.warnings:
            out["warnings"] = list(self.warnings)
        return out


def _num(value: float | None) -> float | None:
    return None if value is None or not math.isfinite(value) else round(float(value), 6)


def spread_json(spread: NodeSpread) -> dict[str, float | None]:
    return {k: _num(getattr(spread, k)) for k in ("max", "min", "mean", "median", "spread_pct")}


def _node_json(node: NodeResult) -> dict[str, Any]:
    out: dict[str, Any] = {
        "name": node.name,
        "gpus": node.gpus,
        "tokens_per_s": _num(node.tokens_per_s),
        "samples_per_s": _num(node.samples_per_s),
    }
    if node.valid is not None:
        out["valid"] = node.valid
    if node.latency_ms:
        out["latency_ms"] = {m: {k: _num(v) for k, v in p.items()} for m, p in node.latency_ms.items()}
    out.update(node.extra)
    return out


def summarize_nodes(
    name: str,
    scenario: str,
    duration_s: float,
    nodes: Sequence[NodeResult],
    latency_ms: Mapping[str, Mapping[str, float]] | None = None,
    power_mean_w: float | None = None,
    tokens_per_joule: float | None = None,
    warnings: Sequence[str] = (),
    layout: str | None = None,
    apart: Sequence[NodeResult] = (),
) -> RunSummary:
    """Rack figures from node results; invalid nodes stay listed but are flagged, not hidden."""
    spread = NodeSpread.of(np.array([n.tokens_per_s for n in nodes], dtype=np.float64))
    return RunSummary(
        name,
        scenario,
        duration_s,
        tuple(nodes),
        spread,
        latency_ms or {},
        power_mean_w,
        tokens_per_joule,
        tuple(warnings),
        layout,
        tuple(apart),
    )


def summarize_state(state: RackState) -> RunSummary:
    """The summary of everything the core has ingested (a recording, or a run so far)."""
    run = state.run
    tokens_per_s, samples_per_s = state.measured_means()
    # A node that ended down or stale while the run finished did not complete its work: like an
    # INVALID LoadGen result its figure is flagged, never silently summed as if it were whole.
    codes = state.effective_state(state.now)
    unfinished = state.ended & ((codes == _DOWN) | (codes == _STALE))
    warnings = []
    for i in np.flatnonzero(unfinished).tolist():
        span = state.t_last_change[i] - state.t_first[i]
        worked = format_clock(span) if np.isfinite(span) else "no"
        how = "down" if codes[i] == _DOWN else "stale"
        warnings.append(
            f"{run.nodes[i]} did not finish ({how}: {state.state_reason[i]}); its figure covers its {worked} "
            "of work and is still in the aggregate, as the rack figure sums nodes"
        )
    nodes = [
        NodeResult(
            name,
            run.gpus_per_node,
            float(tokens_per_s[i]),
            float(samples_per_s[i]),
            valid=False if unfinished[i] else None,
        )
        for i, name in enumerate(run.nodes)
    ]
    latency: dict[str, dict[str, float]] = {}
    for metric in LATENCY_METRICS:
        hist = state.rack_latency[metric]
        if hist.total:
            values = quantiles_of(hist.counts, list(PERCENTILES.values()))
            latency[metric] = {k: v * 1000.0 for k, v in zip(PERCENTILES, values, strict=True)}
    duration = state.now
    has_power = state.has_power()
    power_mean = state.energy_j / duration if has_power and duration > 0 else None
    tokens_per_joule = (
        float(state.tokens.sum()) / state.energy_j if has_power and state.energy_j > 0 else None
    )
    return summarize_nodes(
        run.name, run.scenario, duration, nodes, latency, power_mean, tokens_per_joule, warnings
    )
