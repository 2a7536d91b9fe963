"""``tokenwatch summarize DIR...`` on real LoadGen result folders."""

from __future__ import annotations

import json
import math
import shutil
import statistics
from pathlib import Path

import pytest

from tokenwatch.frontends.headless.summary_table import render_summary
from tokenwatch.runs.errors import RunLoadError
from tokenwatch.runs.result_folders import find_summary_folders, summarize_result_dirs
from tokenwatch.sources.errors import SourceFormatError

from .conftest import LOADGEN

ASUSTEK = LOADGEN / "asustek-8xmi325x-offline"
# realdata/SOURCES.md section A: the 8 per-GPU tokens/s and their sum.
ASUSTEK_TPS = [4103.7, 4163.89, 4089.58, 4212.49, 4119.21, 4204.21, 4157.72, 4187.86]


def test_asustek_set_in_the_published_form() -> None:
    summary, stderr_warnings = summarize_result_dirs([ASUSTEK], gpus_per_node=1)  # ASUSTeK ran per GPU
    assert stderr_warnings == []
    assert summary.scenario == "Offline"
    assert [n.name for n in summary.nodes] == [
        f"llama2-70b_offline_performance_run_1_gpu_{i}" for i in range(8)
    ]
    assert [n.tokens_per_s for n in summary.nodes] == ASUSTEK_TPS
    assert summary.tokens_per_s == pytest.approx(33238.66, abs=0.005)  # SOURCES.md's sum
    assert summary.spread.max == max(ASUSTEK_TPS)
    assert summary.spread.min == min(ASUSTEK_TPS)
    assert summary.spread.median == pytest.approx(statistics.median(ASUSTEK_TPS))
    assert summary.spread.mean == pytest.approx(statistics.mean(ASUSTEK_TPS))
    assert summary.gpus == 8
    assert summary.layout == "per-node"
    assert all(n.valid for n in summary.nodes)
    assert summary.warnings == ()
    # Four nodes have detail logs: their LoadGen version is reported; duration comes from them.
    versions = [n.extra.get("loadgen_version") for n in summary.nodes]
    assert versions.count("5.0.21 @ 0910c6e300") == 4
    assert 185 < summary.duration_s < 192
    node3 = summary.nodes[3].latency_ms["e2e"]
    assert node3["p99"] == pytest.approx(185438.999428)
    assert summary.latency_ms == {}  # node percentiles cannot be merged into a rack percentile


def test_without_a_gpu_count_the_gpus_are_unknown_never_one() -> None:
    summary, _ = summarize_result_dirs([ASUSTEK], gpus_per_node=None)
    assert summary.gpus is None
    assert math.isnan(summary.per_gpu_tokens_per_s)
    assert all(n.gpus is None for n in summary.nodes)
    assert summary.to_json()["aggregate"]["gpus"] is None
    assert any("--gpus-per-node" in w for w in summary.warnings)


def test_cli_json_and_table(run_cli) -> None:
    result = run_cli("summarize", str(ASUSTEK), "--json", "--gpus-per-node", "4")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["aggregate"]["tokens_per_s"] == pytest.approx(sum(ASUSTEK_TPS))
    assert data["aggregate"]["gpus"] == 32
    assert data["aggregate"]["per_gpu_tokens_per_s"] == pytest.approx(sum(ASUSTEK_TPS) / 32)
    assert data["node_spread"]["median"] == pytest.approx(statistics.median(ASUSTEK_TPS))
    assert [n["valid"] for n in data["nodes"]] == [True] * 8
    assert data["nodes"][0]["latency_ms"]["e2e"]["p50"] == pytest.approx(190343.670228)
    table = run_cli("summarize", str(ASUSTEK))
    assert table.returncode == 0
    assert "33,238.7" in table.stdout
    assert "Median single-node" in table.stdout


def test_single_server_node_latency_comes_from_its_summary() -> None:
    summary, _ = summarize_result_dirs([LOADGEN / "nvidia-gb200-server"], gpus_per_node=4)
    assert summary.scenario == "Server"
    assert summary.nodes[0].name == "nvidia-gb200-server"  # DIR itself holds the summary
    assert summary.latency_ms["ttft"] == pytest.approx(
        {"p50": 219.714879, "p90": 282.342045, "p99": 405.591662}
    )
    assert summary.latency_ms["tpot"]["p99"] == pytest.approx(129.86724)
    assert summary.per_gpu_tokens_per_s == pytest.approx(49359.61 / 4)


def test_invalid_run_is_flagged_not_passed_off(run_cli) -> None:
    result = run_cli("summarize", str(LOADGEN / "generated" / "server-short"), "--json")
    assert result.returncode == 0
    data = json.loads(result.stdout)
    assert data["nodes"][0]["valid"] is False
    assert data["nodes"][0]["invalid_reasons"] == ["Early stopping satisfied"]
    assert any("INVALID" in w and "server-short" in w for w in data["warnings"])
    table = run_cli("summarize", str(LOADGEN / "generated" / "server-short"))
    assert "Flagged node results (see the warnings): server-short" in table.stdout


def test_mixed_scenarios_are_an_error(run_cli) -> None:
    result = run_cli("summarize", str(LOADGEN / "generated"))
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1
    assert "mixed scenarios" in result.stderr
    assert "Offline" in result.stderr
    assert "Server" in result.stderr


def test_no_summaries_is_an_error(tmp_path: Path, run_cli) -> None:
    result = run_cli("summarize", str(tmp_path))
    assert result.returncode == 2
    assert result.stderr.startswith("tokenwatch summarize: no LoadGen result summary found under")


def test_corrupt_summary_is_one_line_error(tmp_path: Path, run_cli) -> None:
    node = tmp_path / "node01"
    node.mkdir()
    (node / "mlperf_log_summary.txt").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)))
    result = run_cli("summarize", str(tmp_path))
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1
    assert "node01/mlperf_log_summary.txt" in result.stderr


def test_accuracy_runs_are_left_out(tmp_path: Path) -> None:
    shutil.copytree(ASUSTEK / "llama2-70b_offline_performance_run_1_gpu_0", tmp_path / "performance")
    accuracy = tmp_path / "accuracy"
    accuracy.mkdir()
    text = (ASUSTEK / "llama2-70b_offline_performance_run_1_gpu_1" / "mlperf_log_summary.txt").read_text()
    (accuracy / "mlperf_log_summary.txt").write_text(text.replace("PerformanceOnly", "AccuracyOnly"))
    summary, _ = summarize_result_dirs([tmp_path], 1)
    assert [n.name for n in summary.nodes] == ["performance"]
    assert summary.warnings == ("accuracy: AccuracyOnly run left out (not a performance result)",)


def test_several_dirs_and_name_clashes(tmp_path: Path) -> None:
    for rack in ("rack1", "rack2"):
        shutil.copytree(ASUSTEK / "llama2-70b_offline_performance_run_1_gpu_0", tmp_path / rack / "node00")
    summary, _ = summarize_result_dirs([tmp_path / "rack1", tmp_path / "rack2"], None)
    # Named relative to the folders' common folder, never by this machine's absolute path
    assert [n.name for n in summary.nodes] == ["rack1/node00", "rack2/node00"]
    assert summary.tokens_per_s == pytest.approx(2 * 4103.7)
    assert find_summary_folders(tmp_path) == [tmp_path / "rack1" / "node00", tmp_path / "rack2" / "node00"]
    # Result folders given themselves, absolute: named from their common folder too
    summary, _ = summarize_result_dirs([tmp_path / "rack1" / "node00", tmp_path / "rack2" / "node00"], None)
    assert [n.name for n in summary.nodes] == ["rack1/node00", "rack2/node00"]
    assert str(tmp_path) not in render_summary(summary)
    assert not any(str(tmp_path) in w for w in summary.warnings)


def test_folders_that_overlap_read_each_result_once(tmp_path: Path) -> None:
    for node in ("node00", "node01"):
        shutil.copytree(ASUSTEK / "llama2-70b_offline_performance_run_1_gpu_0", tmp_path / "rack" / node)
    summary, _ = summarize_result_dirs([tmp_path / "rack", tmp_path / "rack" / "node01"], None)
    assert [n.name for n in summary.nodes] == ["node00", "node01"]  # node01 once, not twice
    assert summary.tokens_per_s == pytest.approx(2 * 4103.7)


def test_detail_disagreeing_with_summary_is_a_warning(tmp_path: Path) -> None:
    folder = tmp_path / "gpu3"
    shutil.copytree(ASUSTEK / "llama2-70b_offline_performance_run_1_gpu_3", folder)
    detail = folder / "mlperf_log_detail.txt"
    detail.write_text(detail.read_text().replace('"value": 4212.49', '"value": 4000.0'))
    summary, _ = summarize_result_dirs([tmp_path], 1)
    assert summary.nodes[0].tokens_per_s == 4212.49
    assert summary.warnings == ("gpu3: summary says 4212.49 tokens/s, detail log says 4000 (summary used)",)


def test_bad_arguments() -> None:
    with pytest.raises(RunLoadError, match="at least 1"):
        summarize_result_dirs([ASUSTEK], gpus_per_node=0)
    with pytest.raises(RunLoadError, match="not a folder"):
        summarize_result_dirs([ASUSTEK / "nope"], None)


def test_error_type_reaches_the_cli() -> None:
    from tokenwatch.cli import _user_errors

    assert SourceFormatError in _user_errors()
