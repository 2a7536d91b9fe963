"""mlperf_log_detail.txt (:::MLLOG lines) from real submissions and a real LoadGen 6.0.17 run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tokenwatch.base.events import Notice
from tokenwatch.sources.errors import SourceFormatError
from tokenwatch.sources.loadgen_detail import DetailLogParser, parse_detail_bytes, read_detail
from tokenwatch.sources.loadgen_summary import read_summary

from .conftest import LOADGEN, feed_in_chunks

ASUSTEK = LOADGEN / "asustek-8xmi325x-offline"
# SOURCES.md A.1: lines, result_tokens_per_second, warnings, CAS-fail count per detail log.
DETAILS = {0: (93, 4103.7, 2, 0), 3: (92, 4212.49, 1, 0), 4: (94, 4119.21, 3, 4), 7: (94, 4187.86, 3, 4)}


def _independent_records(path: Path) -> list[dict[str, Any]]:
    """The records read with nothing but the standard library, to compare against."""
    records = []
    for line in path.read_text().splitlines():
        assert line.startswith(":::MLLOG ")
        records.append(json.loads(line[len(":::MLLOG ") :]))
    return records


@pytest.mark.parametrize("gpu", sorted(DETAILS))
def test_real_detail_logs(gpu: int) -> None:
    folder = ASUSTEK / f"llama2-70b_offline_performance_run_1_gpu_{gpu}"
    detail = read_detail(folder / "mlperf_log_detail.txt")
    lines, tokens, warnings, cas_fails = DETAILS[gpu]
    reference = _independent_records(folder / "mlperf_log_detail.txt")
    assert detail.records == len(reference) == lines
    assert detail.skipped == []
    assert detail.loadgen_version == "5.0.21 @ 0910c6e300"
    assert detail.scenario == "Offline"
    assert detail.valid is True
    assert detail.tokens_per_s == tokens
    assert len(detail.warnings) == warnings
    assert [w.value for w in detail.warnings] == [
        r["value"] for r in reference if r["metadata"]["is_warning"]
    ]
    assert detail.errors == []
    assert detail.values["logger_tls_total_log_cas_fail_count"] == cas_fails
    # Integers above 2**63 stay exact.
    assert detail.values["effective_sample_index_rng_seed"] == 14771362308971278857
    assert detail.effective["samples_per_query"] == 3000
    assert sorted(detail.values["loaded_qsl_set"]) == list(range(3000))
    assert detail.samples_completed == 3000
    # The detail log agrees with its summary on every result figure.
    summary = read_summary(folder / "mlperf_log_summary.txt")
    assert detail.samples_per_s == summary.samples_per_s
    assert detail.results["result_99.00_percentile_latency_ns"] == summary.latency_ns["e2e"]["p99"]
    assert len(detail.warnings) == summary.warning_count
    # Duration from LoadGen's power_begin/power_end stamps: about one query's latency.
    assert detail.duration_s() == pytest.approx(summary.latency_ns["e2e"]["max"] / 1e9, abs=1.0)


def test_loadgen_6_server_detail() -> None:
    detail = read_detail(LOADGEN / "generated" / "server-short" / "mlperf_log_detail.txt")
    summary = read_summary(LOADGEN / "generated" / "server-short" / "mlperf_log_summary.txt")
    assert detail.loadgen_version is not None
    assert detail.loadgen_version.startswith("6.0.17")
    assert detail.scenario == "Server"
    assert detail.valid is False
    assert summary.valid is False
    assert detail.tokens_per_s == pytest.approx(summary.tokens_per_s, rel=1e-4)
    assert detail.samples_completed == 80
    assert (
        detail.results["result_first_token_99.00_percentile_latency_ns"] == summary.latency_ns["ttft"]["p99"]
    )


def test_bad_lines_are_skipped_with_file_and_line() -> None:
    good = (ASUSTEK / "llama2-70b_offline_performance_run_1_gpu_3" / "mlperf_log_detail.txt").read_bytes()
    lines = good.split(b"\n")
    lines[5] = b":::MLLOG {broken"
    lines[7] = b"random text"
    log = parse_detail_bytes(b"\n".join(lines), "d.txt")
    assert log.skipped == [
        "d.txt:6: skipped: bad JSON after :::MLLOG",
        "d.txt:8: skipped: not a :::MLLOG record",
    ]
    assert log.records == 90
    assert log.valid is True


def test_not_a_detail_log(tmp_path: Path) -> None:
    path = tmp_path / "mlperf_log_detail.txt"
    path.write_text("hello\nworld\n")
    with pytest.raises(SourceFormatError, match="no :::MLLOG records"):
        read_detail(path)


def test_streaming_parser_reports_loadgen_warnings_and_result() -> None:
    data = (ASUSTEK / "llama2-70b_offline_performance_run_1_gpu_4" / "mlperf_log_detail.txt").read_bytes()
    parser = DetailLogParser("gpu4")
    events = feed_in_chunks(lambda chunk: parser.feed(chunk, 1.0), data, 997)
    events += parser.close(2.0)
    notices = [e for e in events if isinstance(e, Notice)]
    assert [n.message for n in notices if n.level == "warning"] == [
        "LoadGen warning: CAS failed.",
        "LoadGen warning: CAS failed.",
        "LoadGen warning: Logging allocation detected: tid: 4159 reserved_entries: 1024 max_entries: 2659",
    ]
    assert notices[-1].level == "info"
    assert notices[-1].message == "LoadGen result VALID"
    assert parser.log.records == 94
    assert parser.log.tokens_per_s == 4119.21
