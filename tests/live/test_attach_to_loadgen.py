"""A watch started after the real LoadGen began (the common case: attaching to a run under way), Server and
Offline: the detail log is read from its first byte (LoadGen's settings and plan, written before the watch
began, reach the verdict and keep their own time), the node is finished when LoadGen writes its result, the
watch ends by itself, and the run's verdict and figure are LoadGen's own."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from tests.conftest import PATIENCE_S, REPO_ROOT, RunCli, cli_env, wait_until
from tests.mlperf.live_runs import TOKENS_PER_SAMPLE, TailedRun
from tests.sources.conftest import FAKE_SUT, needs_loadgen
from tokenwatch.base.events import LoadGenDetail, RunEnded, RunStarted
from tokenwatch.recording import read_events

pytestmark = [needs_loadgen, pytest.mark.timeout(300)]

RUNS = {
    # 2,000 queries over 10 s at 200 queries/s, every first token in time: VALID
    "Server": [
        *["--scenario", "Server", "--workers", "16", "--tokens-per-s", "4000", "--target-qps", "200"],
        *["--min-duration-ms", "10000", "--min-queries", "100"],
    ],
    # 1.1 x 10 s x 250 expected samples/s = 2,750 samples at ~250 samples/s: ~11 s, VALID
    "Offline": [
        *["--scenario", "Offline", "--tokens-per-s", "3000", "--expected-qps", "250"],
        "--min-duration-ms",
        "10000",
    ],
}


def watch_config(path: Path, folder: Path, scenario: str) -> Path:
    path.write_text(
        f"""run:
  name: fake-sut
  scenario: {scenario}
gpu:
  source: none
progress:
  - kind: loadgen-trace
    path: {folder}/mlperf_log_trace.json
    tokens_per_sample: {TOKENS_PER_SAMPLE}
  - kind: loadgen-detail
    path: {folder}/mlperf_log_detail.txt
"""
    )
    return path


def plan_written(folder: Path) -> bool:
    detail = folder / "mlperf_log_detail.txt"
    trace = folder / "mlperf_log_trace.json"
    return (
        detail.exists()
        and b'"generated_query_duration"' in detail.read_bytes()
        and trace.exists()
        and trace.read_bytes().count(b'{"name":"Sample"') >= 20
    )


@pytest.mark.parametrize("scenario", list(RUNS))
def test_a_watch_started_after_loadgen_began_reads_its_settings_and_ends_with_its_result(
    tmp_path: Path, run_cli: RunCli, scenario: str
) -> None:
    folder = tmp_path / "run"
    loadgen = subprocess.Popen(
        [sys.executable, str(FAKE_SUT), "--outdir", str(folder), *RUNS[scenario]],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    watch: subprocess.Popen[str] | None = None
    try:
        wait_until(lambda: plan_written(folder), "LoadGen wrote its plan and its first samples")
        recording = tmp_path / "watch.jsonl"
        # No --stop-after: the watch ends when LoadGen has written its result.
        watch = subprocess.Popen(
            [
                *[sys.executable, "-m", "tokenwatch", "watch"],
                str(watch_config(tmp_path / "watch.yaml", folder, scenario)),
                *["--headless", "--interval", "1s", "--record", str(recording)],
            ],
            cwd=REPO_ROOT,
            env=cli_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        _, err = loadgen.communicate(timeout=2 * PATIENCE_S)
        assert loadgen.returncode == 0, err[-2000:]
        out, err = watch.communicate(timeout=2 * PATIENCE_S)
    finally:
        for proc in (loadgen, watch):
            if proc is not None and proc.poll() is None:
                proc.kill()
    assert watch.returncode == 0, err
    run = TailedRun("fake-sut", scenario, folder)
    loadgen_valid = run.detail()["result_validity"] == "VALID"
    assert loadgen_valid  # the setup, as LoadGen judged it
    events, _ = read_events(recording)
    start = next(e for e in events if isinstance(e, RunStarted))
    attached = float(start.meta["attached_at_s"])
    assert attached > 0  # it joined a run under way
    plan = next(e for e in events if isinstance(e, LoadGenDetail) and "generated_query_count" in e.values)
    assert plan.t < attached  # written before the watch began, placed at its own time
    (ended,) = [e for e in events if isinstance(e, RunEnded)]
    assert ended.reason == "every node finished"
    assert "FINAL VALID" in out
    verdict = orjson.loads(run_cli("summarize", str(recording), "--json").stdout)["verdict"]
    assert verdict["judged_by"] == "LoadGen"
    assert verdict["valid"] is True
    assert verdict["result_lines"] == run.result_lines()
    key = "result_tokens_per_second" if scenario == "Offline" else "result_completed_tokens_per_second"
    assert verdict["tokens_per_s"] == pytest.approx(run.detail()[key], rel=1e-9)  # LoadGen's, exactly
