"""Small lies the CLI once told, each pinned: a port in use, the port 0 bound, ``check`` against
``watch``, progress of a watch stopped with work undone, error lines naming their command once, and an
Offline run compared with a Server run."""

from __future__ import annotations

import signal
import socket
import urllib.request
from pathlib import Path

import orjson
import pytest

from tests.conftest import PATIENCE_S, RunCli, start_tokenwatch
from tokenwatch.base.events import NodeStatus, Progress, RunEnded, RunStarted
from tokenwatch.core import RackCore
from tokenwatch.recording import RecordingWriter

pytestmark = pytest.mark.timeout(120)


def one_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert "Traceback" not in stderr
    return lines[0]


def test_a_port_in_use_is_exit_2_in_one_line_and_records_nothing(run_cli: RunCli, tmp_path: Path) -> None:
    rec = tmp_path / "never.jsonl"
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run_cli(
            "sim", "--speed", "0", "--duration", "1m", "--headless", "--prometheus-port", str(port),
            "--record", str(rec),
        )  # fmt: skip
    assert result.returncode == 2
    assert one_line(result.stderr) == f"tokenwatch sim: --prometheus-port: port {port} is in use"
    assert not rec.exists()  # checked before the recording is created


def test_prometheus_port_0_says_the_port_it_bound() -> None:
    proc = start_tokenwatch(
        "sim",
        "--speed",
        "30",
        "--duration",
        "30m",
        "--headless",
        "--interval",
        "10m",
        "--prometheus-port",
        "0",
    )
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        assert line.startswith("serving /metrics on http://127.0.0.1:"), line
        url = line.split()[-1]
        port = int(url.rsplit(":", 1)[1].split("/")[0])
        assert port > 0
        with urllib.request.urlopen(url, timeout=PATIENCE_S) as response:  # the port said is the port served
            assert b"tokenwatch_up 1" in response.read()
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=60)
    assert proc.returncode == 130


WATCH_REFUSES = [
    ("run: {name: x}\ngpu: {source: none}\n", "nothing to watch: gpu.source is none"),
    ("run: {name: x}\n", "nothing to watch: gpu.source nvidia-smi: nvidia-smi is not on this machine's PATH"),
    (
        "run: {name: x}\nnodes: {hosts: n1, gpus_per_node: 1}\nssh: {client_keys: [/nonexistent/key]}\n",
        "ssh.client_keys: /nonexistent/key: no such file",
    ),
    ("run: {name: x}\nnodes: {slurm_job: 42, gpus_per_node: 4}\n", "slurm job 42: scontrol not found"),
    ("run: {name: x}\nnodes: {hosts: 'node[04-01]', gpus_per_node: 1}\n", "bad range in 'node[04-01]'"),
    ("run: {name: x}\ngpu: {source: prometheus, url: 'http://p:9090'}\n", "needs nodes.gpus_per_node"),
]


@pytest.mark.parametrize(("config", "says"), WATCH_REFUSES, ids=[s for _, s in WATCH_REFUSES])
def test_check_fails_on_every_config_watch_refuses(
    run_cli: RunCli, tmp_path: Path, config: str, says: str
) -> None:
    """``check`` runs the same plan as ``watch`` up to connecting: the same one-line refusal, exit 2.
    (Before, the first four passed ``check``.)"""
    cfg = tmp_path / "w.yaml"
    cfg.write_text(config)
    path = "/usr/bin:/bin"  # no nvidia-smi, no scontrol here
    watch = run_cli("watch", str(cfg), "--headless", "--stop-after", "1s", PATH=path)
    check = run_cli("check", str(cfg), PATH=path)
    assert (watch.returncode, check.returncode) == (2, 2)
    assert says in one_line(watch.stderr)
    assert one_line(check.stderr) == one_line(watch.stderr).replace("tokenwatch watch:", "tokenwatch check:")


def test_progress_of_a_watch_stopped_with_work_undone_is_not_100() -> None:
    """No sample count, a nominal 10 minutes, stopped after 1 minute with no node finished: 10 %, not the
    100 % an ended run used to claim. Once every node has said it finished, 100 %."""
    nodes = ("a", "b")
    core = RackCore()
    core.ingest(RunStarted(0.0, "w", "Offline", nodes, 1, 600.0, None, "live", 0.0))
    for t in range(61):
        for node in nodes:
            core.ingest(Progress(float(t), node, samples_done=t, tokens_done=100 * t))
    core.ingest(RunEnded(60.0, "stopped after 60 s (--stop-after)"))
    snap = core.snapshot()
    assert snap.progress_pct == pytest.approx(10.0)
    why = "stopped after 60 s (--stop-after)"
    assert snap.banner == f"ended ({why}): 0 of 2 nodes finished, a still running, b still running"
    done = RackCore()
    done.ingest(RunStarted(0.0, "w", "Offline", nodes, 1, 600.0, None, "live", 0.0))
    for node in nodes:
        done.ingest(Progress(30.0, node, samples_done=50, tokens_done=5000))
        done.ingest(NodeStatus(30.0, node, "finished", "LastTrace"))
    done.ingest(RunEnded(30.0, "every node finished"))
    assert done.snapshot().progress_pct == 100.0


def test_a_local_watch_stopped_early_shows_its_real_progress(run_cli: RunCli, tmp_path: Path) -> None:
    log = tmp_path / "harness.log"
    log.write_text("")
    cfg = tmp_path / "w.yaml"
    cfg.write_text(
        "run: {name: local, duration: 10m}\ngpu: {source: none}\n"
        f"progress:\n  - {{kind: log, path: '{log}', preset: vllm}}\n"
    )
    jsonl = tmp_path / "snaps.jsonl"
    result = run_cli(
        "watch", str(cfg), "--headless", "--interval", "1s", "--stop-after", "2s", "--jsonl", str(jsonl)
    )
    assert result.returncode == 0, result.stderr
    last = orjson.loads(jsonl.read_bytes().splitlines()[-1])
    assert last["end"]["reason"] == "stopped after 2 s (--stop-after)"
    assert last["progress_pct"] == pytest.approx(last["t"] / 600 * 100, abs=1e-3)
    assert last["progress_pct"] < 1


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["sim", "--racks", "0"], "tokenwatch sim: --racks must be between 1 and 256"),
        (
            ["sim", "--faults", "node99:down@1m"],
            "tokenwatch sim: bad fault 'node99:down@1m': no node 'node99'",
        ),
        (["summarize", "/no/such/file.jsonl"], "tokenwatch summarize: /no/such/file.jsonl: no such file"),
        (["sim", "--bogus"], "tokenwatch sim: unrecognized arguments: --bogus"),
    ],
)
def test_error_lines_name_their_command_once(run_cli: RunCli, args: list[str], line: str) -> None:
    result = run_cli(*args)
    assert result.returncode == 2
    got = one_line(result.stderr)
    assert got.startswith(line), got
    command = line.split(":")[0]  # "tokenwatch sim"
    assert got.count(f"{command}:") == 1  # once, not "tokenwatch: error: tokenwatch sim: ..."
    assert "tokenwatch:" not in got
    assert "error:" not in got


def test_comparing_an_offline_run_with_a_server_run_warns(run_cli: RunCli, tmp_path: Path) -> None:
    runs = {}
    for scenario in ("Offline", "Server"):
        runs[scenario] = tmp_path / f"{scenario}.jsonl"
        made = run_cli(
            "sim", "--scenario", scenario, "--duration", "1m", "--speed", "0", "--headless",
            "--record", str(runs[scenario]),
        )  # fmt: skip
        assert made.returncode == 0, made.stderr
    out = tmp_path / "compare.html"
    result = run_cli("report", str(runs["Offline"]), str(runs["Server"]), "-o", str(out))
    assert result.returncode == 0, result.stderr
    warning = one_line(result.stderr)
    assert warning.startswith(
        "warning: A is a Offline run and B a Server run: their figures are not comparable"
    )
    assert "not comparable" in out.read_text()
    same = run_cli("report", str(runs["Offline"]), str(runs["Offline"]), "-o", str(tmp_path / "same.html"))
    assert same.returncode == 0
    assert "not comparable" not in same.stderr


def test_replay_of_a_header_only_recording_is_refused_like_summarize(run_cli: RunCli, tmp_path: Path) -> None:
    """Before, ``replay`` of a header-only file exited 0 with nothing to show, while ``summarize``,
    ``report`` and ``export`` exited 2."""
    path = tmp_path / "header-only.jsonl"
    RecordingWriter(path).close()
    assert len(path.read_bytes().splitlines()) == 1
    summarize = run_cli("summarize", str(path))
    replay = run_cli("replay", str(path), "--headless", "--speed", "0")
    assert (summarize.returncode, replay.returncode) == (2, 2)
    assert one_line(replay.stderr) == f"tokenwatch replay: {path}: the recording holds no run start"
    assert one_line(summarize.stderr) == one_line(replay.stderr).replace("replay:", "summarize:")
    assert replay.stdout == ""


@pytest.mark.parametrize(("written", "shown"), [("10m", "10m"), ("3h", "3h"), ("90m", "1h30m"), ("0s", None)])
def test_check_says_the_fleet_lookback_as_a_config_writes_it(
    run_cli: RunCli, tmp_path: Path, written: str, shown: str | None
) -> None:
    """``lookback: 10m`` was shown as 'history up to 0.166667 h back'."""
    cfg = tmp_path / "fleet.yaml"
    cfg.write_text(
        "run: {name: fleet, scenario: Offline}\n"
        f"fleet: {{url: 'http://127.0.0.1:9', interval: 1s, lookback: {written}}}\n"
    )
    done = run_cli("check", str(cfg))
    assert done.returncode == 0, done.stderr
    fleet = next(line for line in done.stdout.splitlines() if line.strip().startswith("fleet"))
    assert fleet.endswith(f"history up to {shown} back" if shown else "no history"), fleet
