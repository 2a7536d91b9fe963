"""``--benchmark`` on the run commands: the rules it names reach the verdict; an unknown name is one line."""

from __future__ import annotations

import math
import re
from pathlib import Path

import orjson

from tests.conftest import RunCli


def test_sim_judges_by_the_benchmark_asked_for(run_cli: RunCli, tmp_path: Path) -> None:
    out = tmp_path / "snaps.jsonl"
    result = run_cli(
        "sim", "--scenario", "Server", "--duration", "2m", "--speed", "0", "--headless", "--interval", "1m",
        "--benchmark", "llama3.1-405b", "--jsonl", str(out),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    last = orjson.loads(out.read_bytes().splitlines()[-1])["verdict"]
    assert last["benchmark"] == "llama3.1-405b"
    limits = {c["name"]: c["limit"] for c in last["checks"]}
    assert (limits["ttft_p99"], limits["tpot_p99"]) == (6.0, 0.175)  # mlperf.conf's llama3_1-405b Server
    assert " proj " in result.stdout.splitlines()[0]


def test_an_unknown_benchmark_is_one_line_and_exit_status_2(run_cli: RunCli) -> None:
    result = run_cli("sim", "--speed", "0", "--headless", "--benchmark", "llama9-1t")
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1
    assert "unknown MLPerf benchmark 'llama9-1t'" in lines[0]
    assert "llama2-70b-99" in lines[0]  # names the ones it knows


def test_a_failing_interactive_server_run_ends_and_its_recording_summarizes(
    run_cli: RunCli, tmp_path: Path
) -> None:
    """A 10-minute Interactive Server run with about a quarter of its first tokens over the 450 ms limit
    once froze at 09:57 (early stopping's series ran to inf, then NaN, and its loop never ended): the
    headless run prints its end line, and ``summarize`` of the recording returns with every early-stopping
    figure finite. Waited on with a generous ceiling (the run takes seconds)."""
    recording = tmp_path / "interactive.jsonl.zst"
    result = run_cli(
        "sim", "--scenario", "Server", "--duration", "10m", "--benchmark", "llama2-70b-interactive",
        "--speed", "0", "--headless", "--interval", "5m", "--record", str(recording),
        timeout=900,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[1].startswith("10:00")
    assert "ended: 18 of 18 nodes finished" in lines[1]
    assert " INVALID " in lines[1]
    summary = run_cli("summarize", "--json", str(recording), timeout=900)
    assert summary.returncode == 0, summary.stderr
    verdict = orjson.loads(summary.stdout)["verdict"]
    assert verdict["valid"] is False
    checks = {c["name"]: c for c in verdict["checks"]}
    for name in ("early_stopping_ttft", "early_stopping_tpot"):
        check = checks[name]
        assert check["ok"] is False
        assert all(math.isfinite(check[k]) for k in ("value", "limit", "margin"))
        # LoadGen's own words, with the queries it would still need (a whole number)
        assert re.search(r"Would need to run at least \d+ more queries", check["detail"])
