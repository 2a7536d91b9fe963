"""Attaching to a run in progress: a vLLM log that already holds minutes of lines and keeps
growing. The first snapshot shows what the lines say now (not their backlog spread over the first
seconds), the run's t = 0 is its first line, and the summary equals the lines' own figures over the run."""

from __future__ import annotations

import asyncio
import json
import time
from datetime import timedelta
from pathlib import Path

import numpy as np
import pytest
from live_support import LiveRun, VllmLog, attached_at, live_run, next_second, write_config
from sshd_cluster import LoopbackCluster, missing_binaries

from tokenwatch.base.events import Progress, RunEnded, RunStarted
from tokenwatch.inputs.config import load_watch_config
from tokenwatch.inputs.watch import build_collector

pytestmark = pytest.mark.timeout(120)
GENERATED = Path(__file__).resolve().parent.parent / "data" / "sources" / "loadgen" / "generated"
TRACE = GENERATED / "offline-short" / "mlperf_log_trace.json"

BACKLOG_MIN = 5.0
INTERVAL_S = 10.0  # vLLM V1's VLLM_LOG_STATS_INTERVAL
LIVE_INTERVAL_S = 3.0  # the lines written while watching come faster, to keep the test short
NOW_RATE = 1000.0


def backlog_rate(k: int) -> float:
    return 800.0 if k < 15 else NOW_RATE  # slower in the run's first minutes


def progress_count(run: LiveRun) -> int:
    return sum(isinstance(e, Progress) for e in run.events)


async def append_lines(log: VllmLog, count: int) -> None:
    for _ in range(count):
        log.write(await next_second(LIVE_INTERVAL_S - 1.0), NOW_RATE)


async def test_local_watch_of_a_growing_vllm_log_starts_true_and_covers_the_whole_run(tmp_path: Path) -> None:
    log = VllmLog(tmp_path / "vllm.log")
    log.backlog(BACKLOG_MIN, INTERVAL_S, backlog_rate)
    cfg = tmp_path / "local.yaml"
    cfg.write_text(
        "run: {name: one-box}\ngpu: {source: none}\n"
        f"progress:\n  - {{kind: log, preset: vllm, path: '{log.path}'}}\n"
    )
    config = load_watch_config(cfg)
    run = LiveRun(config, build_collector(config))
    node = run.collector.targets[0].name
    before = time.time()
    async with run:
        await run.wait_for("the history", lambda: (a := attached_at(run)) is not None and run.core.now >= a)
        after = time.time()
        read = progress_count(run)
        await append_lines(log, 1)
        await run.wait_for("the first new line", lambda: progress_count(run) > read)
        first = run.snapshot()
        await append_lines(log, 3)
        await run.wait_for("the new lines", lambda: progress_count(run) >= read + 4)
    start = next(e for e in run.events if isinstance(e, RunStarted))
    # t = 0 is the log's first line (to its stamps' whole seconds), the watch joined 5 minutes in
    assert start.wall_epoch == pytest.approx(log.lines[0][0].timestamp(), abs=1.5)
    # it joined when it started, as long after the log's last line as the start took (on a loaded machine,
    # seconds): between the clock before and after, to the stamps' whole seconds
    first_stamp, attached = log.lines[0][0].timestamp(), float(start.meta["attached_at_s"])
    assert attached >= BACKLOG_MIN * 60 - 1.5
    assert before - first_stamp - 1.5 <= attached <= after - first_stamp + 1.5
    # the first snapshot with a new line: the rate it states (the old reading: the backlog all at once)
    assert first.aggregate.tokens_per_s == pytest.approx(NOW_RATE, rel=0.05)
    # the history is placed where the log says: its first 140 s made 800 tok/s (lines every 10 s from
    # t = 0: between t = 5 and 135 lie exactly 13 of them)
    history = run.core.history()
    done = history.node_tokens_done[:, 0]
    made = float(np.interp(135.0, history.times, done) - np.interp(5.0, history.times, done))
    assert made / 130.0 == pytest.approx(800.0, rel=0.01)
    # the summary: the lines' own figures over the whole run, 5 minutes of backlog included
    summary = run.core.summary()
    (result,) = summary.nodes
    assert result.name == node
    assert result.tokens_per_s == pytest.approx(log.own_rate(), rel=0.01)


@pytest.mark.skipif(missing_binaries() is not None, reason=str(missing_binaries()))
async def test_watch_over_ssh_joins_every_node_s_growing_log_with_its_history(
    healthy: LoopbackCluster, tmp_path: Path
) -> None:
    """The same through real sshd: 8 loopback nodes, each with its own vLLM log minutes long (each node
    at its own rate) and GPUs streaming; read through the backlog command and the remote tail."""
    logs = {n.name: VllmLog(tmp_path / f"{n.name}.log") for n in healthy.nodes}
    now_rates = {n.name: NOW_RATE + 10.0 * n.index for n in healthy.nodes}
    for name, log in logs.items():
        log.backlog(BACKLOG_MIN, INTERVAL_S, lambda k, name=name: 800.0 if k < 15 else now_rates[name])
    extra = f"progress:\n  - {{kind: log, preset: vllm, path: '{tmp_path}/{{name}}.log'}}\n"
    cfg = write_config(tmp_path / "w.yaml", healthy, extra=extra)
    async with live_run(cfg) as run:
        await run.wait_for("the history", lambda: (a := attached_at(run)) is not None and run.core.now >= a)
        read = progress_count(run)
        await asyncio.gather(*(append_lines(log, 1) for log in logs.values()))
        await run.wait_for("every node's first new line", lambda: progress_count(run) >= read + len(logs))
        first = run.snapshot()
        await asyncio.gather(*(append_lines(log, 2) for log in logs.values()))
        await run.wait_for("the new lines", lambda: progress_count(run) >= read + 3 * len(logs))
    assert first.aggregate.tokens_per_s == pytest.approx(sum(now_rates.values()), rel=0.05)
    start = next(e for e in run.events if isinstance(e, RunStarted))
    earliest = min(log.lines[0][0] for log in logs.values())
    assert start.wall_epoch == pytest.approx(earliest.timestamp(), abs=1.5)
    summary = run.core.summary()
    for result in summary.nodes:
        assert result.tokens_per_s == pytest.approx(logs[result.name].own_rate(), rel=0.01)
    assert summary.tokens_per_s == pytest.approx(sum(log.own_rate() for log in logs.values()), rel=0.01)


async def test_bad_lines_across_the_attach_are_warnings_never_spikes(tmp_path: Path) -> None:
    """An unknown vLLM line form, a clock that goes back an hour (in the backlog), an engine never seen
    before and a second process writing the same log (live): each a warning or a stream of its own, the
    line skipped or counted once; no 10-s window ever reads above what the writers state."""
    log = VllmLog(tmp_path / "vllm.log")
    log.backlog(2.0, INTERVAL_S, lambda _k: NOW_RATE)
    then = log.lines[-1][0]
    log.write_raw(  # a form the preset does not know (another version?): skipped with a warning
        f"(APIServer pid=4242) INFO {then:%m-%d %H:%M:%S} [loggers.py:123] Engine 000: Avg prompt "
        "throughput: 0.0 tok/s, Avg generation throughput: 99999.0 tok/s\n"
    )
    log.write(then - timedelta(hours=1), 99999.0, engine=0)  # the clock went back an hour
    log.lines.pop()
    cfg = tmp_path / "local.yaml"
    cfg.write_text(
        "run: {name: one-box}\ngpu: {source: none}\n"
        f"progress:\n  - {{kind: log, preset: vllm, path: '{log.path}'}}\n"
    )
    config = load_watch_config(cfg)
    run = LiveRun(config, build_collector(config))
    node = run.collector.targets[0].name
    async with run:
        await run.wait_for("the history", lambda: (a := attached_at(run)) is not None and run.core.now >= a)
        read = progress_count(run)
        for k in range(4):
            stamp = await next_second(LIVE_INTERVAL_S - 1.0)
            log.write(stamp, NOW_RATE)
            log.write(
                stamp, 500.0 if k else 99999.0, engine=1
            )  # a new engine: its first line starts its clock
            log.write(stamp, 800.0, pid=5151)  # a second server process writing the same file
        await run.wait_for("the new lines", lambda: progress_count(run) >= read + 4)
    start = next(e for e in run.events if isinstance(e, RunStarted))
    assert start.wall_epoch == pytest.approx(log.lines[0][0].timestamp(), abs=1.5)  # not an hour before
    messages = [n.message for n in run.notices(node)]
    assert any("a form no pattern of this preset reads" in m for m in messages)
    assert any("clock went back" in m for m in messages)
    assert any("new writer 'APIServer pid=4242 Engine 001'" in m for m in messages)
    assert not any("parser failed" in m for m in messages)
    history = run.core.history()
    done = history.node_tokens_done[:, 0]
    stated_max = NOW_RATE + 500.0 + 800.0  # the most the writers ever state at once
    for k in range(10, len(done)):
        window = history.times[k] - history.times[k - 10]
        assert (done[k] - done[k - 10]) / window <= stated_max * 1.25, history.times[k]
    assert run.state(node) != "down"


async def test_attaching_to_a_finished_loadgen_trace_places_its_run_and_ends(tmp_path: Path) -> None:
    """A real LoadGen 6.0.17 trace (tests/data/sources/loadgen/generated) already written to its end: its
    samples are placed on LoadGen's own clock, t = 0 is LoadGen's start, and the watch ends by itself."""
    trace = tmp_path / "mlperf_log_trace.json"
    trace.write_bytes(TRACE.read_bytes())
    cfg = tmp_path / "local.yaml"
    cfg.write_text(
        "run: {name: one-box}\ngpu: {source: none}\n"
        f"progress:\n  - {{kind: loadgen-trace, path: '{trace}'}}\n"
    )
    config = load_watch_config(cfg)
    run = LiveRun(config, build_collector(config))
    async with run:
        await run.wait_for("the run's end", lambda: any(isinstance(e, RunEnded) for e in run.events))
    completions = [
        json.loads(line.rstrip(b","))
        for line in TRACE.read_bytes().splitlines()
        if line.startswith(b'{"name":"Sample"') and b'"ph":"b"' in line
    ]
    first_ts = json.loads(TRACE.read_bytes().splitlines()[1].rstrip(b","))["ts"]
    last = max(c["ts"] + c["args"]["complete_ns"] / 1e3 for c in completions)
    start = next(e for e in run.events if isinstance(e, RunStarted))
    assert start.meta["t0"] == f"trace of {run.collector.targets[0].name}"
    assert start.meta["attached_at_s"] == pytest.approx((last - first_ts) / 1e6, abs=0.5)  # plus the wait
    progress = [e for e in run.events if isinstance(e, Progress)]
    assert progress[-1].samples_done == len(completions)
    assert all(e.t <= start.meta["attached_at_s"] for e in progress)  # history, not live
    assert next(e for e in run.events if isinstance(e, RunEnded)).reason == "every node finished"
