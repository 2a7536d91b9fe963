"""What a simulated node's LoadGen would write at its start: its settings and query plan.

Each simulated node is a LoadGen run of the profile's benchmark (every node its own, as in a rack
submission): the minimum duration of the rules (600 s), the benchmark's Offline sample minimum or
LoadGen's default Server query minimum, token latencies on, the benchmark's TTFT/TPOT limits, and the
plan: Offline the node's share of the samples in one query; Server a schedule as long as the run (its
arrivals are drawn as the run goes, so no query count is known in advance). Seeds are not simulated:
the start-of-run check leaves them undecided rather than inventing any.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from tokenwatch.base.events import LatencyMetric, LoadGenDetail, Scenario
from tokenwatch.inputs.sim.profile import Profile
from tokenwatch.mlperf.rules import (
    DEFAULT_MIN_QUERY_COUNT,
    MIN_DURATION_S,
    latency_limits,
    normalize_benchmark,
)


def latency_limits_of(profile: Profile) -> dict[LatencyMetric, float]:
    """The TTFT/TPOT limits (s) of the profile's benchmark's Server scenario ({} without one)."""
    ref = normalize_benchmark(profile.benchmark) if profile.benchmark else None
    limits = latency_limits(ref, "Server") if ref is not None else None
    return {} if limits is None else {"ttft": limits.ttft_s, "tpot": limits.tpot_s}


def simulated_details(
    profile: Profile,
    scenario: Scenario,
    duration_s: float,
    nodes: Sequence[str],
    quota: np.ndarray | None,
    qps: np.ndarray | None,
) -> Iterator[LoadGenDetail]:
    """One :class:`LoadGenDetail` per node at t = 0 (nothing without a benchmark)."""
    ref = normalize_benchmark(profile.benchmark) if profile.benchmark else None
    if ref is None:
        return
    minimum_ms = round(MIN_DURATION_S * 1000)
    for i, node in enumerate(nodes):
        values: dict[str, Any] = {
            "requested_scenario": scenario,
            "effective_scenario": scenario,
            "requested_min_duration_ms": minimum_ms,
            "effective_min_duration_ms": minimum_ms,
            "effective_target_latency_percentile": 0.99,
            "requested_use_token_latencies": True,
        }
        if scenario == "Offline" and quota is not None:
            samples = int(quota[i])
            minimum = ref.benchmark.offline_min_samples or DEFAULT_MIN_QUERY_COUNT
            values |= {
                "requested_min_query_count": minimum,
                "effective_min_query_count": 1,
                "effective_min_sample_count": minimum,
                "effective_samples_per_query": samples,
                "generated_query_count": 1,
                "generated_samples_per_query": samples,
            }
        else:
            limits = latency_limits(ref, "Server")
            values |= {
                "requested_min_query_count": DEFAULT_MIN_QUERY_COUNT,
                "effective_min_query_count": DEFAULT_MIN_QUERY_COUNT,
                "effective_min_sample_count": DEFAULT_MIN_QUERY_COUNT,
                "effective_samples_per_query": 1,
                "generated_samples_per_query": 1,
                "generated_query_duration": round(duration_s * 1e9),
            }
            if qps is not None:
                values["effective_target_qps"] = round(float(qps[i]), 3)
            if limits is not None:
                values["requested_server_ttft_latency"] = round(limits.ttft_s * 1e9)
                values["requested_server_tpot_latency"] = round(limits.tpot_s * 1e9)
        yield LoadGenDetail(0.0, node, values)
