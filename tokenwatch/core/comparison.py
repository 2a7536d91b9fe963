"""Two runs side by side (e.g. gb200 vs gb300): each figure of both and the ratio B / A."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from tokenwatch.core.efficiency import Efficiency
from tokenwatch.core.summary import RunSummary

Better = Literal["higher", "lower", "neither"]


@dataclass(frozen=True, slots=True)
class ComparedFigure:
    section: str
    label: str
    unit: str
    a: float
    b: float
    better: Better

    @property
    def ratio(self) -> float:
        """B / A (NaN when either is unknown or A is zero)."""
        ok = math.isfinite(self.a) and math.isfinite(self.b) and self.a != 0
        return self.b / self.a if ok else math.nan

    @property
    def b_is_better(self) -> bool | None:
        r = self.ratio
        if not math.isfinite(r) or self.better == "neither" or r == 1:
            return None
        return (r > 1) == (self.better == "higher")


def _f(value: float | None) -> float:
    return math.nan if value is None else float(value)


def compare_runs(
    a: RunSummary, b: RunSummary, eff_a: Efficiency, eff_b: Efficiency
) -> tuple[ComparedFigure, ...]:
    """The comparison table: throughput, per GPU, node spread, power and efficiency, latency."""
    rows = [
        ComparedFigure("Throughput", "Total aggregate", "tokens/s", a.tokens_per_s, b.tokens_per_s, "higher"),
        ComparedFigure(
            "Throughput", "Per GPU", "tokens/s", a.per_gpu_tokens_per_s, b.per_gpu_tokens_per_s, "higher"
        ),
        ComparedFigure("Throughput", "GPUs", "", _count(a.gpus), _count(b.gpus), "neither"),
        ComparedFigure("Node spread", "Max single-node", "tokens/s", a.spread.max, b.spread.max, "higher"),
        ComparedFigure("Node spread", "Min single-node", "tokens/s", a.spread.min, b.spread.min, "higher"),
        ComparedFigure(
            "Node spread", "Median single-node", "tokens/s", a.spread.median, b.spread.median, "higher"
        ),
        ComparedFigure(
            "Node spread", "Spread (max-min)/min", "%", a.spread.spread_pct, b.spread.spread_pct, "lower"
        ),
        ComparedFigure(
            "Power", "Mean rack power", "W", _f(eff_a.mean_power_w), _f(eff_b.mean_power_w), "neither"
        ),
        ComparedFigure(
            "Power",
            "Measured tokens/s per W",
            "tokens/J",
            _f(eff_a.measured_tokens_per_s_per_w),
            _f(eff_b.measured_tokens_per_s_per_w),
            "higher",
        ),
        ComparedFigure("Power", "GPU TDP", "W", _f(eff_a.tdp_w), _f(eff_b.tdp_w), "neither"),
        ComparedFigure(
            "Power",
            "TDP-based tokens/s per W (GPUs x TDP)",
            "tokens/J",
            _f(eff_a.tdp_tokens_per_s_per_w),
            _f(eff_b.tdp_tokens_per_s_per_w),
            "higher",
        ),
    ]
    for metric in ("ttft", "tpot", "e2e"):
        la, lb = a.latency_ms.get(metric, {}), b.latency_ms.get(metric, {})
        if not la and not lb:
            continue
        for pct in ("p50", "p90", "p99"):
            rows.append(
                ComparedFigure(
                    "Latency",
                    f"{metric.upper()} {pct}",
                    "ms",
                    _f(la.get(pct)),
                    _f(lb.get(pct)),
                    "lower",
                )
            )
    return tuple(rows)


def _count(value: int | None) -> float:
    return math.nan if value is None else float(value)
