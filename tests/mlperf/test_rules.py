"""The rules as data: benchmark names as real runs spell them, limits, seeds and sample counts checked
against what real LoadGen runs logged."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from tokenwatch.mlperf.rules import (
    BENCHMARKS,
    MIN_DURATION_S,
    Seeds,
    latency_limits,
    normalize_benchmark,
    normalize_scenario,
    offline_samples_issued,
    seeds_round,
    server_queries_expected,
)
from tokenwatch.sources.loadgen_detail import read_detail

LOADGEN = Path(__file__).resolve().parent.parent / "data" / "sources" / "loadgen"


@pytest.mark.parametrize(
    ("spelling", "benchmark", "interactive"),
    [
        # submission folders of the v5.1 results (realdata2 SOURCES.md) and the checker's names
        ("llama2-70b-99", "llama2-70b-99", False),
        ("llama2-70b-99.9", "llama2-70b-99.9", False),
        ("llama3_1-405b", "llama3.1-405b", False),
        ("llama3.1-405b", "llama3.1-405b", False),
        ("llama3.1-8b", "llama3.1-8b", False),
        ("llama3.1-8b-edge", "llama3.1-8b-edge", False),
        ("deepseek-r1", "deepseek-r1", False),
        ("mixtral-8x7b", "mixtral-8x7b", False),
        # mlperf.conf's model names
        ("llama2-70b", "llama2-70b-99", False),
        ("llama3_1-8b-edge", "llama3.1-8b-edge", False),
        ("llama2-70b-interactive", "llama2-70b-99", True),
        ("llama3_1-405b-interactive", "llama3.1-405b", True),
        ("deepseek-r1-interactive", "deepseek-r1", True),
        # the v5.0 checker's separate interactive models; odd case and spaces
        ("llama2-70b-interactive-99.9", "llama2-70b-99.9", True),
        (" Llama3_1-8B ", "llama3.1-8b", False),
    ],
)
def test_benchmark_names_as_real_runs_spell_them(spelling: str, benchmark: str, interactive: bool) -> None:
    ref = normalize_benchmark(spelling)
    assert ref is not None
    assert (ref.benchmark.name, ref.interactive) == (benchmark, interactive)


@pytest.mark.parametrize(
    "spelling",
    ["llama3_1-70b-fp8_dyn", "mixtral-8x7b-interactive", "llama3.1-8b-edge-interactive", "gptj-99", ""],
)
def test_unknown_benchmarks_are_not_guessed(spelling: str) -> None:
    assert normalize_benchmark(spelling) is None


def test_scenarios() -> None:
    assert normalize_scenario("server") == "Server"
    assert normalize_scenario("Interactive") == "Interactive"
    assert normalize_scenario("single-stream") == "SingleStream"
    assert normalize_scenario("batch") is None


def test_the_issue_latency_limits() -> None:
    expected = {  # the issue's list (seconds), each verified against mlperf.conf and the checker
        "llama2-70b-99": ((2.0, 0.2), (0.45, 0.04)),
        "llama3.1-405b": ((6.0, 0.175), (4.5, 0.08)),
        "llama3.1-8b": ((2.0, 0.1), (0.5, 0.03)),
        "deepseek-r1": ((2.0, 0.08), (1.5, 0.015)),
        "mixtral-8x7b": ((2.0, 0.2), None),
    }
    for name, (server, interactive) in expected.items():
        b = BENCHMARKS[name]
        assert b.server is not None
        assert (b.server.ttft_s, b.server.tpot_s) == pytest.approx(server)
        if interactive is None:
            assert b.interactive is None
        else:
            assert b.interactive is not None
            assert (b.interactive.ttft_s, b.interactive.tpot_s) == pytest.approx(interactive)
    assert MIN_DURATION_S == 600.0
    assert BENCHMARKS["llama2-70b-99"].offline_min_samples == 24_576


def _param(summary: str, key: str) -> int:
    match = re.search(rf"^{re.escape(key)}\s*:\s*(\d+)$", summary, re.M)
    assert match, key
    return int(match.group(1))


@pytest.mark.parametrize(
    ("folder", "name", "scenario"),
    [
        ("lenovo-8xb200-llama2-999-server-run1", "llama2-70b-99.9", "Server"),
        ("hpe-8xh200-llama2-99-interactive", "llama2-70b-99", "Interactive"),
    ],
)
def test_limits_equal_what_real_runs_were_configured_with(folder: str, name: str, scenario: str) -> None:
    summary = (LOADGEN / folder / "mlperf_log_summary.txt").read_text()
    ref = normalize_benchmark(name)
    assert ref is not None
    limits = latency_limits(ref, scenario)
    assert limits is not None
    assert _param(summary, "ttft_latency (ns)") == round(limits.ttft_s * 1e9)
    assert _param(summary, "tpot_latency (ns)") == round(limits.tpot_s * 1e9)
    seeds = Seeds(
        *(_param(summary, k) for k in ("qsl_rng_seed", "sample_index_rng_seed", "schedule_rng_seed"))
    )
    assert seeds_round(seeds) == "v5.1"  # these are v5.1 submissions


def test_unofficial_seeds_have_no_round() -> None:
    assert seeds_round(Seeds(0, 0, 0)) is None


def test_offline_issue_rule_reproduces_a_real_run() -> None:
    """Cisco 16xH200 llama3.1-405b: min_query_count 8313, 600 s, 1.8 QPS -> max(8313, 1188) = 8313 samples."""
    log = read_detail(LOADGEN / "cisco-16xh200-llama31-405b-offline" / "mlperf_log_detail.txt")
    v = log.values
    issued = offline_samples_issued(
        v["requested_min_query_count"],
        v["requested_min_duration_ms"] / 1000,
        v["requested_offline_expected_qps"],
        v["effective_performance_sample_count"],
    )
    assert issued == v["generated_samples_per_query"] == v["effective_samples_per_query"]
    ref = normalize_benchmark("llama3_1-405b")
    assert ref is not None
    assert v["effective_performance_sample_count"] == ref.benchmark.performance_sample_count


def test_offline_issue_rule_pads_and_takes_the_larger() -> None:
    # 1.1 x 600 s x 50 QPS = 33,000 > 24,576, padded to a multiple of the 24,576 loaded samples
    assert offline_samples_issued(24_576, 600, 50.0, 24_576) == 2 * 24_576
    assert offline_samples_issued(24_576, 600, 10.0) == 24_576
    assert offline_samples_issued(1, 1.5, 250.0) == 412  # int(412.5), no padding


def test_server_query_count_of_a_real_run() -> None:
    """Lenovo 8xB200: 364 QPS x 2,400 s = 873,600, padded to 36 x 24,576 = 884,736 = generated_query_count."""
    log = read_detail(LOADGEN / "lenovo-8xb200-llama2-999-server-ranging" / "mlperf_log_detail.txt")
    v = log.values
    expected = server_queries_expected(
        v["effective_target_qps"],
        v["effective_min_duration_ms"] / 1000,
        v["effective_min_query_count"],
        v["effective_performance_sample_count"],
    )
    assert expected == v["generated_query_count"] == 884_736


def _settings(folder: str) -> dict[str, Any]:
    return read_detail(LOADGEN / folder / "mlperf_log_detail.txt").values


def test_start_of_run_check_passes_real_submitted_runs() -> None:
    from tokenwatch.mlperf.settings_check import check_settings

    ref = normalize_benchmark("llama2-70b-99.9")
    assert ref is not None
    checks = {
        c.name: c for c in check_settings(ref, "Server", _settings("lenovo-8xb200-llama2-999-server-ranging"))
    }
    assert all(c.ok for c in checks.values()), checks
    assert checks["seeds"].value == "v5.1"
    assert checks["ttft_limit"].value == 2_000_000_000
    cisco = normalize_benchmark("llama3_1-405b")
    assert cisco is not None
    offline = check_settings(cisco, "Offline", _settings("cisco-16xh200-llama31-405b-offline"))
    assert [c.ok for c in offline] == [True, True, True, True]


def test_start_of_run_check_flags_what_the_checker_would_refuse() -> None:
    from tokenwatch.mlperf.settings_check import check_settings

    # Krai's TEST06 run: min_duration 0 ms (a compliance run, not a performance submission)
    ref = normalize_benchmark("llama3.1-8b")
    assert ref is not None
    checks = {
        c.name: c for c in check_settings(ref, "Server", _settings("krai-8xh200-llama31-70b-server-test06"))
    }
    assert checks["min_duration"].ok is False
    assert "600000 ms" in checks["min_duration"].fix
    # llama3.1-8b's Server TPOT limit is 100 ms; that run used 200 ms (a llama3.1-70b setting)
    assert checks["tpot_limit"].ok is False
    assert checks["ttft_limit"].ok is True
    interactive = {
        c.name: c for c in check_settings(ref, "Interactive", {"requested_server_ttft_latency": 500_000_000})
    }
    assert interactive["ttft_limit"].ok is True
    assert interactive["tpot_limit"].ok is None  # not stated: not judged
    assert interactive["seeds"].ok is None
    mixtral = normalize_benchmark("mixtral-8x7b")
    assert mixtral is not None
    assert check_settings(mixtral, "Interactive", {})[2].fix == "mixtral-8x7b has no Interactive scenario"
