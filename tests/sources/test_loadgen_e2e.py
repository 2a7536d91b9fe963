"""End to end with the real MLPerf LoadGen: several "nodes" (one LoadGen process each, side by side)
drive a fake SUT that produces tokens at a set rate. ``tokenwatch summarize`` must give LoadGen's own
figures, and tailing each trace while LoadGen writes it must show progress that only grows and ends at
the number of samples the SUT served."""

from __future__ import annotations

import json
import re
import statistics
from importlib.metadata import version
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.conftest import progress_counts
from tokenwatch.base.events import LatencyBatch, Progress

from .conftest import TailedRun, needs_loadgen, run_nodes

pytestmark = needs_loadgen

OFFLINE_NODES = {
    "node00": ["--scenario", "Offline", "--tokens-per-s", "3000"],
    "node01": ["--scenario", "Offline", "--tokens-per-s", "3300"],
    "node02": ["--scenario", "Offline", "--tokens-per-s", "2700"],
    # LoadGen is told to expect far fewer samples/s than this SUT does: the run ends before its
    # minimum duration, and LoadGen calls it INVALID.
    "node03": ["--scenario", "Offline", "--tokens-per-s", "3000", "--expected-qps", "60"],
}
SERVER_ARGS = [
    "--scenario",
    "Server",
    "--min-duration-ms",
    "2000",
    "--min-queries",
    "600",
    "--target-qps",
    "300",
]
SERVER_NODES = {
    "node00": [*SERVER_ARGS, "--tokens-per-s", "4000"],
    "node01": [*SERVER_ARGS, "--tokens-per-s", "4400"],
    "node02": [*SERVER_ARGS, "--tokens-per-s", "3800"],
}


@pytest.fixture(scope="module")
def offline_rack(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[TailedRun]]:
    root = tmp_path_factory.mktemp("offline")
    return root, run_nodes(root, OFFLINE_NODES)


@pytest.fixture(scope="module")
def server_rack(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[TailedRun]]:
    root = tmp_path_factory.mktemp("server")
    return root, run_nodes(root, SERVER_NODES)


def summary_figure(folder: Path, label: str) -> float:
    """A figure read straight off LoadGen's summary text with a plain regex."""
    text = (folder / "mlperf_log_summary.txt").read_text()
    match = re.search(rf"^{re.escape(label)}\s*:\s*(\S+)$", text, re.M)
    assert match, f"{label!r} not in {folder}"
    return float(match.group(1))


def detail_values(folder: Path) -> dict[str, Any]:
    """Every :::MLLOG record's value, read with the standard json module."""
    values: dict[str, Any] = {}
    for line in (folder / "mlperf_log_detail.txt").read_text().splitlines():
        record = json.loads(line.removeprefix(":::MLLOG "))
        values[record["key"]] = record["value"]
    return values


def summarize_json(run_cli, *dirs: Path, extra: tuple[str, ...] = ()) -> dict[str, Any]:
    result = run_cli("summarize", *map(str, dirs), "--json", *extra)
    assert result.returncode == 0, result.stderr
    data: dict[str, Any] = json.loads(result.stdout)
    return data


def test_offline_summarize_gives_loadgen_figures(offline_rack, run_cli) -> None:
    root, runs = offline_rack
    data = summarize_json(run_cli, root, extra=("--gpus-per-node", "4"))
    nodes = {n["name"]: n for n in data["nodes"]}
    assert sorted(nodes) == sorted(OFFLINE_NODES)
    expected = {}
    for run in runs:
        tokens = summary_figure(run.folder, "Tokens per second")
        samples = summary_figure(run.folder, "Samples per second")
        details = detail_values(run.folder)
        expected[run.name] = tokens
        assert nodes[run.name]["tokens_per_s"] == tokens
        assert nodes[run.name]["samples_per_s"] == samples
        assert details["result_tokens_per_second"] == pytest.approx(tokens, rel=1e-5)
        # LoadGen's tokens/s is what the SUT served over LoadGen's duration.
        duration = run.served["samples"] / details["result_samples_per_second"]
        assert run.served["tokens"] / duration == pytest.approx(tokens, rel=1e-3)
        assert nodes[run.name]["loadgen_version"].startswith(version("mlcommons-loadgen") + " @ ")
    assert data["aggregate"]["tokens_per_s"] == pytest.approx(sum(expected.values()), abs=1e-6)
    assert data["aggregate"]["gpus"] == 16
    assert data["node_spread"]["max"] == max(expected.values())
    assert data["node_spread"]["min"] == min(expected.values())
    assert data["node_spread"]["median"] == pytest.approx(statistics.median(expected.values()))
    # The run LoadGen judged INVALID is flagged, and said so, not passed off as valid.
    assert [nodes[n]["valid"] for n in sorted(nodes)] == [True, True, True, False]
    assert nodes["node03"]["invalid_reasons"] == ["Min duration satisfied"]
    assert any(w.startswith("node03: LoadGen result INVALID") for w in data["warnings"])
    assert "Result is : INVALID" in (root / "node03" / "mlperf_log_summary.txt").read_text()


def test_server_summarize_gives_loadgen_figures(server_rack, run_cli) -> None:
    root, runs = server_rack
    data = summarize_json(run_cli, root)
    nodes = {n["name"]: n for n in data["nodes"]}
    for run in runs:
        node = nodes[run.name]
        assert node["valid"] is True
        assert node["tokens_per_s"] == summary_figure(run.folder, "Completed tokens per second")
        assert node["samples_per_s"] == summary_figure(run.folder, "Completed samples per second")
        for metric, label in (
            ("e2e", "latency"),
            ("ttft", "first token latency"),
            ("tpot", "time to output token"),
        ):
            for pct in ("50.00", "90.00", "99.00"):
                ns = summary_figure(run.folder, f"{pct} percentile {label} (ns)")
                key = "p" + pct.rstrip("0").rstrip(".")
                assert node["latency_ms"][metric][key] == pytest.approx(ns / 1e6)
    assert data["aggregate"]["tokens_per_s"] == pytest.approx(sum(n["tokens_per_s"] for n in nodes.values()))
    assert "latency_ms" not in data  # three nodes' percentiles are not merged into a rack figure
    single = summarize_json(run_cli, root / "node01")
    assert single["latency_ms"]["ttft"]["p99"] == nodes["node01"]["latency_ms"]["ttft"]["p99"]


def test_mixed_scenarios_are_refused(offline_rack, server_rack, run_cli) -> None:
    result = run_cli("summarize", str(offline_rack[0]), str(server_rack[0]))
    assert result.returncode == 2
    assert "mixed scenarios" in result.stderr
    assert result.stderr.count("\n") == 1


@pytest.mark.parametrize("rack", ["offline_rack", "server_rack"])
def test_tailing_traces_while_written(rack: str, request: pytest.FixtureRequest) -> None:
    _, runs = request.getfixturevalue(rack)
    for run in runs:
        progress = [
            (running, e) for _, running, events in run.reads for e in events if isinstance(e, Progress)
        ]
        counts = progress_counts(e for _, e in progress)
        assert counts == sorted(counts), f"{run.name}: progress went backwards"
        assert counts[-1] == run.served["samples"]
        values = detail_values(run.folder)
        assert counts[-1] == values["result_query_count"] * values["generated_samples_per_query"]
        # Seen while LoadGen was still writing: several distinct, growing counts before it exited.
        live = sorted(set(progress_counts(e for running, e in progress if running)))
        assert len(live) >= 3, f"{run.name}: only {live} seen while the run was going"
        assert live[0] < counts[-1]


def test_tailed_latencies_reproduce_loadgen_percentiles(server_rack) -> None:
    _, runs = server_rack
    for run in runs:
        batches = [e for _, _, events in run.reads for e in events if isinstance(e, LatencyBatch)]
        for metric, label in (("e2e", "latency"), ("ttft", "first token latency")):
            ns = np.sort(np.round(np.concatenate([b.values_s for b in batches if b.metric == metric]) * 1e9))
            assert len(ns) == run.served["samples"]
            for q, pct in ((0.5, "50.00"), (0.9, "90.00"), (0.99, "99.00")):
                # LoadGen takes the sorted latencies' element at floor(q * n).
                assert ns[int(q * len(ns))] == summary_figure(run.folder, f"{pct} percentile {label} (ns)")
