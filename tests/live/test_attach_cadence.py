"""Attaching to a vLLM server that logs every few seconds: the node's cadence is its lines', learnt from
the log's own history before the live tail starts, so the node is never stale (nor idle) between two
lines; once the engine stops logging (vLLM writes nothing while it has no request) with the log still
read, the node is idle, never stale. The same for a log read over SSH."""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path

import pytest
from live_support import LiveRun, VllmLog, attached_at, needs_sshd, next_second, write_config
from sshd_cluster import LoopbackCluster

from tokenwatch.base.events import NODE_STATES, NodeStatus, Progress, RunStarted
from tokenwatch.core.config import STATE_CODE
from tokenwatch.inputs.config import load_watch_config
from tokenwatch.inputs.live.supervisor import LiveOptions
from tokenwatch.inputs.watch import build_collector

pytestmark = pytest.mark.timeout(180)

INTERVAL_S = 4.0  # the server's stats interval (vLLM's default is 10 s; shorter keeps the test short)
STALE_AFTER = "1s"  # shorter than the interval: only the learnt cadence keeps the node from going stale
LIVE_LINES = 5
RATE = 1000.0


def progress_count(run: LiveRun) -> int:
    return sum(isinstance(e, Progress) for e in run.events)


class StateWatch:
    """Polls the node's state as the dashboard reads it (a snapshot) every 50 ms, counting each state."""

    def __init__(self, run: LiveRun, nodes: list[str]) -> None:
        self.run, self.nodes = run, nodes
        self.seen: Counter[str] = Counter()
        self.task: asyncio.Task[None] | None = None

    async def _poll(self) -> None:
        while True:
            snap = self.run.snapshot()
            for node in self.nodes:
                self.seen[snap.nodes.state[snap.nodes.index(node)]] += 1
            await asyncio.sleep(0.05)  # the poll interval

    def __enter__(self) -> StateWatch:
        self.task = asyncio.create_task(self._poll())
        return self

    def __exit__(self, *exc: object) -> None:
        assert self.task is not None
        self.task.cancel()


def local_config(tmp_path: Path, log: VllmLog) -> Path:
    cfg = tmp_path / "local.yaml"
    cfg.write_text(
        "run: {name: one-box}\ngpu: {source: none}\n"
        f"alerts: {{stale_after: {STALE_AFTER}}}\n"
        f"progress:\n  - {{kind: log, preset: vllm, path: '{log.path}'}}\n"
    )
    return cfg


async def write_lines(logs: list[VllmLog], count: int) -> None:
    for _ in range(count):
        stamp = await next_second(INTERVAL_S - 1.0)
        for log in logs:
            log.write(stamp, RATE)


def states_in_history(run: LiveRun, column: int, since: float) -> set[str]:
    history = run.core.history()
    codes = history.node_state[history.times >= since, column]
    return {NODE_STATES[int(c)] for c in codes}


async def test_a_node_attached_mid_run_keeps_its_log_s_cadence_and_idles_when_the_log_is_quiet(
    tmp_path: Path,
) -> None:
    log = VllmLog(tmp_path / "vllm.log")
    log.backlog(1.0, INTERVAL_S, lambda _k: RATE)  # the watch joins a minute into the run
    config = load_watch_config(local_config(tmp_path, log))
    run = LiveRun(config, build_collector(config))
    node = run.collector.targets[0].name
    async with run:
        await run.wait_for("the history", lambda: (a := attached_at(run)) is not None and run.core.now >= a)
        attach = attached_at(run)
        assert attach is not None
        # learnt from the history's lines before any live one: 3 x the interval, not 3 x a second
        limit = float(run.core.state.stale_limit_s[0])
        assert limit == pytest.approx(3 * INTERVAL_S, abs=1.0)
        read = progress_count(run)
        with StateWatch(run, [node]) as watch:
            await write_lines([log], LIVE_LINES)
            await run.wait_for("the new lines", lambda: progress_count(run) >= read + LIVE_LINES)
        assert set(watch.seen) == {"up"}, watch.seen
        last_line = run.core.now
        # the engine has nothing to do: it writes no more lines; the log is still read, so the node idles
        await run.wait_for("the node idle", lambda: run.state(node) == "idle", within_s=3 * limit + 30)
    assert states_in_history(run, 0, attach) <= {"up", "idle"}
    assert "stale" not in states_in_history(run, 0, last_line)
    assert not [e for e in run.events if isinstance(e, NodeStatus) and e.state == "stale"]
    start = next(e for e in run.events if isinstance(e, RunStarted))
    assert start.meta["sources_vouched"] == [node]


@needs_sshd
async def test_nodes_attached_over_ssh_keep_their_logs_cadence(
    healthy: LoopbackCluster, tmp_path: Path
) -> None:
    """The loopback nodes, each reading its server's log through sshd (no GPU stream: the log is all
    that speaks for the node), attached a minute into the run."""
    logs = {n.name: VllmLog(tmp_path / f"{n.name}.log") for n in healthy.nodes}
    for log in logs.values():
        log.backlog(1.0, INTERVAL_S, lambda _k: RATE)
    extra = f"progress:\n  - {{kind: log, preset: vllm, path: '{tmp_path}/{{name}}.log'}}\n"
    cfg = write_config(tmp_path / "w.yaml", healthy, extra=extra, stale_after=STALE_AFTER)
    gpu_block = "gpu:\n  source: nvidia-smi\n  interval: 200ms\n"
    assert gpu_block in cfg.read_text()
    cfg.write_text(cfg.read_text().replace(gpu_block, "gpu:\n  source: none\n"))
    config = load_watch_config(cfg)
    options = LiveOptions(backoff_base_s=0.2, backoff_cap_s=1.0)
    run = LiveRun(config, build_collector(config, options=options))
    names = list(logs)
    async with run:
        await run.wait_for("the history", lambda: (a := attached_at(run)) is not None and run.core.now >= a)
        await run.wait_for("every node connected", lambda: all(run.statuses(n) for n in names))
        read = progress_count(run)
        with StateWatch(run, names) as watch:
            await write_lines(list(logs.values()), LIVE_LINES)
            await run.wait_for("the new lines", lambda: progress_count(run) >= read + LIVE_LINES * len(names))
        assert set(watch.seen) == {"up"}, watch.seen
        await run.wait_for("every node idle", lambda: all(run.state(n) == "idle" for n in names), 90.0)
    assert STATE_CODE["stale"] not in run.core.history().node_state
