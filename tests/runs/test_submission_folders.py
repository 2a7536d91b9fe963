"""Published MLPerf submission folders, from real submissions copied into
tests/data/sources/loadgen/submissions (README there): accuracy stubs skipped, ranging and compliance runs
listed apart, SingleStream accepted, GPUs from the submission's systems/*.json, system results told from
per-node ones. Expected figures are read here from the files themselves (regex, json), not from our
parsers."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tokenwatch.runs.result_folders import summarize_result_dirs

SUBMISSIONS = Path(__file__).resolve().parent.parent / "data" / "sources" / "loadgen" / "submissions"
ASUSTEK = SUBMISSIONS.parent / "asustek-8xmi325x-offline"


def stated(summary_file: Path, key: str) -> float:
    """A figure as the summary file states it (``key : value``)."""
    match = re.search(rf"^{re.escape(key)}\s*:\s*(\S+)$", summary_file.read_text(), re.M)
    assert match is not None, key
    return float(match.group(1))


def only(folder: Path) -> Path:
    (path,) = [p for p in folder.rglob("mlperf_log_summary.txt") if p.stat().st_size > 100]
    return path


def system_gpus(folder: Path) -> int:
    (path,) = folder.rglob("systems/*.json")
    doc = json.loads(path.read_text())
    return int(doc["accelerators_per_node"]) * int(doc["number_of_nodes"])


def test_a_submission_with_an_accuracy_stub_summarises_its_performance_run(run_cli) -> None:
    folder = SUBMISSIONS / "dell-xe9680l-b200x8"
    summary, _ = summarize_result_dirs([folder], None)
    (node,) = summary.nodes
    assert node.tokens_per_s == stated(only(folder), "Completed tokens per second")
    assert summary.gpus == system_gpus(folder) == 8
    assert summary.per_gpu_tokens_per_s == pytest.approx(node.tokens_per_s / 8)
    assert summary.layout == "system"
    assert any("accuracy: skipped" in w and "stub" in w for w in summary.warnings)
    result = run_cli("summarize", str(folder))
    assert result.returncode == 0, result.stderr  # the stub used to refuse the whole folder (exit 2)
    assert "system result: one LoadGen run for the whole system, 8 GPUs" in result.stdout.splitlines()[0]


def test_a_multi_node_system_result_counts_every_node_s_gpus() -> None:
    folder = SUBMISSIONS / "juniper-dgx-h100x32-4node"  # 4 DGX H100 nodes, one LoadGen for all of them
    summary, _ = summarize_result_dirs([folder], gpus_per_node=1)  # the system file wins over the flag
    assert summary.gpus == system_gpus(folder) == 32
    (node,) = summary.nodes
    assert node.extra["system"]["nodes"] == 4
    assert summary.per_gpu_tokens_per_s == pytest.approx(stated(only(folder), "Tokens per second") / 32)
    assert summary.to_json()["layout"] == "system"


def test_a_ranging_run_is_listed_apart_and_never_summed(run_cli) -> None:
    folder = SUBMISSIONS / "lenovo-sr680a-b200x8-ranging"
    ranging = folder / "Server" / "performance" / "ranging" / "mlperf_log_summary.txt"
    run_1 = folder / "Server" / "performance" / "run_1" / "mlperf_log_summary.txt"
    summary, _ = summarize_result_dirs([folder], gpus_per_node=8)
    assert summary.tokens_per_s == stated(run_1, "Completed tokens per second")  # not + the ranging run's
    (apart,) = summary.apart
    assert apart.extra["kind"] == "ranging"
    assert apart.valid is False
    assert apart.tokens_per_s == stated(ranging, "Completed tokens per second")
    data = summary.to_json()
    assert [n["name"] for n in data["not_in_aggregate"]] == ["Server/performance/ranging"]
    assert not any("ranging" in w and "in the total" in w for w in summary.warnings)
    table = run_cli("summarize", str(folder), "--gpus-per-node", "8").stdout
    assert "Not in the aggregate: Server/performance/ranging (ranging run, INVALID" in table


def test_a_compliance_run_is_listed_apart() -> None:
    folder = SUBMISSIONS / "krai-xd670-h200x8-test06"
    summary, _ = summarize_result_dirs([folder], gpus_per_node=8)
    (node,) = summary.nodes
    assert "/results/" in node.name
    assert node.valid is True
    (apart,) = summary.apart
    assert apart.extra["kind"] == "compliance TEST06"
    assert apart.valid is False  # TEST06 of this submission is INVALID: listed, flagged, not summed
    test06 = next(folder.rglob("TEST06/**/mlperf_log_summary.txt"))
    assert apart.tokens_per_s == stated(test06, "Completed tokens per second")
    assert summary.tokens_per_s == node.tokens_per_s


def test_single_stream_llm_summaries_read_as_stated() -> None:
    folder = SUBMISSIONS / "intel-bmg-b60-singlestream"
    path = folder / "mlperf_log_summary.txt"
    summary, _ = summarize_result_dirs([folder], gpus_per_node=1)
    assert summary.scenario == "SingleStream"
    (node,) = summary.nodes
    assert node.tokens_per_s == stated(path, "TPS w/ loadgen overhead")
    assert node.samples_per_s == stated(path, "QPS w/ loadgen overhead")
    assert node.latency_ms["ttft"]["p99"] == pytest.approx(
        stated(path, "99.00 percentile first token latency (ns)") / 1e6
    )
    assert node.latency_ms["tpot"]["p99"] == pytest.approx(
        stated(path, "99.00 percentile time to output token (ns)") / 1e6
    )


def test_per_node_results_are_told_from_a_system_result(run_cli) -> None:
    summary, _ = summarize_result_dirs([ASUSTEK], gpus_per_node=1)
    assert summary.layout == "per-node"
    head = run_cli("summarize", str(ASUSTEK), "--gpus-per-node", "1").stdout.splitlines()[0]
    assert "8 per-node results (one LoadGen run each), 8 GPUs" in head
    unknown = run_cli("summarize", str(ASUSTEK), "--json")
    data = json.loads(unknown.stdout)
    assert data["aggregate"]["gpus"] is None
    assert data["aggregate"]["per_gpu_tokens_per_s"] is None


def test_an_aborted_run_s_empty_summary_alone_is_one_line_error(run_cli) -> None:
    result = run_cli("summarize", str(SUBMISSIONS / "aborted-run-empty"))
    assert result.returncode == 2
    assert result.stderr.count("\n") <= 2  # the skip warning and the error, no traceback
    assert "no LoadGen result summary found" in result.stderr
    assert "without a summary in them" in result.stderr
