"""The verdict as the headless JSONL snapshots carry it (the ``"verdict"`` contract in the README)."""

from __future__ import annotations

import math
from typing import Any

from tokenwatch.core.verdict_view import VerdictView


def _num(value: float | None, digits: int = 3) -> float | None:
    return None if value is None or not math.isfinite(value) else round(float(value), digits)


def verdict_json(view: VerdictView) -> dict[str, Any]:
    """``{"benchmark", "projected": {"tokens_per_s", "low", "high"}, "end_s", "energy_to_finish_j":
    {"value", "low", "high"}, "valid", "checks": [...]}``; ``projected`` and ``end_s`` are null until every
    node has made progress, ``energy_to_finish_j`` (the GPU energy from now to the projected end at the
    rack's power now) also while no GPU reports power and once the run has ended."""
    fc = view.forecast
    band, end = fc.tokens_per_s, fc.end_s
    energy = view.energy_to_finish_j
    return {
        "benchmark": view.benchmark,
        "projected": None
        if band is None
        else {"tokens_per_s": _num(band.value), "low": _num(band.low), "high": _num(band.high)},
        "end_s": None if end is None else _num(end.value),
        "energy_to_finish_j": None
        if energy is None
        else {"value": _num(energy.value, 0), "low": _num(energy.low, 0), "high": _num(energy.high, 0)},
        "valid": fc.valid,
        "checks": [
            {
                "name": r.name,
                "now": _num(r.now, 6),
                "projected": _num(r.projected, 6),
                "limit": _num(r.limit, 6),
                "ok": r.ok,
                "margin": _num(r.margin, 4),
                **({"missing": r.missing} if r.missing else {}),
            }
            for r in fc.rules
        ],
    }
