"""A one-node run's latency figures as its LoadGen wrote them, once it has written its result.

LoadGen's detail log ends with each latency's exact percentiles, mean and maximum (over every query, in
ns). The core's histograms estimate the same figures from 1 % log buckets, or from a server's much
coarser Prometheus buckets (vLLM's TTFT buckets are 100, 250, 500 ms wide apart): 158 ms where LoadGen
wrote 200.5. Where LoadGen states the figure it is the one every surface shows. A rack of several nodes
has no such figure (each node's LoadGen judges its own queries): its percentiles stay estimates.
"""

from __future__ import annotations

import math
from typing import Any

from tokenwatch.base.events import LatencyMetric
from tokenwatch.core._state import RackState

# Per metric: the percentile key (a {} for 50.00 / 90.00 / 99.00), the mean's key, the maximum's key.
_KEYS: dict[LatencyMetric, tuple[str, str, str]] = {
    "ttft": (
        "result_first_token_{}_percentile_latency_ns",
        "result_first_token_mean_latency_ns",
        "result_first_token_max_latency_ns",
    ),
    "tpot": (
        "result_time_per_output_token_{}_percentile_ns",
        "result_time_to_output_token_mean",
        "result_time_to_output_token_max",
    ),
    "e2e": ("result_{}_percentile_latency_ns", "result_mean_latency_ns", "result_max_latency_ns"),
}


def _seconds(values: dict[str, Any], key: str) -> float:
    value = values.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return math.nan
    return float(value) / 1e9


def loadgen_latency(
    state: RackState, metric: LatencyMetric
) -> tuple[float, float, float, float, float] | None:
    """(p50, p90, p99, mean, max) in s from the run's only node's LoadGen result; None for a rack of
    several nodes, before the result, or where LoadGen wrote no p99 for ``metric``."""
    if len(state.run.nodes) != 1:
        return None
    values = state.verdict.details[0]
    if "result_validity" not in values:
        return None
    percentile, mean, most = _KEYS[metric]
    p50, p90, p99 = (_seconds(values, percentile.format(q)) for q in ("50.00", "90.00", "99.00"))
    if math.isnan(p99):
        return None
    return p50, p90, p99, _seconds(values, mean), _seconds(values, most)
