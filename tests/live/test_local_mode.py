"""Local mode (no ``nodes``): this machine is the node. Its LoadGen trace is tailed while the real
LoadGen writes it, its log through rotation and truncation, and nvidia-smi runs as a local process."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from live_support import (
    VLLM_STEP,
    LiveRun,
    MetricsServer,
    expected_node_power_w,
    gpu_rows,
    scraped_tokens,
)
from sshd_cluster import FAKE_NVIDIA_SMI

from tests.conftest import PATIENCE_S, REPO_ROOT, recorded_until, start_tokenwatch, wait_until
from tokenwatch.base.events import LatencyBatch, NodeStatus, Progress, RunEnded, RunStarted
from tokenwatch.inputs.config import load_watch_config
from tokenwatch.inputs.live.supervisor import LiveOptions
from tokenwatch.inputs.watch import build_collector
from tokenwatch.recording import read_events

FAKE_SUT = REPO_ROOT / "tests" / "sources" / "fake_sut.py"
needs_loadgen = pytest.mark.skipif(
    importlib.util.find_spec("mlperf_loadgen") is None or not FAKE_SUT.exists(),
    reason="mlperf_loadgen not installed (pip install mlcommons-loadgen)",
)
pytestmark = pytest.mark.timeout(120)


@needs_loadgen
def test_watch_tails_the_trace_while_loadgen_writes_it_and_ends_when_it_finishes(tmp_path: Path) -> None:
    outdir = tmp_path / "loadgen out"  # created by the SUT later: the tail waits for the file
    cfg = tmp_path / "local.yaml"
    cfg.write_text(
        "run: {name: one-box, scenario: Offline}\n"
        "nodes: {gpus_per_node: 1}\n"
        "gpu: {source: none}\n"
        f"progress:\n  - {{kind: loadgen-trace, path: '{outdir}/mlperf_log_trace.json'}}\n"
    )
    rec = tmp_path / "rec.jsonl"
    watch = start_tokenwatch("watch", str(cfg), "--headless", "--interval", "1s", "--record", str(rec))
    try:
        wait_until(
            lambda: recorded_until(rec) is not None, "the watch started (tailing before LoadGen writes)"
        )
        sut = subprocess.run(
            [
                sys.executable,
                str(FAKE_SUT),
                "--scenario",
                "Offline",
                "--outdir",
                str(outdir),
                "--min-duration-ms",
                "4000",
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert sut.returncode == 0, sut.stderr
        out, err = watch.communicate(timeout=PATIENCE_S)  # no --stop-after: it ends when the node finished
    finally:
        if watch.poll() is None:
            watch.kill()
    assert watch.returncode == 0, err
    served = json.loads(sut.stdout.strip().splitlines()[-1])
    events, warnings = read_events(rec)
    assert warnings == []
    start = events[0]
    assert isinstance(start, RunStarted)
    assert len(start.nodes) == 1
    end = events[-1]
    assert isinstance(end, RunEnded)
    assert end.reason == "every node finished"
    progress = [e for e in events if isinstance(e, Progress)]
    assert progress[-1].samples_done == served["samples"]  # LoadGen's own count, as the SUT saw it
    e2e = sum(len(e.values_s) for e in events if isinstance(e, LatencyBatch) and e.metric == "e2e")
    assert e2e == served["samples"]
    # read while it was written: several reads spread over the run, not one at the end
    assert len({p.t for p in progress}) >= 3
    assert progress[-1].t - progress[0].t > 2.0
    assert any(isinstance(e, NodeStatus) and e.state == "finished" for e in events)
    assert "Total aggregate" in out


async def test_local_log_rotation_and_truncation_count_each_line_once(tmp_path: Path) -> None:
    log = tmp_path / "harness.log"
    cfg = tmp_path / "local.yaml"
    cfg.write_text(
        "run: {name: one-box}\ngpu: {source: none}\n"
        f"progress:\n  - kind: log\n    path: '{log}'\n"
        "    patterns: {done: 'done (?P<samples_done>\\d+) samples (?P<tokens_done>\\d+) tokens'}\n"
    )
    config = load_watch_config(cfg)
    collector = build_collector(config, options=LiveOptions())
    run = LiveRun(config, collector)
    node = collector.targets[0].name

    def tokens() -> int:
        snap = run.snapshot()
        return int(snap.nodes.tokens_done[snap.nodes.index(node)]) if run.core.started else -1

    async with run:
        await run.wait_for("the watch to start", lambda: run.core.started)  # what is there before: history
        log.write_text("done 1 samples 100 tokens\ndone 2 samples 200 tokens\n")
        await run.wait_for("first file", lambda: tokens() == 200)
        log.rename(tmp_path / "harness.log.1")  # rotated: the harness starts counting again
        log.write_text("done 1 samples 50 tokens\n")
        await run.wait_for("after rotation", lambda: tokens() == 250)
        with open(log, "a") as fh:
            fh.write("done 2 samples 120 tokens\n")
        await run.wait_for("appended", lambda: tokens() == 320)
        log.write_text("done 1 samples 7 tokens\n")  # truncated in place and rewritten
        await run.wait_for("after truncation", lambda: tokens() == 327)
    assert tokens() == 200 + 120 + 7


async def test_local_endpoints_events_are_tailed_as_the_harness_writes_them(tmp_path: Path) -> None:
    """kind endpoints-events: the MLCommons endpoints harness's events.jsonl (written here in its format,
    see tests/sources/test_endpoints_events.py) is tailed like a LoadGen trace, and the node is finished
    at session.ended."""
    from tests.sources.test_endpoints_events import make_run

    events_file = tmp_path / "events.jsonl"
    cfg = tmp_path / "local.yaml"
    cfg.write_text(
        "run: {name: one-box}\ngpu: {source: none}\n"
        f"progress:\n  - {{kind: endpoints-events, path: '{events_file}', tokens_per_sample: 100}}\n"
    )
    config = load_watch_config(cfg)
    run = LiveRun(config, build_collector(config, options=LiveOptions()))
    lines = make_run(samples=30).lines
    half = len(lines) // 2
    first_half = sum('"sample.complete"' in line for line in lines[:half])

    def samples() -> list[int | None]:
        return [e.samples_done for e in run.events if isinstance(e, Progress)]

    async with run:
        await run.wait_for("the watch to start", lambda: run.core.started)
        events_file.write_text("".join(lines[:half]))
        await run.wait_for("the first half", lambda: bool(samples()) and samples()[-1] == first_half)
        assert 0 < first_half < 30
        with open(events_file, "a") as fh:
            fh.write("".join(lines[half:]))
        await run.wait_for(
            "session.ended",
            lambda: any(isinstance(e, NodeStatus) and e.state == "finished" for e in run.events),
        )
    progress = [e for e in run.events if isinstance(e, Progress)]
    assert progress[-1].samples_done == 30
    assert progress[-1].tokens_done == 3000
    assert sum(len(e.values_s) for e in run.events if isinstance(e, LatencyBatch) and e.metric == "e2e") == 30


async def test_local_nvidia_smi_runs_as_a_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "nvidia-smi").symlink_to(FAKE_NVIDIA_SMI)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_NVSMI_NODE", "2")
    monkeypatch.setenv("FAKE_NVSMI_GPUS", "8")
    cfg = tmp_path / "local.yaml"
    cfg.write_text("run: {name: one-box}\ngpu: {source: nvidia-smi, interval: 200ms}\n")
    config = load_watch_config(cfg)
    collector = build_collector(config)
    assert collector.gpus_per_node == 8  # counted with `nvidia-smi -L` before the run starts
    run = LiveRun(config, collector)
    async with run:
        await run.wait_for("8 GPUs", lambda: {r.gpu for r in gpu_rows(run.events)} == set(range(8)))
        snap = run.snapshot()
    assert snap.aggregate.power_w == pytest.approx(expected_node_power_w(2, gpus=8))


async def test_local_metrics_url_is_scraped_directly(tmp_path: Path) -> None:
    server = MetricsServer()
    try:
        cfg = tmp_path / "local.yaml"
        cfg.write_text(
            "run: {name: one-box}\ngpu: {source: none}\n"
            f"progress:\n  - {{kind: prometheus, url: 'http://127.0.0.1:{server.port}/{{name}}/vllm', "
            "preset: vllm, interval: 200ms}\n"
        )
        config = load_watch_config(cfg)
        run = LiveRun(config, build_collector(config))
        node = run.collector.targets[0].name
        async with run:
            await run.wait_for("three scrapes", lambda: len(scraped_tokens(run.events, node)) >= 3)
        credited = scraped_tokens(run.events, node)
        assert credited[0] == 0  # the first scrape is the baseline
        # (a scrape that timed out under load was served but not read: the next credits both steps)
        assert credited == sorted(credited)
        assert all(c % VLLM_STEP == 0 for c in credited)
        assert credited[-1] > 0
        assert server.hits[f"/{node}/vllm"] >= 1  # {name} expanded to this machine's node name
    finally:
        server.close()
