"""``--benchmark`` on the run commands: the rules it names reach the verdict; an unknown name is one line."""

from __future__ import annotations

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
