"""The command line as a new user meets it: output contracts and one-line errors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import orjson
import pytest

from tests.conftest import SAMPLE_RUNS
from tokenwatch.base.events import NodeStatus, ProgressBatch, RunStarted
from tokenwatch.recording import read_events

JSONL_KEYS = {
    "t",
    "progress_pct",
    "clock",
    "aggregate",
    "node_spread",
    "stopped_nodes",
    "nodes",
    "alerts",
    "verdict",
}
END_KEYS = {
    "reason",
    "banner",
    "complete",
    "tokens_per_s",
    "per_gpu_tokens_per_s",
    "gpus",
    "power_mean_w",
    "tokens_per_joule",
    "energy_source",
    "nodes_finished",
}
AGGREGATE_KEYS = {
    "tokens_per_s",
    "per_gpu_tokens_per_s",
    "nodes",
    "nodes_up",
    "gpus",
    "gpus_reporting",
    "power_w",
}
NODE_KEYS = {
    "name",
    "status",
    "tokens_per_s",
    "progress_pct",
    "power_w",
    "sm_clock_mhz",
    "hbm_used_mib",
    "temp_c",
    "tokens_per_joule",
    "cause",
}
SPREAD_KEYS = {"max", "min", "mean", "median", "spread_pct", "nodes"}


def test_headless_prints_a_line_per_interval_and_the_summary(run_cli, tmp_path: Path) -> None:
    out = tmp_path / "snap.jsonl"
    result = run_cli(
        "sim", "--speed", "0", "--duration", "10m", "--headless", "--interval", "1m", "--jsonl", str(out)
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    run_lines = [line for line in lines if line[:2].isdigit() and ":" in line[:6]]
    records = [orjson.loads(line) for line in out.read_bytes().splitlines()]
    assert len(run_lines) == len(records)
    assert [r["t"] for r in records[:10]] == [60.0 * k for k in range(1, 11)]
    assert run_lines[0].startswith("01:00")
    assert "tok/s" in run_lines[0]
    assert "nodes 18/18" in run_lines[0]
    assert "Total aggregate" in result.stdout
    assert "Median single-node" in result.stdout
    for record in records[:-1]:
        assert set(record) == JSONL_KEYS
    # The last record is the run's end: its run figures ride along under "end".
    assert set(records[-1]) == JSONL_KEYS | {"end"}
    assert set(records[-1]["end"]) == END_KEYS
    for record in records:
        assert set(record["aggregate"]) == AGGREGATE_KEYS
        assert set(record["node_spread"]) == SPREAD_KEYS
        assert len(record["nodes"]) == 18
        assert set(record["nodes"][0]) == NODE_KEYS
    # The aggregate is the sum of the nodes; per-GPU is the aggregate over 72 GPUs.
    mid = records[5]
    assert mid["aggregate"]["tokens_per_s"] == pytest.approx(
        sum(n["tokens_per_s"] for n in mid["nodes"]), rel=1e-6
    )
    assert mid["aggregate"]["per_gpu_tokens_per_s"] == pytest.approx(
        mid["aggregate"]["tokens_per_s"] / 72, rel=1e-4
    )


def test_jsonl_to_stdout_keeps_stdout_parseable(run_cli) -> None:
    result = run_cli(
        "sim",
        "--speed",
        "0",
        "--duration",
        "3m",
        "--profile",
        "h100-dgx",
        "--headless",
        "--interval",
        "1m",
        "--jsonl",
        "-",
    )
    assert result.returncode == 0
    records = [orjson.loads(line) for line in result.stdout.splitlines()]
    assert records
    assert all(set(r) == JSONL_KEYS for r in records[:-1])
    assert set(records[-1]) == JSONL_KEYS | {"end"}
    assert "Total aggregate" in result.stderr


def finished_nodes(path: Path) -> set[str]:
    """The nodes the raw stream reports finished (no core involved)."""
    events, _ = read_events(path)
    return {e.node for e in events if isinstance(e, NodeStatus) and e.state == "finished"}


def independent_node_rates(path: Path) -> dict[str, float]:
    """Tokens / own duration per node, straight from the raw progress records (no core involved)."""
    events, _ = read_events(path)
    start = events[0]
    assert isinstance(start, RunStarted)
    n = len(start.nodes)
    tokens, first, last_change = np.zeros(n), np.full(n, np.nan), np.zeros(n)
    for e in events:
        if isinstance(e, ProgressBatch):
            idx = e.node_index
            first[idx] = np.where(np.isnan(first[idx]), e.t, first[idx])
            grew = e.tokens_done > tokens[idx]
            last_change[idx[grew]] = e.t
            tokens[idx] = np.maximum(tokens[idx], e.tokens_done)
    return {name: tokens[i] / (last_change[i] - first[i]) for i, name in enumerate(start.nodes)}


@pytest.mark.parametrize("name", ["gb300-nvl72-offline", "gb300-nvl72-node-failure"])
def test_summarize_json_contract_matches_raw_counters(run_cli, name: str) -> None:
    path = SAMPLE_RUNS / f"{name}.jsonl.zst"
    result = run_cli("summarize", str(path), "--json")
    assert result.returncode == 0, result.stderr
    summary = orjson.loads(result.stdout)
    assert {"scenario", "duration_s", "aggregate", "node_spread", "nodes", "power"} <= set(summary)
    assert "latency_ms" not in summary  # Offline: no latencies recorded
    truth = independent_node_rates(path)
    got = {n["name"]: n["tokens_per_s"] for n in summary["nodes"]}
    assert got == pytest.approx(truth, rel=1e-6)
    values = np.array(list(truth.values()))
    # Every node did work: all are in the aggregate, per GPU over all 72 GPUs.
    assert summary["aggregate"]["tokens_per_s"] == pytest.approx(values.sum(), rel=1e-6)
    assert summary["aggregate"]["gpus"] == 72
    assert summary["aggregate"]["covers"] == {"nodes": 18, "gpus": 72, "left_out": []}
    assert summary["aggregate"]["per_gpu_tokens_per_s"] == pytest.approx(values.sum() / 72, rel=1e-6)
    # The single-node figures are over the nodes that finished (a node down since 30 minutes is not a
    # node result: it once made the spread read 57 %).
    finished = finished_nodes(path)
    whole = np.array([rate for node, rate in truth.items() if node in finished])
    spread = summary["node_spread"]
    assert spread["median"] == pytest.approx(np.median(whole), rel=1e-6)
    assert spread["spread_pct"] == pytest.approx((whole.max() - whole.min()) / whole.min() * 100, rel=1e-5)
    assert spread["covers"]["left_out"] == sorted(set(truth) - finished)
    assert set(summary["power"]) == {"mean_w", "tokens_per_joule", "energy_source"}


def test_summarize_server_has_latency_percentiles(run_cli) -> None:
    result = run_cli("summarize", str(SAMPLE_RUNS / "gb300-nvl72-server.jsonl.zst"), "--json")
    summary = orjson.loads(result.stdout)
    assert summary["scenario"] == "Server"
    lat = summary["latency_ms"]
    assert set(lat) == {"ttft", "tpot", "e2e"}
    for pcts in lat.values():
        assert 0 < pcts["p50"] <= pcts["p90"] <= pcts["p99"]
    table = run_cli("summarize", str(SAMPLE_RUNS / "gb300-nvl72-server.jsonl.zst")).stdout
    assert "TTFT" in table
    assert "p99" in table


def test_profiles_lists_the_built_ins(run_cli) -> None:
    result = run_cli("profiles")
    assert result.returncode == 0
    for name in ("gb300-nvl72", "gb200-nvl72", "h100-dgx"):
        assert name in result.stdout


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["sim", "--bogus"], "unrecognized arguments: --bogus"),
        (["sim", "--duration", "forever"], "bad duration"),
        (["sim", "--speed", "fast"], "bad speed"),
        (["sim", "--faults", "node99:down@1m"], "no node 'node99'"),
        (["sim", "--profile", "nope"], "unknown profile"),
        (["replay", "/no/such/file.jsonl"], "no such file"),
        (["summarize", "/no/such/file.jsonl"], "no such file"),
        (["replay", "pyproject.toml"], "not a tokenwatch recording"),
        (["replay", "sample_runs/gb300-nvl72-server.jsonl.zst", "--start=-5m"], "bad duration"),
        (["replay", "sample_runs/gb300-nvl72-server.jsonl.zst", "--start", "5 fortnights"], "bad duration"),
        (["frobnicate"], "invalid choice"),
        (["sim", "--record", "/no/such/dir/x.jsonl", "--headless"], "cannot create"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(run_cli, args: list[str], says: str) -> None:
    result = run_cli(*args)
    assert result.returncode == 2, result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert says in lines[0]
    assert "Traceback" not in result.stderr


def test_existing_recording_is_never_overwritten(run_cli, tmp_path: Path) -> None:
    rec = tmp_path / "r.jsonl"
    rec.write_text("precious\n")
    result = run_cli("sim", "--speed", "0", "--duration", "1m", "--headless", "--record", str(rec))
    assert result.returncode == 2
    assert "already exists" in result.stderr
    assert rec.read_text() == "precious\n"


def test_damaged_recording_still_summarises_with_warnings(run_cli, tmp_path: Path) -> None:
    rec = tmp_path / "r.jsonl"
    assert (
        run_cli(
            "sim",
            "--speed",
            "0",
            "--duration",
            "2m",
            "--profile",
            "h100-dgx",
            "--headless",
            "--record",
            str(rec),
        ).returncode
        == 0
    )
    lines = rec.read_bytes().splitlines(keepends=True)
    rec.write_bytes(b"".join(lines[:5]) + b"garbage\n" + b"".join(lines[5:])[:-20])
    result = run_cli("summarize", str(rec))
    assert result.returncode == 0
    warnings = result.stderr.strip().splitlines()
    assert len(warnings) == 2
    assert f"{rec}:6: skipped: not JSON" in warnings[0]
    assert "torn last line" in warnings[1]
    assert "Total aggregate" in result.stdout


def test_help_and_version(run_cli) -> None:
    result = run_cli("--help")
    assert result.returncode == 0
    assert "sim" in result.stdout
    assert "replay" in result.stdout
    assert run_cli("--version").stdout.startswith("tokenwatch ")
    sim_help = run_cli("sim", "--help").stdout
    for flag in (
        "--profile",
        "--scenario",
        "--seed",
        "--duration",
        "--faults",
        "--speed",
        "--record",
        "--jsonl",
    ):
        assert flag in sim_help


def test_a_node_that_dropped_out_is_flagged_not_silently_summed(run_cli) -> None:
    result = run_cli("summarize", str(SAMPLE_RUNS / "gb300-nvl72-node-failure.jsonl.zst"), "--json")
    summary = orjson.loads(result.stdout)
    flagged = [n["name"] for n in summary["nodes"] if n.get("valid") is False]
    assert flagged == ["node07"]  # down from 30 minutes on (the recording's fault list)
    assert len(summary["warnings"]) == 1
    assert "node07 did not finish" in summary["warnings"][0]
    clean = orjson.loads(
        run_cli("summarize", str(SAMPLE_RUNS / "gb300-nvl72-offline.jsonl.zst"), "--json").stdout
    )
    assert clean["warnings"] == []  # always there: a clean run's is empty, as the README's example shows
    assert all("valid" not in n for n in clean["nodes"])
