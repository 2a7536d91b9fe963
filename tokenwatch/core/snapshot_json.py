"""A snapshot as the headless JSONL record (the contract documented in the README)."""

from __future__ import annotations

import math
from typing import Any

from tokenwatch.core.snapshot import RackSnapshot
from tokenwatch.core.summary import spread_json
from tokenwatch.core.verdict_json import verdict_json


def _num(value: float | None, digits: int = 3) -> float | None:
    return None if value is None or not math.isfinite(value) else round(float(value), digits)


def snapshot_json(snap: RackSnapshot) -> dict[str, Any]:
    agg = snap.aggregate
    nodes = snap.nodes
    return {
        "t": _num(snap.t),
        "progress_pct": _num(snap.progress_pct),
        "aggregate": {
            "tokens_per_s": _num(agg.tokens_per_s),
            "per_gpu_tokens_per_s": _num(agg.per_gpu_tokens_per_s),
            "nodes": agg.nodes,
            "nodes_up": agg.nodes_up,
            "gpus": agg.gpus,
            "power_w": _num(agg.power_w),
        },
        "node_spread": spread_json(snap.node_spread),
        "nodes": [
            {
                "name": name,
                "status": nodes.state[i],
                "tokens_per_s": _num(nodes.tokens_per_s[i]),
                "progress_pct": _num(nodes.progress_pct[i]),
                "power_w": _num(nodes.power_w[i]),
                "sm_clock_mhz": _num(nodes.sm_clock_mhz[i]),
                "hbm_used_mib": _num(nodes.hbm_used_mib[i]),
                "temp_c": _num(nodes.temp_c[i]),
            }
            for i, name in enumerate(nodes.names)
        ],
        "alerts": [
            {"t": _num(a.t), "node": a.node, "kind": a.kind, "message": a.message} for a in snap.active_alerts
        ],
        "verdict": None if snap.verdict is None else verdict_json(snap.verdict),
    }
