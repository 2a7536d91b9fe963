"""The verdict as the headless JSONL snapshots carry it (the ``"verdict"`` contract in the README)."""

from __future__ import annotations

from typing import Any

from tokenwatch.base.formatting import json_number
from tokenwatch.core.verdict.view import VerdictView


def verdict_json(view: VerdictView, ended: bool = False) -> dict[str, Any]:
    """``{"benchmark", "projected": {"tokens_per_s", "low", "high"}, "end_s", "energy_to_finish_j":
    {"value", "low", "high"}, "valid", "decided", "checks": [...]}``; ``projected`` and
    ``end_s`` are null until every node has made progress and while the run warms up (``"warming_up":
    true``, present only then), ``energy_to_finish_j`` (the GPU energy from now
    to the projected end at the rack's power now) also while no GPU reports power and once the run has
    ended."""
    fc = view.forecast
    band, end = fc.tokens_per_s, fc.end_s
    energy = view.energy_to_finish_j
    return {
        "benchmark": view.benchmark,
        "projected": None
        if band is None
        else {
            "tokens_per_s": json_number(band.value),
            "low": json_number(band.low),
            "high": json_number(band.high),
        },
        "end_s": None if end is None else json_number(end.value),
        "energy_to_finish_j": None
        if energy is None
        else {
            "value": json_number(energy.value, 0),
            "low": json_number(energy.low, 0),
            "high": json_number(energy.high, 0),
        },
        "valid": fc.valid,
        # Only while the rack's pace still climbs: no projection is stated ("projected" and "end_s" null).
        **({"warming_up": True} if fc.warming_up and not ended else {}),
        # Only while the verdict is decided before the end (it can no longer change): why, in a sentence.
        **({"decided": fc.decided} if fc.decided and not ended else {}),
        # Only while the data behind the forecast has stopped: why (nothing is extrapolated then).
        **({"stale": fc.stale} if fc.stale and not ended else {}),
        "checks": [
            {
                "name": r.name,
                "now": json_number(r.now, 6),
                "projected": json_number(r.projected, 6),
                "limit": json_number(r.limit, 6),
                "ok": r.ok,
                "margin": json_number(r.margin, 4),
                **({"missing": r.missing} if r.missing else {}),
                # Only where the figures are one node's of several that differ, and a histogram's estimate.
                **({"node": r.node} if r.node else {}),
                **({"estimated": True} if r.estimated else {}),
            }
            for r in fc.rules
        ],
    }
