"""One LoadGen run on the real vLLM server, watched live by ``tokenwatch watch --headless``.

The watch starts first (as an engineer starts it before the run) with a local-mode config that reads
LoadGen's detail log (``loadgen-detail``), vLLM's ``/metrics`` (``prometheus``, preset ``vllm``) and the
server's log lines of this run (``log``, preset ``vllm``). Then the SUT runs LoadGen to its end; the
engine's own token counter is read before and after. The watch is left to end by itself; where it has
not within the ceiling it is stopped with SIGINT, so the tests that do not depend on how it ended still
read its recording and snapshots.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from tests.conftest import PATIENCE_S, recorded_until, start_tokenwatch, wait_until
from tests.engine.vllm_server import MAX_NUM_SEQS, VllmServer
from tests.engine.vllm_sut import Endpoint, stream_completion
from tokenwatch.recording import read_events

SUT = Path(__file__).resolve().parent / "vllm_sut.py"
MAX_TOKENS = 32  # every answer's length (ignore_eos): LoadGen's tokens are the engine's
# The runs' lengths: as short as LoadGen allows while the verdict still has a second half to judge
# (the band is checked there) and vLLM writes several stats lines (every 10 s). They are sized by the
# engine's rate measured alone (``measure_qps``); during a run it shares the 2 cores with LoadGen, the SUT
# and the watch, and did 48-84 % of that rate in the runs measured here.
# Offline: LoadGen issues 1.1 x min_duration x expected_qps samples at once: enough for ~2 minutes at 75 %
# of the measured rate, over a 60-s minimum, VALID unless the engine outruns its measure by half.
OFFLINE_MIN_DURATION_MS = 60_000
OFFLINE_TARGET_S = 120.0
OFFLINE_RATE_SHARE = 0.75
# Server: queries for the 2-minute minimum at a quarter of the measured rate, so they seldom queue.
SERVER_MIN_DURATION_MS = 120_000
SERVER_RATE_SHARE = 0.25
TTFT_LIMIT_MS = 2000.0
TPOT_LIMIT_MS = 200.0
SUT_CEILING_S = 900.0  # a 2-minute run on a machine loaded by the rest of the suite
CALIBRATION_QUERIES = 64


def measure_qps(server: VllmServer) -> float:
    """Completed queries per second with MAX_NUM_SEQS in flight (also warms the engine up)."""
    endpoint = Endpoint("127.0.0.1", int(server.url.rsplit(":", 1)[1]), server.model, MAX_TOKENS, 300.0)
    todo = list(range(CALIBRATION_QUERIES))
    lock = threading.Lock()
    tokens: list[int] = []

    def work() -> None:
        while True:
            with lock:
                if not todo:
                    return
                index = todo.pop()
            answer = stream_completion(endpoint, [5 + index % 400] * 24, lambda _text: None)
            with lock:
                tokens.append(answer.tokens)

    started = time.monotonic()
    threads = [threading.Thread(target=work) for _ in range(MAX_NUM_SEQS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.monotonic() - started
    assert all(n == MAX_TOKENS for n in tokens), f"vLLM answered with {sorted(set(tokens))} tokens"
    return CALIBRATION_QUERIES / elapsed


@dataclass
class EngineRun:
    """What one watched run left: LoadGen's folder, the watch's outputs and the engine's counter."""

    scenario: str
    folder: Path  # LoadGen's output
    recording: Path
    snapshots: Path
    log: Path  # the server's log lines of this run
    served: dict[str, Any]  # what the SUT served (samples, tokens, errors)
    engine_tokens: float  # growth of vllm:generation_tokens_total over the run
    metrics_after: str  # vLLM's /metrics text at the end
    watch_stdout: str
    watch_stderr: str
    watch_status: int
    ended_by_itself: bool

    def detail(self) -> dict[str, Any]:
        """LoadGen's detail log read with the standard json module: the last value of each key."""
        values: dict[str, Any] = {}
        for line in (self.folder / "mlperf_log_detail.txt").read_text().splitlines():
            if line.startswith(":::MLLOG "):
                record = json.loads(line.removeprefix(":::MLLOG "))
                values[record["key"]] = record["value"]
        return values

    def snapshot_records(self) -> list[dict[str, Any]]:
        return [orjson.loads(line) for line in self.snapshots.read_bytes().splitlines() if line.strip()]

    def events(self) -> list[Any]:
        events, warnings = read_events(self.recording)
        assert warnings == [], warnings
        return events


def watch_config(path: Path, scenario: str, folder: Path, server: VllmServer, log: Path) -> Path:
    path.write_text(
        f"""run: {{name: vllm-cpu-{scenario.lower()}, scenario: {scenario}}}
nodes: {{gpus_per_node: 1}}
gpu: {{source: none}}
progress:
  - {{kind: loadgen-detail, path: '{folder}/mlperf_log_detail.txt'}}
  - {{kind: prometheus, url: '{server.url}/metrics', preset: vllm, interval: 1s}}
  - {{kind: log, path: '{log}', preset: vllm}}
"""
    )
    return path


def sut_argv(scenario: str, folder: Path, server: VllmServer, capacity_qps: float) -> list[str]:
    argv = [sys.executable, str(SUT), "--scenario", scenario, "--outdir", str(folder)]
    argv += ["--url", server.url, "--model", server.model, "--max-tokens", str(MAX_TOKENS)]
    argv += ["--concurrency", str(MAX_NUM_SEQS)]
    if scenario == "Offline":
        argv += ["--min-duration-ms", str(OFFLINE_MIN_DURATION_MS)]
        samples = OFFLINE_TARGET_S * capacity_qps * OFFLINE_RATE_SHARE
        expected_qps = samples / (1.1 * OFFLINE_MIN_DURATION_MS / 1000)
        argv += ["--expected-qps", f"{expected_qps:.3f}"]
    else:
        argv += ["--min-duration-ms", str(SERVER_MIN_DURATION_MS)]
        argv += ["--target-qps", f"{capacity_qps * SERVER_RATE_SHARE:.3f}"]
        argv += ["--ttft-limit-ms", str(TTFT_LIMIT_MS), "--tpot-limit-ms", str(TPOT_LIMIT_MS)]
    return argv


def run_watched(root: Path, scenario: str, server: VllmServer, capacity_qps: float) -> EngineRun:
    """Run ``scenario`` once on ``server`` under a live watch (see the module's docstring)."""
    folder, log = root / "loadgen", root / "vllm-run.log"
    config = watch_config(root / "watch.yaml", scenario, folder, server, log)
    recording, snapshots = root / "watch.jsonl", root / "snapshots.jsonl"
    with server.log_copy(log):
        watch = start_tokenwatch(
            "watch",
            str(config),
            "--headless",
            "--interval",
            "1s",
            "--jsonl",
            str(snapshots),
            "--record",
            str(recording),
        )
        try:
            wait_until(lambda: recorded_until(recording) is not None, "the watch started", PATIENCE_S)
            before = server.generation_tokens()
            sut = subprocess.run(
                sut_argv(scenario, folder, server, capacity_qps),
                capture_output=True,
                text=True,
                timeout=SUT_CEILING_S,
                check=False,
            )
            assert sut.returncode == 0, sut.stderr[-2000:]
            engine_tokens = server.generation_tokens() - before
            metrics_after = server.metrics_text()
            (root / "metrics-after.txt").write_text(metrics_after)  # kept with the run, as a fixture source
            try:
                out, err = watch.communicate(timeout=PATIENCE_S)
                ended_by_itself = True
            except subprocess.TimeoutExpired:
                watch.send_signal(signal.SIGINT)  # a clean stop: the recording and snapshots close
                out, err = watch.communicate(timeout=PATIENCE_S)
                ended_by_itself = False
        finally:
            if watch.poll() is None:
                watch.kill()
                watch.communicate()
    served = json.loads(sut.stdout.strip().splitlines()[-1])
    return EngineRun(
        scenario,
        folder,
        recording,
        snapshots,
        log,
        served,
        engine_tokens,
        metrics_after,
        out,
        err,
        watch.returncode,
        ended_by_itself,
    )
