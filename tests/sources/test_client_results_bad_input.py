"""Bad input in the client benchmarks' result files: garbage lines, truncated JSON, NaN / Infinity, missing
fields, unknown versions and units. Each is a warning naming the file (and line) and key, or one line and exit
status 2 for a file that holds no result; an unusable figure is unknown, never a traceback or a guessed 0."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import RunCli
from tokenwatch.sources.client_results import read_client_results
from tokenwatch.sources.errors import SourceFormatError

from .test_client_results import AIPERF, GENAI_PERF, SGLANG, SLICES, VLLM


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def edited(path: Path, **changes: Any) -> str:
    document = json.loads(path.read_text())
    for key, value in changes.items():
        if value is KeyError:
            del document[key]
        else:
            document[key] = value
    return json.dumps(document)


def test_garbage_and_cut_off_lines_of_a_jsonl_are_skipped_by_line(tmp_path: Path) -> None:
    good = SGLANG.read_text().strip()
    text = "\n".join(["not json at all", good, '{"completed": 3}', good[: len(good) // 2]]) + "\n"
    path = write(tmp_path, "runs.jsonl", text)
    results, warnings = read_client_results(path)
    assert len(results) == 1
    assert results[0].output_tokens == 9600
    assert [w.split(": ")[0] for w in warnings] == [f"{path}:1", f"{path}:3", f"{path}:4"]
    assert "not a JSON object" in warnings[0]
    assert "not a benchmark result" in warnings[1]


def test_a_truncated_export_is_one_line_and_exit_status_2(tmp_path: Path, run_cli: RunCli) -> None:
    text = AIPERF.read_text()
    path = write(tmp_path, "profile_export_aiperf.json", text[: len(text) // 3])
    with pytest.raises(SourceFormatError, match="not a benchmark result"):
        read_client_results(path)
    done = run_cli("summarize", str(path))
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert str(path) in line
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -5.0, "fast", None, True, 10**400])
def test_an_unusable_rate_is_unknown_with_a_warning(tmp_path: Path, value: object) -> None:
    path = write(tmp_path, "bench.json", edited(VLLM, output_throughput=value))
    (result,), warnings = read_client_results(path)
    assert math.isnan(result.output_tokens_per_s)
    assert result.output_tokens == 9600  # the rest of the file still reads
    (warning,) = warnings
    assert warning.startswith(f"{path}: output_throughput: ")


def test_missing_fields_are_unknown_and_named(tmp_path: Path) -> None:
    path = write(tmp_path, "bench.json", edited(VLLM, total_output_tokens=KeyError, completed=KeyError))
    (result,), warnings = read_client_results(path)
    assert math.isnan(result.output_tokens)
    assert math.isnan(result.requests)
    assert sorted(warnings) == [
        f"{path}: completed: not stated: unknown",
        f"{path}: total_output_tokens: not stated: unknown",
    ]


def test_an_unknown_aiperf_schema_is_said_and_read_by_the_known_names(tmp_path: Path) -> None:
    path = write(tmp_path, "export.json", edited(AIPERF, schema_version="2.0"))
    (result,), warnings = read_client_results(path)
    (warning,) = warnings
    assert warning.startswith(f"{path}: schema_version '2.0' is not one this reader knows (1.x)")
    assert result.output_tokens == 9600


def test_an_unknown_unit_or_a_record_that_is_no_record_is_unknown(tmp_path: Path) -> None:
    document = json.loads(AIPERF.read_text())
    document["time_to_first_token"]["unit"] = "fortnights"
    document["request_throughput"] = "many"
    path = write(tmp_path, "export.json", json.dumps(document))
    (result,), warnings = read_client_results(path)
    assert "ttft" not in result.latency_ms
    assert math.isnan(result.requests_per_s)
    assert sum("time_to_first_token: unit 'fortnights'" in w for w in warnings) == 1  # once, not per stat
    assert any("request_throughput: 'many' is not a metric record" in w for w in warnings)


def test_a_slice_without_its_totals_makes_the_runs_totals_unknown(tmp_path: Path) -> None:
    document = json.loads(SLICES.read_text())
    del document["timeslices"][2]["total_output_tokens"]
    document["timeslices"][3] = "garbage"
    path = write(tmp_path, "slices.json", json.dumps(document))
    (result,), warnings = read_client_results(path)
    assert math.isnan(result.output_tokens)
    assert math.isnan(result.output_tokens_per_s)
    assert any(w.startswith(f"{path}: slice 3: total_output_tokens") for w in warnings)
    assert any(w.startswith(f"{path}: slice 4: ") for w in warnings)


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("[1, 2]", "a JSON list"),
        ('{"hello": 1}', "not a result of AIPerf"),
        ("", "not a benchmark result"),
    ],
)
def test_a_file_with_no_result_is_one_line(tmp_path: Path, text: str, why: str) -> None:
    path = write(tmp_path, "x.json", text)
    with pytest.raises(SourceFormatError, match=why):
        read_client_results(path)


def test_a_file_that_is_not_utf8_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "x.json"
    path.write_bytes(b'{"output_throughput": \xff}')
    with pytest.raises(SourceFormatError, match="not UTF-8"):
        read_client_results(path)


REAL = [
    AIPERF.read_bytes(),
    SLICES.read_bytes(),
    VLLM.read_bytes(),
    SGLANG.read_bytes(),
    GENAI_PERF.read_bytes(),
]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    source=st.sampled_from(REAL),
    cut=st.floats(0.0, 1.0),
    noise=st.binary(max_size=64),
    at=st.floats(0.0, 1.0),
)
def test_any_damage_is_a_result_warnings_or_one_error(
    tmp_path: Path, source: bytes, cut: float, noise: bytes, at: float
) -> None:
    """Random truncation and random bytes spliced into a real file: the reader returns results (each figure
    finite or NaN) or raises its one error type; nothing else."""
    damaged = source[: int(len(source) * cut)]
    position = int(len(damaged) * at)
    data = damaged[:position] + noise + damaged[position:]
    path = tmp_path / "damaged.json"
    path.write_bytes(data)
    failure: SourceFormatError | None = None
    try:
        results, warnings = read_client_results(path)
    except SourceFormatError as exc:
        failure, results, warnings = exc, [], []
    if failure is not None:
        assert str(path) in str(failure)
        assert "\n" not in str(failure)
    for result in results:
        for value in (result.output_tokens_per_s, result.duration_s, result.output_tokens, result.requests):
            assert math.isnan(value) or (math.isfinite(value) and value >= 0)
    assert all(isinstance(w, str) and str(path) in w for w in warnings)


def test_aiperfs_csv_export_points_to_its_json(tmp_path: Path, run_cli: RunCli) -> None:
    """AIPerf's CSV export holds the JSON's figures rounded: one line naming the JSON to give instead."""
    path = write(
        tmp_path, "profile_export_aiperf.csv", "Metric,avg,min,max\nBenchmark Duration (sec),19.88\n"
    )
    done = run_cli("summarize", str(path))
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert "give the JSON export beside it (profile_export_aiperf.json" in line
