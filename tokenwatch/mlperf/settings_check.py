"""The start-of-run check: a LoadGen run's settings against the rules of its benchmark and scenario.

Made as soon as the detail log's settings appear (``requested_*`` / ``effective_*``, written before the
first query), so a run that cannot be submitted says so at t = 0, with the fix in words, instead of after
80 minutes. What the submission checker would refuse (mlcommons/inference @ b66003e10e2d,
``tools/submission/submission_checker/checks/performance_check.py``): a minimum duration under 600 s
(``min_duration_check``), Offline samples under the benchmark's minimum (``min_query_count_check``), LLM
runs without token latencies or over the TTFT/TPOT limits (``llm_check``), seeds other than the round's
(``seeds_check``). The latency limits configured must also be the benchmark's, or LoadGen itself judges
the run by the wrong ones.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tokenwatch.mlperf.rules import (
    MIN_DURATION_S,
    BenchmarkRef,
    Seeds,
    latency_limits,
    seeds_round,
)


@dataclass(frozen=True, slots=True)
class SettingCheck:
    """One setting against the rules: ``ok`` None when the log does not state it (``fix`` says so)."""

    name: str
    value: object
    expected: object
    ok: bool | None
    fix: str = ""


def _int(values: Mapping[str, Any], key: str) -> int | None:
    value = values.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def check_settings(
    ref: BenchmarkRef | None, scenario: str, values: Mapping[str, Any]
) -> tuple[SettingCheck, ...]:
    """``values``: a detail log's records (key -> value). ``scenario``: Offline, Server or Interactive.

    Without a benchmark (``ref`` None) the rules that depend on it (Offline sample minimum, latency
    limits) are undecided and say so; the others are checked all the same."""
    checks: list[SettingCheck] = []
    duration_ms = _int(values, "effective_min_duration_ms")
    need_ms = int(MIN_DURATION_S * 1000)
    checks.append(
        SettingCheck(
            "min_duration",
            duration_ms,
            need_ms,
            None if duration_ms is None else duration_ms >= need_ms,
            f"set min_duration to at least {need_ms} ms (*.{_conf_scenario(scenario)}.min_duration)",
        )
    )
    tokens = values.get("requested_use_token_latencies")
    checks.append(
        SettingCheck(
            "use_token_latencies",
            tokens,
            True,
            None if tokens is None else tokens is True,
            "enable use_token_latencies (mlperf.conf sets it for every LLM benchmark)",
        )
    )
    if ref is None:
        checks.append(
            SettingCheck(
                "offline_samples" if scenario == "Offline" else "latency_limits",
                None,
                None,
                None,
                "name the benchmark (--benchmark, run.benchmark) to check it against its rules",
            )
        )
    elif scenario == "Offline":
        samples = _int(values, "effective_samples_per_query")
        need = ref.benchmark.offline_min_samples
        checks.append(
            SettingCheck(
                "offline_samples",
                samples,
                need,
                None if samples is None or need is None else samples >= need,
                f"keep min_query_count at {need} (mlperf.conf) and raise offline expected QPS if need be",
            )
        )
    else:
        checks += _latency_settings(ref, scenario, values)
    seeds = [
        _int(values, f"effective_{k}") for k in ("qsl_rng_seed", "sample_index_rng_seed", "schedule_rng_seed")
    ]
    found = None if None in seeds else seeds_round(Seeds(*seeds))  # type: ignore[arg-type]
    checks.append(
        SettingCheck(
            "seeds",
            found or tuple(seeds),
            "a submission round's seeds",
            None if None in seeds else found is not None,
            "use the mlperf.conf of the round you submit to (its *.*.*_rng_seed lines)",
        )
    )
    return tuple(checks)


def _conf_scenario(scenario: str) -> str:
    return "Server" if scenario == "Interactive" else scenario


def _latency_settings(ref: BenchmarkRef, scenario: str, values: Mapping[str, Any]) -> list[SettingCheck]:
    limits = latency_limits(ref, scenario)
    if limits is None:
        return [
            SettingCheck(
                "latency_limits", None, None, False, f"{ref.benchmark.name} has no {scenario} scenario"
            )
        ]
    out = []
    for name, key, limit_s in (
        ("ttft_limit", "requested_server_ttft_latency", limits.ttft_s),
        ("tpot_limit", "requested_server_tpot_latency", limits.tpot_s),
    ):
        value = _int(values, key)
        expected = round(limit_s * 1e9)
        out.append(
            SettingCheck(
                name,
                value,
                expected,
                None if value is None else value == expected,
                f"{name[:4].upper()} limit must be {limit_s * 1000:g} ms for {ref.benchmark.name} {scenario} "
                "(do not override ttft_latency/tpot_latency in user.conf)",
            )
        )
    return out
