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

from tokenwatch.base.durations import format_clock
from tokenwatch.base.formatting import DASH, group, json_number
from tokenwatch.core.final_figure import did_work as figure_counts
from tokenwatch.core.final_figure import rack_sum
from tokenwatch.core.node_outcome import WHOLE, NodeOutcome
from tokenwatch.core.node_spread import NodeSpread
from tokenwatch.core.verdict.final import RunVerdict

PERCENTILES = {"p50": 0.5, "p90": 0.9, "p99": 0.99}


@dataclass(frozen=True, slots=True)
class NodeResult:
    """One node's measured result. ``tokens_per_s`` = generated tokens / own measured duration.
    ``gpus`` is None where nobody said (a LoadGen summary alone does not): never assumed."""

    name: str
    gpus: int | None
    tokens_per_s: float
    samples_per_s: float
    valid: bool | None = None  # None: validity unknown (a recording); False: LoadGen said INVALID
    finished: bool = True  # False: the node stopped partway (down or stale at the end): a partial figure
    outcome: NodeOutcome = WHOLE  # how it stopped partway, from when, with how much of its work (recordings)
    latency_ms: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    extra: Mapping[str, Any] = field(default_factory=dict)


def did_work(node: NodeResult) -> bool:
    """Whether a node has a figure to count (a node that never produced a token has none)."""
    return figure_counts(node.tokens_per_s)


@dataclass(frozen=True, slots=True)
class RunSummary:
    """The rack table. Which nodes each figure covers is part of it: the aggregate and per GPU count
    every node that did work (a node that stopped partway too: flagged, as the rack figure sums its
    nodes); the single-node figures and the spread only the nodes that finished (a partial node's
    figure is not a node result); a node that did no work is in neither."""

    name: str
    scenario: str
    duration_s: float  # the last run time the summary covers (s)
    nodes: tuple[NodeResult, ...]
    spread: NodeSpread
    latency_ms: Mapping[str, Mapping[str, float]]
    power_mean_w: float | None
    tokens_per_joule: float | None
    warnings: tuple[str, ...] = ()
    complete: bool = True  # False: interrupted, or a recording that stops with no run end
    end_reason: str | None = None  # the run end's reason (None: no run end seen, or not a recording)
    status: str = ""  # what a cut-off run reads as (``INTERRUPTED at 07:44 (8.8 % of samples)``)
    verdict: RunVerdict | None = None  # the MLPerf verdict, each rule as LoadGen judges it

    # Result folders: "system" (one LoadGen run for the whole system) or "per-node" (one per node, summed);
    # None for recordings. ``apart``: ranging and compliance runs, listed, never in the aggregate.
    layout: str | None = None
    apart: tuple[NodeResult, ...] = ()
    # What the power figures divide by (recordings): "counter" (the GPUs' energy counters), "power"
    # (integrated power readings) or "mixed" (core/energy.py); None for result folders.
    energy_source: str | None = None
    # The run time the power figures' window opens when it is not the run's start (a watch that attached
    # mid-run, its GPU readings without history): mean power and tokens per joule cover it alone.
    energy_since_s: float | None = None
    # The nodes MLPerf's figure has no result for (core/final_figure.py), in words; "" when none.
    left_out_note: str = ""
    # What the rack figures are of: "tokens", or "samples" for results that state samples/s only (a
    # multimodal benchmark's summary has no tokens line): tokens are then unknown, never 0.
    figure: str = "tokens"
    # The latency percentiles are the core's estimates from its 1 % log buckets (a recording), not
    # LoadGen's exact values (result folders): shown to the precision the buckets allow (``~918``).
    latency_estimated: bool = False
    # A fleet known rack by rack (watched through Prometheus): its tokens/s over the time its rack
    # figures cover (core/fleet/_summary.py), the figure every line showed; None otherwise (the nodes' sum).
    fleet_tokens_per_s: float | None = None

    def node_figure(self, node: NodeResult) -> float:
        """A node's figure in the summary's unit (tokens/s, or samples/s for a samples-only summary)."""
        return node.samples_per_s if self.figure == "samples" else node.tokens_per_s

    @property
    def unit(self) -> str:
        return f"{self.figure}/s"

    @property
    def gpus(self) -> int | None:
        """The GPUs behind the aggregate; None when any node's count is unknown."""
        counts = [node.gpus for node in self.nodes]
        return None if any(c is None for c in counts) else sum(c for c in counts if c is not None)

    @property
    def counted_nodes(self) -> tuple[NodeResult, ...]:
        """The nodes in the aggregate and per GPU: every node that did work."""
        return tuple(n for n in self.nodes if figure_counts(self.node_figure(n)))

    @property
    def spread_nodes(self) -> tuple[NodeResult, ...]:
        """The nodes in the single-node figures and the spread: those that did work and finished it."""
        return tuple(n for n in self.nodes if figure_counts(self.node_figure(n)) and n.finished)

    @property
    def gpus_counted(self) -> int | None:
        """GPUs that took part: those of the nodes that did work (None when any count is unknown)."""
        counts = [node.gpus for node in self.counted_nodes]
        return None if any(c is None for c in counts) else sum(c for c in counts if c is not None)

    @property
    def tokens_per_s(self) -> float:
        """The rack's final figure: the same sum every surface shows (core/final_figure.py); unknown (NaN)
        where the results state no tokens."""
        if self.fleet_tokens_per_s is not None:
            return self.fleet_tokens_per_s
        return rack_sum([n.tokens_per_s for n in self.nodes]) if self.figure == "tokens" else math.nan

    @property
    def per_gpu_tokens_per_s(self) -> float:
        """The aggregate over the GPUs that took part."""
        return self.tokens_per_s / self.gpus_counted if self.gpus_counted else math.nan

    @property
    def aggregate(self) -> float:
        """The rack figure in the summary's unit (:attr:`unit`)."""
        if self.fleet_tokens_per_s is not None and self.figure == "tokens":
            return self.fleet_tokens_per_s
        return rack_sum([self.node_figure(n) for n in self.nodes])

    @property
    def per_gpu(self) -> float:
        """:attr:`aggregate` over the GPUs that took part."""
        return self.aggregate / self.gpus_counted if self.gpus_counted else math.nan

    def to_json(self) -> dict[str, Any]:
        """The JSON contract read by later commands and outside tools (NaN becomes null)."""
        counted = {n.name for n in self.counted_nodes}
        in_spread = {n.name for n in self.spread_nodes}
        out: dict[str, Any] = {
            "name": self.name,
            "scenario": self.scenario,
            "duration_s": json_number(self.duration_s, 6),
            "complete": self.complete,
            "end_reason": self.end_reason,
            "aggregate": {
                "tokens_per_s": json_number(self.tokens_per_s, 6),
                "per_gpu_tokens_per_s": json_number(self.per_gpu_tokens_per_s, 6),
                "nodes": len(self.nodes),
                "gpus": self.gpus,
                "covers": {
                    "nodes": len(counted),
                    "gpus": self.gpus_counted,
                    "left_out": [n.name for n in self.nodes if n.name not in counted],
                },
                **({"note": self.left_out_note} if self.left_out_note else {}),
                **(
                    {
                        "figure": "samples_per_s",
                        "samples_per_s": json_number(self.aggregate, 6),
                        "per_gpu_samples_per_s": json_number(self.per_gpu, 6),
                    }
                    if self.figure == "samples"
                    else {}
                ),
            },
            "node_spread": {
                **spread_json(self.spread),
                "covers": {
                    "nodes": len(in_spread),
                    "left_out": [n.name for n in self.nodes if n.name not in in_spread],
                },
            },
            "nodes": [_node_json(node) for node in self.nodes],
        }
        if self.latency_ms:
            out["latency_ms"] = {
                m: {k: json_number(v, 6) for k, v in pcts.items()} for m, pcts in self.latency_ms.items()
            }
        if self.power_mean_w is not None:
            out["power"] = {
                "mean_w": json_number(self.power_mean_w, 6),
                "tokens_per_joule": json_number(self.tokens_per_joule, 6),
            }
            if self.energy_source:
                out["power"]["energy_source"] = self.energy_source
            if self.energy_since_s is not None:
                out["power"]["since_s"] = json_number(self.energy_since_s, 3)
        if self.layout is not None:
            out["layout"] = self.layout
        if self.apart:
            out["not_in_aggregate"] = [_node_json(node) for node in self.apart]
        out["warnings"] = list(self.warnings)  # always there: a clean run's is [] (readers need not guess)
        if self.verdict is not None:
            out["verdict"] = self.verdict.to_json()
        return out


def spread_json(spread: NodeSpread) -> dict[str, float | None]:
    return {k: json_number(getattr(spread, k), 6) for k in ("max", "min", "mean", "median", "spread_pct")}


def _node_json(node: NodeResult) -> dict[str, Any]:
    out: dict[str, Any] = {
        "name": node.name,
        "gpus": node.gpus,
        "tokens_per_s": json_number(node.tokens_per_s, 6),
        "samples_per_s": json_number(node.samples_per_s, 6),
    }
    if node.valid is not None:
        out["valid"] = node.valid
    if not node.finished:
        out["finished"] = False
    if node.latency_ms:
        out["latency_ms"] = {
            m: {k: json_number(v, 6) for k, v in p.items()} for m, p in node.latency_ms.items()
        }
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
    *,
    complete: bool = True,
    end_reason: str | None = None,
    status: str = "",
    verdict: RunVerdict | None = None,
    layout: str | None = None,
    apart: Sequence[NodeResult] = (),
    figure: str = "tokens",
) -> RunSummary:
    """Rack figures from node results; invalid nodes stay listed but are flagged, not hidden. The
    spread is over the nodes that finished their work (see :class:`RunSummary`), in ``figure``'s unit."""
    finished = [
        (n.samples_per_s if figure == "samples" else n.tokens_per_s) if n.finished else math.nan
        for n in nodes
    ]
    spread = NodeSpread.of(np.array(finished, dtype=np.float64))
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
        complete,
        end_reason,
        status,
        verdict,
        layout,
        tuple(apart),
        figure=figure,
    )


def rack_table_rows(summary: RunSummary) -> list[tuple[str, str]]:
    """The published rack table's rows (label, figure in :attr:`RunSummary.unit`), as the summary table
    and the dashboard's run summary print them."""
    s = summary.spread
    d = 2 if summary.figure == "samples" else 1  # samples/s are small figures (1.30 samples/s)
    rows: list[tuple[str, str]] = [
        ("Total aggregate", group(summary.aggregate, d)),
        ("Max single-node", group(s.max, d)),
        ("Min single-node", group(s.min, d)),
        ("Average single-node", group(s.mean, d)),
        ("Median single-node", group(s.median, d)),
        ("Per GPU", group(summary.per_gpu, d)),
        ("Node spread (max-min)/min", f"{s.spread_pct:.1f} %" if s.nodes else DASH),
    ]
    if summary.power_mean_w is not None:
        rows.append(("Mean power", f"{summary.power_mean_w / 1000:,.1f} kW"))
    if summary.tokens_per_joule is not None:
        rows.append(("Tokens per joule", f"{summary.tokens_per_joule:.2f}"))
    if summary.energy_since_s is not None and (summary.power_mean_w is not None or summary.tokens_per_joule):
        rows.append(
            ("Power figures cover", f"from {format_clock(summary.energy_since_s)} (GPU readings began)")
        )
    return rows


def coverage_lines(summary: RunSummary) -> list[str]:
    """Which nodes the figures cover, in words: every figure says what it is over."""
    total = len(summary.nodes)
    counted, in_spread = summary.counted_nodes, summary.spread_nodes
    note = (
        [summary.left_out_note[0].upper() + summary.left_out_note[1:] + "."] if summary.left_out_note else []
    )
    if len(counted) == len(in_spread) == total:
        return [f"Covers all {total} nodes." if total > 1 else "Covers its one result.", *note]
    counted_names = {n.name for n in counted}
    spread_names = {n.name for n in in_spread}
    idle = [n.name for n in summary.nodes if n.name not in counted_names]
    partial = [n.name for n in counted if n.name not in spread_names]
    gpus = summary.gpus_counted
    shown = f"{gpus} GPUs" if gpus is not None else "GPUs unknown"
    aggregate = f"Aggregate and per GPU: {len(counted)} of {total} nodes ({shown})"
    if idle:
        aggregate += f"; no work from {name_list(idle)}"
    single = f"Single-node figures and spread: {len(in_spread)} of {total} nodes"
    if partial:
        single += f"; {name_list(partial)} stopped partway"
    if idle:
        single += f"; no work from {name_list(idle)}"
    return [aggregate + ".", single + ".", *note]


def name_list(names: list[str], limit: int = 6) -> str:
    """``a, b, c, +2 more``: at most ``limit`` names, then how many more."""
    shown = names[:limit] + ([f"+{len(names) - limit} more"] if len(names) > limit else [])
    return ", ".join(shown)
