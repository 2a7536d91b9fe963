"""``tokenwatch watch`` and ``tokenwatch check`` from the command line, as an engineer runs them."""

from __future__ import annotations

import math
import os
import signal
import subprocess
from pathlib import Path

import orjson
import pytest
from live_support import (
    expected_node_power_w,
    gpu_rows,
    needs_sshd,
    write_config,
)
from sshd_cluster import LoopbackCluster

from tests.conftest import PATIENCE_S, recorded_until, run_tokenwatch, start_tokenwatch, wait_until
from tokenwatch.base.events import NodeStatus, RunEnded, RunStarted
from tokenwatch.recording import read_events

pytestmark = pytest.mark.timeout(120)


def one_line_error(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
    return lines[0]


def test_check_summarises_without_connecting(tmp_path: Path) -> None:
    cfg = tmp_path / "rack.yaml"
    cfg.write_text(
        "run: {name: rack-a, scenario: Server}\n"
        "nodes: {hosts: 'gpu[1-3],gpu7', gpus_per_node: 8}\n"  # nothing answers for these names
        "progress:\n  - {kind: log, path: '/logs/{name}.log', preset: vllm}\n"
    )
    result = run_tokenwatch("check", str(cfg))
    assert result.returncode == 0, result.stderr
    assert f"{cfg}: ok" in result.stdout
    assert "4 nodes (gpu1, gpu2, gpu3, ... gpu7), 8 GPUs each" in result.stdout
    assert "log" in result.stdout


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        (
            "run: {name: x}\ngpu: {source: none}\n",
            "nothing to watch: gpu.source is none and there is no progress",
        ),
        (
            "run: {name: x}\n",
            "nothing to watch: gpu.source nvidia-smi: nvidia-smi is not on this machine's PATH",
        ),
        (
            "run: {name: x}\ngpu: {source: prometheus, url: 'http://prom:9090'}\n",
            "nodes: gpu.source prometheus needs nodes.gpus_per_node",
        ),
        (
            "run: {name: x}\nnodes: {hosts: n1, gpus_per_node: 1}\nssh: {client_keys: [/nonexistent/key]}\n",
            "ssh.client_keys: /nonexistent/key: no such file",
        ),
        ("run: {name: x}\nnodes: {slurm_job: 42, gpus_per_node: 4}\n", "slurm job 42: scontrol not found"),
    ],
)
def test_watch_refuses_with_one_line(tmp_path: Path, config: str, expected: str) -> None:
    cfg = tmp_path / "w.yaml"
    cfg.write_text(config)
    result = run_tokenwatch("watch", str(cfg), "--headless", "--stop-after", "1s", PATH="/usr/bin:/bin")
    assert expected in one_line_error(result)


def test_bad_config_is_one_line_for_both_commands(tmp_path: Path) -> None:
    cfg = tmp_path / "w.yaml"
    cfg.write_text("run: {name: x}\nssh: {max_concurrent: many}\n")
    for command in ("check", "watch"):
        line = one_line_error(run_tokenwatch(command, str(cfg)))
        assert f"{cfg}:2: ssh.max_concurrent: expected a whole number" in line


@needs_sshd
def test_watch_headless_records_and_stops_after(healthy: LoopbackCluster, tmp_path: Path) -> None:
    """--stop-after ends the watch by itself: RunEnded with that reason closes the recording, the lines
    stop there (one per interval, then one at the end) and the summary table follows."""
    cfg = write_config(tmp_path / "w.yaml", healthy)
    rec, jsonl = tmp_path / "run.jsonl.zst", tmp_path / "snapshots.jsonl"
    result = run_tokenwatch(
        "watch", str(cfg), "--headless", "--interval", "1s", "--stop-after", "4s", "--record", str(rec),
        "--jsonl", str(jsonl), timeout=60,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    events, warnings = read_events(rec)
    assert warnings == []
    assert isinstance(events[0], RunStarted)
    assert events[0].source == "live"
    end = events[-1]
    assert isinstance(end, RunEnded)  # the last event: nothing was recorded after the end
    assert end.reason == "stopped after 4 s (--stop-after)"
    assert end.t >= 4.0 - 1e-6  # recorded run time: --stop-after never ends a watch early
    assert sum(isinstance(e, RunEnded) for e in events) == 1
    # One snapshot per second of run time before the end, then one at the end: the watch stopped there.
    snapshots = [orjson.loads(line) for line in jsonl.read_bytes().splitlines()]
    boundaries = [float(k) for k in range(1, math.ceil(end.t))]
    assert [s["t"] for s in snapshots] == [*boundaries, round(end.t, 3)]
    lines, _, table = result.stdout.partition("\n\n")
    clocks = [line.split()[0] for line in lines.splitlines()]
    assert clocks == [f"00:{int(s['t']):02d}" for s in snapshots]
    assert "nodes 8/8" in lines.splitlines()[-1]
    assert table.startswith("loopback-rack · Offline · 8 nodes, 32 GPUs")
    assert "Total aggregate" in table
    powers: dict[str, dict[int, float]] = {}
    for row in gpu_rows(events):
        powers.setdefault(row.node, {})[row.gpu] = row.power_w
    for node in healthy.nodes:
        assert sum(powers[node.name].values()) == pytest.approx(expected_node_power_w(node.index))
    # recordings never hold secrets: not the private key, not the key's path
    raw = rec.read_bytes()
    from tests.conftest import unzstd

    text = unzstd(raw)
    key_body = "".join(healthy.client_key.read_text().splitlines()[1:-1])
    assert key_body[:40].encode() not in text
    assert str(healthy.client_key).encode() not in text


@needs_sshd
def test_ctrl_c_closes_output_and_recording_cleanly(healthy: LoopbackCluster, tmp_path: Path) -> None:
    cfg = write_config(tmp_path / "w.yaml", healthy)
    rec = tmp_path / "run.jsonl"
    proc = start_tokenwatch("watch", str(cfg), "--headless", "--interval", "1s", "--record", str(rec))
    try:
        wait_until(  # the GPUs read and two seconds of the run recorded: a run well under way to interrupt
            lambda: rec.exists() and b'"gpu"' in rec.read_bytes() and (recorded_until(rec) or 0.0) >= 2.0,
            "the GPUs and two seconds of the run in the recording",
        )
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=PATIENCE_S)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err  # interrupted: as a shell reports Ctrl-C
    assert "Traceback" not in err
    assert "Total aggregate" in out  # the summary table at the end
    assert "\nINTERRUPTED at " in out  # ...marked as the partial result it is
    events, warnings = read_events(rec)
    assert warnings == []
    assert isinstance(events[-1], RunEnded)
    assert events[-1].reason == "interrupted"


@needs_sshd
def test_hosts_from_a_slurm_job_through_ssh_config(healthy: LoopbackCluster, tmp_path: Path) -> None:
    """``--slurm-job``: names from ``scontrol show hostnames``; ~/.ssh/config says how to reach them."""
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "config").write_text(healthy.ssh_config())
    (home / ".ssh" / "known_hosts").write_text(healthy.known_hosts.read_text())
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    # Slurm is not installed here: a stand-in scontrol answers as the real one does for job 4242.
    scontrol = fake_bin / "scontrol"
    scontrol.write_text(
        "#!/bin/sh\n"
        'case "$1 $2" in\n'
        '  "show job") [ "$4" = 4242 ] ||\n'
        '    { echo "slurm_load_jobs error: Invalid job id specified" >&2; exit 1; }\n'
        '    echo "JobId=4242 JobName=llama JobState=RUNNING NodeList=node[02-03],node05 NumNodes=3" ;;\n'
        '  "show hostnames") echo "$3" |\n'
        '    sed "s/node\\[02-03\\],node05/node02 node03 node05/" | tr " " "\\n" ;;\n'
        "esac\n"
    )
    scontrol.chmod(0o755)
    cfg = tmp_path / "w.yaml"
    cfg.write_text("run: {name: slurm}\nnodes: {slurm_job: 1, gpus_per_node: 4}\ngpu: {interval: 300ms}\n")
    rec = tmp_path / "rec.jsonl"
    path = f"{fake_bin}:{os.environ['PATH']}"
    result = run_tokenwatch(
        "watch",
        str(cfg),
        "--slurm-job",
        "4242",
        "--headless",
        "--stop-after",
        "3s",
        "--record",
        str(rec),
        HOME=str(home),
        PATH=path,
        SSH_AUTH_SOCK="",
    )
    assert result.returncode == 0, result.stderr
    events, _ = read_events(rec)
    assert isinstance(events[0], RunStarted)
    assert events[0].nodes == ("node02", "node03", "node05")
    ups = {e.node for e in events if isinstance(e, NodeStatus) and e.state == "up"}
    assert ups == {"node02", "node03", "node05"}
    bad = run_tokenwatch(
        "watch", str(cfg), "--slurm-job", "7", "--headless", HOME=str(home), PATH=path, SSH_AUTH_SOCK=""
    )
    assert "Invalid job id" in one_line_error(bad)
