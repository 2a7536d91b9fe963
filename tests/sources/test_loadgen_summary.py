"""mlperf_log_summary.txt from real submissions and real LoadGen runs."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from tokenwatch.sources.errors import SourceFormatError
from tokenwatch.sources.loadgen_summary import parse_summary_text, percentile_key, read_summary

from .conftest import LOADGEN

ASUSTEK = LOADGEN / "asustek-8xmi325x-offline"

# Per-GPU figures as tabulated in realdata/SOURCES.md (section A), read there by hand.
ASUSTEK_TABLE = {
    0: (4103.7, 15.76, 2),
    1: (4163.89, 15.9912, 1),
    2: (4089.58, 15.7058, 1),
    3: (4212.49, 16.1778, 1),
    4: (4119.21, 15.8196, 3),
    5: (4204.21, 16.146, 1),
    6: (4157.72, 15.9675, 1),
    7: (4187.86, 16.0832, 3),
}


@pytest.mark.parametrize("gpu", sorted(ASUSTEK_TABLE))
def test_real_offline_per_gpu_summaries(gpu: int) -> None:
    summary = read_summary(
        ASUSTEK / f"llama2-70b_offline_performance_run_1_gpu_{gpu}" / "mlperf_log_summary.txt"
    )
    tokens, samples, warnings = ASUSTEK_TABLE[gpu]
    assert summary.scenario == "Offline"
    assert summary.mode == "PerformanceOnly"
    assert summary.sut_name == "PySUT"
    assert summary.valid
    assert summary.result == "VALID"
    assert summary.tokens_per_s == tokens
    assert summary.samples_per_s == samples
    assert summary.warning_count == warnings
    assert summary.error_count == 0
    assert summary.constraints == {
        "Min duration satisfied": True,
        "Min queries satisfied": True,
        "Early stopping satisfied": True,
    }
    assert summary.test_parameters["samples_per_query"] == "3000"
    # The seed above 2**63 stays text, exact.
    assert summary.test_parameters["sample_index_rng_seed"] == "14771362308971278857"
    assert set(summary.latency_ns) == {"e2e"}  # Offline prints no TTFT/TPOT block
    assert summary.skipped == []
    # Offline duration: the one query of 3000 samples over samples/s (~190 s, as the latencies say).
    assert summary.duration_s() == pytest.approx(3000 / samples)
    assert 185 < summary.latency_ns["e2e"]["p99"] / 1e9 < 192


def test_real_offline_latency_block_gpu3() -> None:
    summary = read_summary(ASUSTEK / "llama2-70b_offline_performance_run_1_gpu_3" / "mlperf_log_summary.txt")
    e2e = summary.latency_ns["e2e"]
    assert e2e["p99"] == 185438999428  # SOURCES.md: p99 of gpu_3
    assert sorted(e2e) == sorted(["min", "max", "mean", "p50", "p90", "p95", "p97", "p99", "p99.9"])
    assert summary.latency_ms()["e2e"]["p99"] == pytest.approx(185438.999428)


@pytest.mark.parametrize(
    ("folder", "tokens", "samples", "ttft_p99_ns", "tpot_p99_ns"),
    [
        ("amd-8xmi325x-server", 30724.51, 103.83, 1936541021, 199404544),
        ("nvidia-gb200-server", 49359.61, 178.48, 405591662, 129867240),
    ],
)
def test_real_server_summaries(
    folder: str, tokens: float, samples: float, ttft_p99_ns: int, tpot_p99_ns: int
) -> None:
    summary = read_summary(LOADGEN / folder / "mlperf_log_summary.txt")
    assert summary.scenario == "Server"
    assert summary.valid
    assert summary.tokens_per_s == tokens
    assert summary.samples_per_s == samples
    assert summary.constraints["Performance constraints satisfied"] is True
    assert summary.latency_ns["ttft"]["p99"] == ttft_p99_ns
    assert summary.latency_ns["tpot"]["p99"] == tpot_p99_ns
    assert set(summary.latency_ns["tpot"]) >= {"min", "max", "mean", "p50", "p99.9"}
    assert summary.notes[:2] == ["TTFT Early Stopping Result:", "* Run successful."]
    assert math.isnan(summary.duration_s())  # Server summaries carry no duration


def test_real_offline_mean_below_min_quirk_is_kept() -> None:
    # SOURCES.md: LoadGen printed a Mean latency below the Min in this file; we report, not "fix".
    summary = read_summary(LOADGEN / "amd-8xmi325x-offline" / "mlperf_log_summary.txt")
    assert summary.latency_ns["e2e"]["mean"] < summary.latency_ns["e2e"]["min"]
    assert summary.tokens_per_s == 33928.1


def test_loadgen_6_invalid_server_summary() -> None:
    summary = read_summary(LOADGEN / "generated" / "server-short" / "mlperf_log_summary.txt")
    assert summary.result == "INVALID"
    assert not summary.valid
    assert summary.unmet_constraints == ["Early stopping satisfied"]
    assert "Recommendations:" in summary.notes
    # LoadGen 6.0 spells the TPOT min/max/mean "Time per Output Token": same block.
    assert {"min", "max", "mean", "p99"} <= set(summary.latency_ns["tpot"])


@pytest.mark.parametrize(
    ("text", "key"), [("50.00", "p50"), ("99.90", "p99.9"), ("97.00", "p97"), ("90", "p90")]
)
def test_percentile_keys(text: str, key: str) -> None:
    assert percentile_key(text) == key


def test_bad_number_line_is_skipped_with_file_and_line() -> None:
    text = (ASUSTEK / "llama2-70b_offline_performance_run_1_gpu_0" / "mlperf_log_summary.txt").read_text()
    broken = text.replace("Max latency (ns)                : 190355226046", "Max latency (ns) : 1e999")
    summary = parse_summary_text(broken, "x/mlperf_log_summary.txt")
    assert summary.skipped == ["x/mlperf_log_summary.txt:18: skipped: '1e999' is not a non-negative number"]
    assert "max" not in summary.latency_ns["e2e"]
    assert summary.tokens_per_s == 4103.7


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda t: t.replace("Scenario : Offline\n", ""), "no 'Scenario :' line"),
        (lambda t: t.split("Result is")[0], "no 'Result is :' line"),
        (
            lambda t: t.replace("Samples per second: 15.76\nTokens per second: 4103.7\n", ""),
            "samples or tokens",
        ),
        (lambda _t: "", "holds no LoadGen summary"),
    ],
)
def test_unusable_summary_is_one_line_error(tmp_path: Path, mutate, message: str) -> None:
    text = (ASUSTEK / "llama2-70b_offline_performance_run_1_gpu_0" / "mlperf_log_summary.txt").read_text()
    path = tmp_path / "mlperf_log_summary.txt"
    path.write_text(mutate(text))
    with pytest.raises(SourceFormatError, match=message) as info:
        read_summary(path)
    assert str(path) in str(info.value)
    assert "\n" not in str(info.value)


def test_binary_and_missing_files(tmp_path: Path) -> None:
    binary = tmp_path / "b.txt"
    binary.write_bytes(b"\x00\x01\x02" * 10)
    with pytest.raises(SourceFormatError, match="binary"):
        read_summary(binary)
    with pytest.raises(SourceFormatError, match="cannot read"):
        read_summary(tmp_path / "missing.txt")
