"""A watch attached to the real vLLM server a minute into a run in progress: no stale spell, and the idle
server shown idle.

The engine (tests/engine: vLLM on this machine's CPU) serves a steady stream of completions; vLLM writes
its stats line every 10 s while requests run and nothing while none does. A minute in, two watches join:
one reads the server's log alone (its cadence learnt from the minute of history before the live tail
starts), one its log and its ``/metrics``. While the load runs both nodes are up at every look; once the
load stops, both are idle, never stale: the server still answers. A moment's empty queue while the load
runs (its clients share a loaded machine) is not idle: the engine must read empty, its counters
still, for its idle hold.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from tests.conftest import PATIENCE_S
from tests.engine.vllm_server import MAX_NUM_SEQS, VllmServer
from tests.machine_share import machine_to_itself
from tokenwatch.base.events import NodeStatus, Progress, RunStarted
from tokenwatch.core import RackCore
from tokenwatch.core.config import STATE_CODE
from tokenwatch.inputs.config import load_watch_config
from tokenwatch.inputs.watch import build_collector, core_config
from tokenwatch.session import Session

pytestmark = [pytest.mark.xdist_group("vllm-engine"), pytest.mark.timeout(1800)]

HISTORY_S = 60.0  # the watch joins at minute 1
LIVE_S = 35.0  # three or four stats lines while watched
STATS_LINE = b"Avg generation throughput"
CHECKOUT = Path(__file__).resolve().parents[2]


class Load:
    """MAX_NUM_SEQS clients streaming completions until stopped, in a process of their own
    (tests/engine/steady_load.py says why)."""

    def __init__(self, server: VllmServer) -> None:
        self.argv = [sys.executable, "-m", "tests.engine.steady_load", server.url, server.model]
        self.argv.append(str(MAX_NUM_SEQS))
        self.errors: list[str] = []
        self.process: subprocess.Popen[str] | None = None

    def __enter__(self) -> Load:
        self.process = subprocess.Popen(
            self.argv,
            cwd=CHECKOUT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        return self

    def __exit__(self, *exc: object) -> None:
        self.finish()

    def finish(self) -> None:
        """Stop the clients once their answers in flight are in, and collect the errors they met."""
        process, self.process = self.process, None
        if process is None:
            return
        out, err = process.communicate("", timeout=PATIENCE_S)
        if process.returncode != 0:
            self.errors.append(f"the load exited {process.returncode}: {err[-2000:]}")
        else:
            self.errors.extend(json.loads(out.strip().splitlines()[-1])["errors"])


class Watch:
    """One in-process ``watch`` of the local node, its states counted at every look."""

    def __init__(self, path: Path, text: str) -> None:
        path.write_text(text)
        config = load_watch_config(path)
        self.collector = build_collector(config)
        self.core = RackCore(core_config(config))
        self.session = Session(self.core, [self.collector])
        self.events: list[object] = []
        self.session.on_event(self.events.append)
        self.seen: Counter[str] = Counter()
        self.task: asyncio.Task[None] | None = None

    @property
    def node(self) -> str:
        return self.collector.targets[0].name

    def state(self) -> str:
        snap = self.core.snapshot()
        return snap.nodes.state[snap.nodes.index(self.node)]

    def attached(self) -> float | None:
        start = next((e for e in self.events if isinstance(e, RunStarted)), None)
        return None if start is None else float(start.meta["attached_at_s"])

    def look(self) -> None:
        self.seen[self.state()] += 1

    async def stop(self) -> None:
        assert self.task is not None
        self.session.stop()
        await asyncio.wait_for(self.task, PATIENCE_S)


async def wait_for(what: str, predicate: object, within_s: float, watches: list[Watch]) -> None:
    deadline = time.monotonic() + within_s
    while not predicate():  # type: ignore[operator]
        for watch in watches:
            assert watch.task is not None
            if watch.task.done():
                watch.task.result()
                raise AssertionError(f"a watch ended while waiting for {what}")
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {within_s:g} s waiting for {what}")
        await asyncio.sleep(0.2)  # the poll interval


async def test_attached_a_minute_in_no_stale_spell_and_the_idle_server_idle(
    vllm_server: VllmServer, tmp_path: Path
) -> None:
    log = tmp_path / "vllm-run.log"
    # The watches' staleness is timed against the engine's pace: the other workers' tests wait.
    with machine_to_itself(), vllm_server.log_copy(log), Load(vllm_server) as load:
        began = time.monotonic()
        await wait_for(  # the run goes on: a minute of it, and its stats lines, before the watches join
            "a minute of the run",
            lambda: time.monotonic() - began >= HISTORY_S and log.read_bytes().count(STATS_LINE) >= 3,
            HISTORY_S + 600.0,
            [],
        )
        head = "run: {name: vllm-attach}\nnodes: {gpus_per_node: 1}\ngpu: {source: none}\n"
        watches = [
            Watch(
                tmp_path / "log.yaml", head + f"progress:\n  - {{kind: log, preset: vllm, path: '{log}'}}\n"
            ),
            # Its /metrics is read every second; on this 2-core machine shared with the rest of the suite
            # the engine has left it unanswered for over 5 s (a true stale spell, which is not what this
            # test is about: a false one made by the attach is), so this watch allows 15 s of silence.
            Watch(
                tmp_path / "metrics.yaml",
                head + "alerts: {stale_after: 15s}\nprogress:\n"
                f"  - {{kind: prometheus, url: '{vllm_server.url}/metrics', preset: vllm, interval: 1s}}\n"
                f"  - {{kind: log, path: '{log}', preset: vllm}}\n",
            ),
        ]
        for watch in watches:
            watch.task = asyncio.create_task(watch.session.run())
        await wait_for(
            "the history",
            lambda: all((a := w.attached()) is not None and w.core.now >= a for w in watches),
            PATIENCE_S,
            watches,
        )
        live_from = time.monotonic()
        while time.monotonic() - live_from < LIVE_S:
            for watch in watches:
                watch.look()
            await asyncio.sleep(0.1)  # a look ten times a second, far more often than a dashboard's
        # Off the loop: stopping the clients waits out their last answers (seconds each on a loaded CPU
        # engine); a wait on the loop kept the watches from reading for 15 s, a stale spell the test made.
        await asyncio.to_thread(load.finish)
        assert load.errors == []
        # the server has nothing to do: it logs nothing more, its /metrics still answers
        await wait_for("both idle", lambda: all(w.state() == "idle" for w in watches), 120.0, watches)
        for watch in watches:
            await watch.stop()
    log_only, with_metrics = watches
    for watch in watches:
        assert set(watch.seen) == {"up"}, (watch.node, watch.seen)
        assert not [e for e in watch.events if isinstance(e, NodeStatus) and e.state == "stale"]
        attach = watch.attached()
        assert attach is not None
        # t = 0 is the log's first stats line, written up to one interval (10 s) into the load
        assert attach >= HISTORY_S - 12.0
        history = watch.core.history()
        assert STATE_CODE["stale"] not in history.node_state[history.times >= attach]
    # The log-only watch learnt the log's own cadence from its history: vLLM's lines, 10 s apart, not
    # the 5-s default. The last five gaps' median is taken as the lines arrive: on the loaded machine
    # it has been 8.7 s (a limit of 26 s), so the bound allows 7 s (a limit of 21 s, 4x the default's).
    assert float(log_only.core.state.stale_limit_s[0]) >= 3 * 7.0
    # the history was read: tokens from the log's first line on, not from the attach
    first = min(e.t for e in log_only.events if isinstance(e, Progress) and e.tokens_done)
    assert first < HISTORY_S / 2
    assert with_metrics.core.snapshot().nodes.state == ("idle",)
