"""The final figures LoadGen judges a run by: from per-sample data, or as a detail log states them.

LoadGen's PerformanceResult (mlcommons/inference @ b66003e10e2d, ``loadgen/loadgen.cc`` lines 533-601,
``results.cc`` ``ProcessLatencies``) reduced to what :mod:`tokenwatch.mlperf.verdict` needs: queries and
samples, the result figure, the minimum-duration basis, the TTFT/TPOT 99th percentiles and how many samples
exceeded each limit. From per-sample arrays (:func:`figures_from_samples`) everything is exact; a detail log
(:func:`figures_from_detail`) states only percentiles, so over-limit counts come as bounds
(:func:`over_count_bounds`) and a check they cannot settle stays undecided.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from tokenwatch.mlperf.rules import (
    DEFAULT_MIN_QUERY_COUNT,
    MIN_DURATION_S,
    SERVER_PERCENTILE,
    BenchmarkRef,
    latency_limits,
)

LoadGenScenario = Literal["Offline", "Server"]


@dataclass(frozen=True, slots=True)
class RunSettings:
    """The settings LoadGen judged the run by (a detail log's ``effective_*`` and requested token limits)."""

    scenario: LoadGenScenario
    min_duration_s: float
    min_query_count: int
    min_sample_count: int
    target_latency_percentile: float = 0.99
    ttft_limit_ns: int | None = None  # Server with use_token_latencies only
    tpot_limit_ns: int | None = None
    use_token_latencies: bool = True

    @classmethod
    def from_detail(cls, values: Mapping[str, Any]) -> RunSettings:
        """From a detail log's values (``effective_*``, ``requested_server_ttft_latency``...); ValueError."""
        scenario = values.get("effective_scenario")
        if scenario not in ("Offline", "Server"):
            raise ValueError(f"not an Offline or Server run: effective_scenario = {scenario!r}")
        try:
            min_duration_ms = _number(values, "effective_min_duration_ms")
            min_queries = int(_number(values, "effective_min_query_count"))
            min_samples = int(_number(values, "effective_min_sample_count"))
        except KeyError as exc:
            raise ValueError(f"the detail log lacks {exc.args[0]}") from None
        tokens = values.get("requested_use_token_latencies") is True
        ttft = values.get("requested_server_ttft_latency") if scenario == "Server" and tokens else None
        tpot = values.get("requested_server_tpot_latency") if scenario == "Server" and tokens else None
        return cls(
            scenario,
            min_duration_ms / 1000.0,
            min_queries,
            min_samples,
            float(values.get("effective_target_latency_percentile", 0.99)),
            int(ttft) if isinstance(ttft, int) else None,
            int(tpot) if isinstance(tpot, int) else None,
            tokens,
        )

    @classmethod
    def for_benchmark(cls, ref: BenchmarkRef, scenario: str) -> RunSettings:
        """What the rules of ``ref`` require of a run, for when its LoadGen settings are unknown: 600 s,
        the benchmark's Offline sample minimum (Server: LoadGen's default query minimum) and its
        TTFT/TPOT limits."""
        server = scenario != "Offline"
        limits = latency_limits(ref, "Server") if server else None
        # Offline issues one query of at least min_query_count samples (test_settings_internal.cc:
        # effective min_query_count 1, min_sample_count the samples); Server counts queries.
        samples = (ref.benchmark.offline_min_samples if not server else None) or DEFAULT_MIN_QUERY_COUNT
        return cls(
            "Server" if server else "Offline",
            MIN_DURATION_S,
            samples if server else 1,
            samples,
            SERVER_PERCENTILE,
            None if limits is None else round(limits.ttft_s * 1e9),
            None if limits is None else round(limits.tpot_s * 1e9),
        )


def _number(values: Mapping[str, Any], key: str) -> float:
    value = values[key]
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise KeyError(key)
    return float(value)


@dataclass(frozen=True, slots=True)
class Count:
    """How many samples exceeded a limit: exact (``low == high``) or bounded (``high`` None: no bound)."""

    low: int
    high: int | None

    @property
    def exact(self) -> int | None:
        return self.low if self.high == self.low else None


@dataclass(frozen=True, slots=True)
class FinalFigures:
    """What LoadGen's PerformanceResult holds at the end, reduced to what the judgement needs."""

    queries_issued: int
    sample_count: int
    tokens_per_s: float | None
    samples_per_s: float | None
    min_duration_basis_s: float  # Offline: max latency; Server: the final query's scheduled time; NaN unknown
    ttft_p99_ns: int | None = None
    tpot_p99_ns: int | None = None
    ttft_over: Count | None = None
    tpot_over: Count | None = None
    # False when the p99 values are read off a histogram (1 % buckets): shown, but a rule is then decided
    # by the over-limit counts alone, never by a value that may sit on the wrong side of the limit.
    p99_exact: bool = True


def percentile_index(n: int, percentile: float) -> int:
    """LoadGen's ``sorted[n * p]``: a double product truncated to an index (results.cc line 37)."""
    return int(n * percentile)


def tpot_per_sample(
    latency_ns: npt.ArrayLike, first_token_ns: npt.ArrayLike, tokens: npt.ArrayLike
) -> np.ndarray:
    """logging.cc line 475: ``(latency - first_token) / (n_tokens - 1)`` in integer ns, truncated toward zero.

    LoadGen records ``n_tokens <= 1`` as 0 tokens (lines 446-453), so such a sample divides by -1.
    """
    lat = np.asarray(latency_ns, np.int64)
    first = np.asarray(first_token_ns, np.int64)
    n = np.asarray(tokens, np.int64)
    divisor = np.where(n > 1, n, 0) - 1
    span = lat - first
    quotient = np.abs(span) // np.abs(divisor)
    return np.asarray(np.where((span < 0) != (divisor < 0), -quotient, quotient), np.int64)


def figures_from_samples(
    settings: RunSettings,
    latency_ns: npt.ArrayLike,
    *,
    final_query_scheduled_s: float = math.nan,
    final_query_done_s: float = math.nan,
    first_token_ns: npt.ArrayLike | None = None,
    tokens: npt.ArrayLike | None = None,
    queries_issued: int | None = None,
) -> FinalFigures:
    """LoadGen's figures from per-sample data: latencies (ns, from the scheduled time, as LoadGen records
    them), first-token latencies and output tokens per sample. Server needs the final query's scheduled and
    completion times (seconds from the run start); Offline's duration is the max latency."""
    lat = np.asarray(latency_ns, np.int64)
    n = int(lat.size)
    if n == 0:
        raise ValueError("no completed samples")
    token_count = None if tokens is None else int(np.where(np.asarray(tokens) > 1, tokens, 0).sum())
    max_latency_s = float(lat.max()) / 1e9
    if settings.scenario == "Offline":
        duration, basis = max_latency_s, max_latency_s
        samples_per_s = n / duration
        queries = 1 if queries_issued is None else queries_issued
    else:
        duration, basis = float(final_query_done_s), float(final_query_scheduled_s)
        samples_per_s = (n - 1) / duration
        queries = n if queries_issued is None else queries_issued
    tokens_per_s = None if token_count is None else token_count / duration
    ttft_p99 = tpot_p99 = None
    ttft_over = tpot_over = None
    if settings.scenario == "Server" and first_token_ns is not None:
        first = np.asarray(first_token_ns, np.int64)
        idx = percentile_index(n, settings.target_latency_percentile)
        ttft_p99 = int(np.partition(first, idx)[idx])
        if settings.ttft_limit_ns is not None:
            over = int(np.count_nonzero(first > settings.ttft_limit_ns))
            ttft_over = Count(over, over)
        if tokens is not None:
            tpot = tpot_per_sample(lat, first, tokens)
            tpot_p99 = int(np.partition(tpot, idx)[idx])
            if settings.tpot_limit_ns is not None:
                over = int(np.count_nonzero(tpot > settings.tpot_limit_ns))
                tpot_over = Count(over, over)
    return FinalFigures(
        queries, n, tokens_per_s, samples_per_s, basis, ttft_p99, tpot_p99, ttft_over, tpot_over
    )


# The percentiles a detail log states (results.cc lines 792-808): key pattern and fraction.
_PERCENTILES = (0.5, 0.9, 0.95, 0.97, 0.99, 0.999)


def over_count_bounds(n: int, percentiles: Mapping[float, float], limit_ns: float) -> Count:
    """Bounds on how many of ``n`` samples exceed ``limit_ns``, from percentiles (``sorted[int(n*q)]``).

    ``sorted[i] > limit`` means at least ``n - i`` exceed it; ``sorted[i] <= limit`` at most ``n - i - 1``.
    A min above the limit means all do; a max at or below it, none. ``percentiles`` maps q (0 = min, 1 = max).
    """
    low, high = 0, n
    for q, value in percentiles.items():
        i = 0 if q <= 0 else n - 1 if q >= 1 else percentile_index(n, q)
        if value > limit_ns:
            low = max(low, n - i)
        else:
            high = min(high, n - i - 1)
    return Count(low, max(high, low))


def figures_from_detail(settings: RunSettings, values: Mapping[str, Any]) -> FinalFigures:
    """LoadGen's figures as its detail log states them (``result_*`` keys); ValueError if absent."""
    try:
        queries = int(_number(values, "result_query_count"))
        per_query = int(values.get("generated_samples_per_query") or 1)
        samples = queries * per_query
        if settings.scenario == "Offline":
            basis = _number(values, "result_max_latency_ns") / 1e9
            samples_per_s = _number(values, "result_samples_per_second")
            tokens_per_s = values.get("result_tokens_per_second")
        else:
            basis = (samples - 1) / _number(values, "result_scheduled_samples_per_sec")
            samples_per_s = _number(values, "result_completed_samples_per_sec")
            tokens_per_s = values.get("result_completed_tokens_per_second")
    except KeyError as exc:
        raise ValueError(f"the detail log lacks {exc.args[0]}") from None
    ttft_p99 = values.get("result_first_token_99.00_percentile_latency_ns")
    tpot_p99 = values.get("result_time_per_output_token_99.00_percentile_ns")
    ttft_over = tpot_over = None
    if settings.scenario == "Server":
        if settings.ttft_limit_ns is not None:
            ttft = _stated(
                values,
                "result_first_token_{}_percentile_latency_ns",
                "result_first_token_min_latency_ns",
                "result_first_token_max_latency_ns",
            )
            ttft_over = over_count_bounds(samples, ttft, settings.ttft_limit_ns) if ttft else None
        if settings.tpot_limit_ns is not None:
            tpot = _stated(
                values,
                "result_time_per_output_token_{}_percentile_ns",
                "result_time_to_output_token_min",
                "result_time_to_output_token_max",
            )
            tpot_over = over_count_bounds(samples, tpot, settings.tpot_limit_ns) if tpot else None
    return FinalFigures(
        queries,
        samples,
        float(tokens_per_s) if isinstance(tokens_per_s, int | float) else None,
        samples_per_s,
        basis,
        int(ttft_p99) if isinstance(ttft_p99, int | float) else None,
        int(tpot_p99) if isinstance(tpot_p99, int | float) else None,
        ttft_over,
        tpot_over,
    )


def _stated(values: Mapping[str, Any], pattern: str, min_key: str, max_key: str) -> dict[float, float]:
    found: dict[float, float] = {}
    for q in _PERCENTILES:
        value = values.get(pattern.format(f"{q * 100:.2f}"))
        if isinstance(value, int | float) and not isinstance(value, bool):
            found[q] = float(value)
    for q, key in ((0.0, min_key), (1.0, max_key)):
        value = values.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool):
            found[q] = float(value)
    return found
