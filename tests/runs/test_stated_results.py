"""MLPerf v6.0 results read as their submissions state them (real files, tests/data/sources/loadgen/
submissions, README there): the accelerator count a system names (``(x87)`` on 11 nodes x 8), a
samples-only result (qwen3-vl states samples/s and no tokens), latency columns of an Offline run's
million-millisecond latencies, and the report's mean and max latency. Expected figures are read here from
the files (regex, json), not from our parsers."""

from __future__ import annotations

import json
import re
from pathlib import Path

from tokenwatch.base.formatting import group
from tokenwatch.frontends.headless.summary_table import render_summary
from tokenwatch.runs.result_folders import summarize_result_dirs

SUBMISSIONS = Path(__file__).resolve().parent.parent / "data" / "sources" / "loadgen" / "submissions"
AMD_87 = SUBMISSIONS / "amd-87xmi355x-cluster"
QWEN3_VL = SUBMISSIONS / "nvidia-gb300x4-qwen3-vl"


def _stated(summary_file: Path, key: str) -> float:
    match = re.search(rf"^{re.escape(key)}\s*:\s*(\S+)$", summary_file.read_text(), re.M)
    assert match is not None, key
    return float(match.group(1))


def _summary_file(folder: Path) -> Path:
    (path,) = folder.rglob("mlperf_log_summary.txt")
    return path


def test_the_accelerator_count_a_submission_states_wins_over_its_node_layout() -> None:
    (system,) = AMD_87.rglob("systems/*.json")
    doc = json.loads(system.read_text())
    stated = int(re.findall(r"\(x(\d+)\)", doc["accelerator_model_name"])[0])
    layout = int(doc["number_of_nodes"]) * int(doc["accelerators_per_node"])
    assert (stated, layout) == (87, 88)
    tokens = _stated(_summary_file(AMD_87), "Tokens per second")
    summary, _ = summarize_result_dirs([AMD_87], None)
    assert summary.gpus == stated
    assert summary.per_gpu_tokens_per_s == tokens / stated  # 11,978.3, not 11,842.2 (over 88)
    (warning,) = [w for w in summary.warnings if "accelerators" in w]
    assert "states 87 accelerators (x87) on 11 nodes x 8 = 88" in warning
    node = summary.to_json()["nodes"][0]
    assert node["system"]["accelerators_stated"] == 87
    assert node["gpus"] == 87


def test_a_samples_only_result_is_summarised_in_samples_per_second(run_cli) -> None:
    """qwen3-vl states 'Samples per second: 61.2443' and no tokens line: its figure is samples/s and its
    tokens are unknown (the table headlined 'Total aggregate 0.0' and 'no work' before)."""
    samples = _stated(_summary_file(QWEN3_VL), "Samples per second")
    summary, _ = summarize_result_dirs([QWEN3_VL], None)
    assert summary.figure == "samples"
    assert summary.aggregate == samples
    assert summary.per_gpu == samples / 4  # the GB300 x4 system
    assert summary.tokens_per_s != summary.tokens_per_s  # NaN: unknown, not 0
    out = summary.to_json()
    assert out["aggregate"]["tokens_per_s"] is None
    assert out["aggregate"]["samples_per_s"] == samples
    assert out["aggregate"]["figure"] == "samples_per_s"
    assert out["aggregate"]["covers"]["nodes"] == 1  # the result did work
    table = render_summary(summary)
    assert "samples/s" in table.splitlines()[1]
    (total,) = [line for line in table.splitlines() if line.startswith("Total aggregate")]
    assert total.split()[-1] == group(samples, 2)
    assert "no work" not in table
    assert "tokens are not stated" in table
    done = run_cli("summarize", str(QWEN3_VL))
    assert done.returncode == 0, done.stderr
    assert "61.24" in done.stdout


def test_latency_columns_stay_apart_at_any_magnitude() -> None:
    """An Offline run's end-to-end latencies pass 1,000,000 ms: the columns ran together
    ('1,359,534.31,382,367.91,387,581.4')."""
    summary, _ = summarize_result_dirs([AMD_87], None)
    lines = render_summary(summary).splitlines()
    (e2e,) = [line for line in lines if line.startswith("E2E")]
    cells = e2e.split()[1:]
    summary_file = _summary_file(AMD_87)
    expected = [
        group(_stated(summary_file, f"{p:.2f} percentile latency (ns)") / 1e6, 1) for p in (50.0, 90.0, 99.0)
    ]
    assert cells == expected
    header = next(line for line in lines if line.startswith("Latency (ms)"))
    assert header.index("p99") + 3 == len(e2e)  # the columns line up with their headings


def test_the_report_shows_a_result_s_mean_and_max_latency(run_cli, tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    done = run_cli("report", str(AMD_87), "-o", str(out))
    assert done.returncode == 0, done.stderr
    html = out.read_text()
    summary_file = _summary_file(AMD_87)
    mean = group(_stated(summary_file, "Mean latency (ns)") / 1e6, 1)
    most = group(_stated(summary_file, "Max latency (ns)") / 1e6, 1)
    row = re.search(r'<table[^>]*id="latency-table".*?</table>', html, re.S)
    assert row is not None
    assert f"<td>{mean}</td>" in row.group(0)
    assert f"<td>{most}</td>" in row.group(0)


def test_the_export_of_a_samples_only_result_says_samples(run_cli, tmp_path: Path) -> None:
    samples = _stated(_summary_file(QWEN3_VL), "Samples per second")
    done = run_cli("export", str(QWEN3_VL), "--csv", str(tmp_path))
    assert done.returncode == 0, done.stderr
    rows = {
        r.split(",")[1]: r.split(",")[2:] for r in (tmp_path / "summary.csv").read_text().splitlines()[1:]
    }
    assert rows["aggregate_samples_per_s"] == [str(samples), "samples/s"]
    assert rows["node_max_samples_per_s"] == [str(samples), "samples/s"]
    assert rows["aggregate_tokens_per_s"][0] == ""  # unknown, not 0
    assert "node_max_tokens_per_s" not in rows  # the spread is not labelled as tokens
