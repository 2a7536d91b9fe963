"""A snapshot as the headless JSONL record (the contract documented in the README)."""

from __future__ import annotations

import math
from typing import Any

from tokenwatch.base.formatting import json_number
from tokenwatch.core.baseline.view import BaselineView
from tokenwatch.core.causes._cause import Cause
from tokenwatch.core.fleet.groups import groups_json
from tokenwatch.core.fleet.table import FleetTable
from tokenwatch.core.run_clock import RunClock
from tokenwatch.core.snapshot import RackSnapshot
from tokenwatch.core.summary import spread_json
from tokenwatch.core.verdict._json import verdict_json


def cause_json(cause: Cause | None) -> dict[str, Any] | None:
    """A straggler's cause hint: ``{"kind", "text", "gpu", "since_t"}``; None for a node with nothing to
    explain."""
    if cause is None:
        return None
    return {"kind": cause.kind, "text": cause.text, "gpu": cause.gpu, "since_t": json_number(cause.since_t)}


def snapshot_json(snap: RackSnapshot) -> dict[str, Any]:
    """One JSONL record. Missing values (a down or stale node's live figures) are null; ``node_spread``
    is over the running and finished nodes, ``stopped_nodes`` lists the others; ``end`` appears once the
    run has ended, with the run's headline figures."""
    agg = snap.aggregate
    nodes = snap.nodes
    out: dict[str, Any] = {
        "t": json_number(snap.t),
        "progress_pct": json_number(snap.progress_pct),
        "clock": clock_json(snap.clock),
        "aggregate": {
            "tokens_per_s": json_number(agg.tokens_per_s),
            "per_gpu_tokens_per_s": json_number(agg.per_gpu_tokens_per_s),
            "nodes": agg.nodes,
            "nodes_up": agg.nodes_up,
            "gpus": agg.gpus,
            "gpus_reporting": agg.gpus_reporting,
            "power_w": json_number(agg.power_w),
        },
        "node_spread": {**spread_json(snap.node_spread), "nodes": snap.node_spread.nodes},
        "stopped_nodes": [
            {
                "name": s.name,
                "state": s.state,
                "since": json_number(s.since_s),
                "reason": s.reason,
                "mean_tokens_per_s": json_number(s.mean_tokens_per_s),
                "progress_pct": json_number(s.progress_pct),
            }
            for s in snap.stopped_nodes
        ],
        "nodes": [
            {
                "name": name,
                "status": nodes.state[i],
                "tokens_per_s": json_number(nodes.tokens_per_s[i]),
                "progress_pct": json_number(nodes.progress_pct[i]),
                "power_w": json_number(nodes.power_w[i]),
                "sm_clock_mhz": json_number(nodes.sm_clock_mhz[i]),
                "hbm_used_mib": json_number(nodes.hbm_used_mib[i]),
                "temp_c": json_number(nodes.temp_c[i]),
                "tokens_per_joule": json_number(nodes.tokens_per_joule[i])
                if len(nodes.tokens_per_joule)
                else None,
                "cause": cause_json(nodes.causes[i]) if nodes.causes else None,
            }
            for i, name in enumerate(nodes.names)
        ],
        "alerts": [
            {"t": json_number(a.t), "node": a.node, "kind": a.kind, "message": a.message}
            for a in snap.active_alerts
        ],
        "verdict": None if snap.verdict is None else verdict_json(snap.verdict, snap.ended),
    }
    if snap.fleet is not None:  # only for a run of several racks: the board's rows, one truth with it
        out["fleet"] = fleet_json(snap.fleet)
    if snap.fleet_groups is not None:  # only where the run places its racks in sites or rows
        out["fleet_groups"] = groups_json(snap.fleet_groups)
    if snap.baseline is not None:  # only with --baseline: the golden contracts without one are unchanged
        out["baseline"] = baseline_json(snap.baseline, nodes.names)
    figures = snap.run_figures
    if snap.ended and figures is not None:
        out["end"] = {
            "reason": snap.end_reason,
            "banner": snap.banner,
            "complete": figures.complete,
            "tokens_per_s": json_number(figures.tokens_per_s),
            "per_gpu_tokens_per_s": json_number(figures.per_gpu_tokens_per_s),
            "gpus": figures.gpus,
            "power_mean_w": json_number(figures.power_mean_w),
            "tokens_per_joule": json_number(figures.tokens_per_joule),
            "nodes_finished": figures.nodes_finished,
        }
        if figures.note:
            out["end"]["note"] = figures.note
        if snap.summary is not None and snap.summary.energy_source:
            out["end"]["energy_source"] = snap.summary.energy_source
    return out


def fleet_json(table: FleetTable) -> list[dict[str, Any]]:
    """The fleet board's rows: per rack its state, nodes, figures and projection; a rack whose data
    stopped (stale, down) has ``"projection": "stale"`` rather than a figure extrapolated from its last."""
    rows = []
    for r, rack in enumerate(table.racks):
        silent = table.projection_stale(r)
        valid = float(table.projected_valid[r])
        rows.append(
            {
                "rack": rack,
                "state": table.state[r],
                "nodes": int(table.nodes_total[r]),
                "nodes_up": int(table.nodes_up[r]),
                "gpus": int(table.gpus[r]),
                "tokens_per_s": json_number(table.tokens_per_s[r]),
                "per_gpu_tokens_per_s": json_number(table.per_gpu_tokens_per_s[r]),
                "power_w": json_number(table.power_w[r]),
                "tokens_per_joule": json_number(table.tokens_per_joule[r]),
                "spread_pct": json_number(table.spread_pct[r]),
                "projection": "stale"
                if silent
                else {
                    "tokens_per_s": json_number(table.projected_tokens_per_s[r]),
                    "valid": None if math.isnan(valid) else bool(valid),
                },
                "worst_node": table.worst_node[r] or None,
                "worst_delta_pct": json_number(table.worst_delta_pct[r]),
                "worst_cause": table.worst_cause[r] or None,
            }
        )
    return rows


def clock_json(clock: RunClock) -> dict[str, Any]:
    """The run's one clock: ``{"nominal_s", "end_s", "end_low_s", "end_high_s", "end", "eta_s"}``; ``end``
    says which end ``end_s`` is: "projected", "actual" (the run has ended), "nominal" (no projection yet)
    or null (unknown, and ``end_s`` with it)."""
    return {
        "nominal_s": json_number(clock.nominal_s),
        "end_s": json_number(clock.end_s),
        "end_low_s": json_number(clock.end_low_s),
        "end_high_s": json_number(clock.end_high_s),
        "end": clock.end_kind or None,
        "eta_s": json_number(clock.eta_s),
    }


def baseline_json(view: BaselineView, names: tuple[str, ...]) -> dict[str, Any]:
    """The run against its baseline at the record's run time (``--baseline``); ``names``: the run's nodes."""
    return {
        "name": view.name,
        "tokens_per_s": json_number(view.baseline_tokens_per_s),
        "delta_pct": json_number(view.delta_pct),
        "matched_by": view.matched_by,
        "refused": view.refused or None,
        "projected_delta_pct": json_number(view.projected_delta_pct),
        "finish_gap_s": json_number(view.finish_gap_s),
        "covers": view.covers or None,  # where a node of either run stopped partway by this run time
        "nodes": [
            {
                "name": name,
                "baseline_node": other or None,
                "delta_pct": json_number(view.node_delta_pct[i]),
                "mark": view.node_marks[i] if i < len(view.node_marks) and view.node_marks[i] else None,
            }
            for i, (name, other) in enumerate(zip(names, view.counterpart, strict=True))
        ],
    }
