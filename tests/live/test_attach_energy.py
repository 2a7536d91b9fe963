"""Attaching mid-run gives true energy figures: real sshd nodes, each with its vLLM server's log a minute
long and still growing, and GPUs streaming (nvidia-smi has no history: their energy starts at the attach).
Tokens per joule and mean power divide the tokens and time of the window the energy covers, and the
summary says from when; the log's history still gives the whole run's tokens/s."""

from __future__ import annotations

import re
import threading
import time
from datetime import datetime
from pathlib import Path

import pytest
from live_support import VllmLog, attached_at, expected_node_power_w, live_run, needs_sshd, write_config
from sshd_cluster import LoopbackCluster

from tokenwatch.base.events import GpuBatch, Progress
from tokenwatch.core.summary import rack_table_rows

pytestmark = pytest.mark.timeout(300)

BACKLOG_MIN = 1.0  # the watch joins at minute 1 of the run
BACKLOG_INTERVAL_S = 10.0  # vLLM V1's stats interval
# Live, the servers log every second: a rate line credits its interval when it arrives. The energy's
# window runs from one read of a node's log to another, so its tokens are whole lines and its time the
# same lines' spacing, whichever side of a tick the lines land (the run's clock is anchored on the log's
# own write times, so they land within milliseconds of one): well within TOLERANCE over LIVE_S seconds.
LIVE_S = 70.0
GPUS = 4
TOLERANCE = 0.02


def node_rate(index: int) -> float:
    return 1000.0 + 25.0 * index


class LineWriter:
    """The servers keep logging: every node's line each second, from a thread (the watch's event loop
    does not delay it), until stopped."""

    def __init__(self, logs: dict[str, VllmLog], rates: dict[str, float]) -> None:
        self.logs, self.rates = logs, rates
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._write, daemon=True)

    def _write(self) -> None:
        while not self.stop.is_set():
            time.sleep(1.0 - time.time() % 1.0 + 0.01)  # on to the start of the next second
            stamp = datetime.now().astimezone()
            for name, log in self.logs.items():
                log.write(stamp, self.rates[name])

    def __enter__(self) -> LineWriter:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()


@needs_sshd
async def test_energy_after_an_attach_covers_the_same_window_as_the_tokens(
    healthy: LoopbackCluster, tmp_path: Path
) -> None:
    rates = {n.name: node_rate(n.index) for n in healthy.nodes}
    power = {n.name: expected_node_power_w(n.index, GPUS) for n in healthy.nodes}
    logs = {n.name: VllmLog(tmp_path / f"{n.name}.log") for n in healthy.nodes}
    for name, log in logs.items():
        log.backlog(BACKLOG_MIN, BACKLOG_INTERVAL_S, lambda _k, name=name: rates[name])
    extra = f"progress:\n  - {{kind: log, preset: vllm, path: '{tmp_path}/{{name}}.log'}}\n"
    cfg = write_config(tmp_path / "w.yaml", healthy, extra=extra)
    with LineWriter(logs, rates):
        async with live_run(cfg) as run:
            await run.wait_for(
                "the history", lambda: (a := attached_at(run)) is not None and run.core.now >= a
            )
            await run.wait_for(
                "every node's GPUs",
                lambda: len({e.node_index[0] for e in run.events if isinstance(e, GpuBatch)}) == len(logs),
            )
            # and every node's first live read, the lines written while the watch started: the energy's
            # window opens at it
            joined = attached_at(run)
            assert joined is not None
            await run.wait_for(
                "every node's first live line",
                lambda: {e.node for e in run.events if isinstance(e, Progress) and e.t > joined} == set(logs),
            )
            began = run.core.now
            await run.wait_for("the live minute", lambda: run.core.now >= began + LIVE_S, LIVE_S + 120.0)
            snap = run.snapshot()
    attach = attached_at(run)
    assert attach is not None
    assert attach >= BACKLOG_MIN * 60 - 1.5
    # the history was read: the run's tokens begin with the log's first line, not at the attach
    first = min(e.t for e in run.events if isinstance(e, Progress) and e.tokens_done)
    assert first < attach - 30.0
    # each node: the tokens of its energy's window over that energy: its rate over its GPUs' power
    for i, name in enumerate(snap.nodes.names):
        assert snap.nodes.tokens_per_joule[i] == pytest.approx(rates[name] / power[name], rel=TOLERANCE), name
    summary = run.core.summary()
    assert summary.power_mean_w == pytest.approx(sum(power.values()), rel=TOLERANCE)
    assert summary.tokens_per_joule == pytest.approx(sum(rates.values()) / sum(power.values()), rel=TOLERANCE)
    # said with the figures: from when they hold (the first GPU readings, a few seconds after the attach)
    assert summary.energy_since_s is not None
    assert attach - 1.0 <= summary.energy_since_s <= began
    rows = dict(rack_table_rows(summary))
    said = re.fullmatch(r"from (\d\d):(\d\d) \(GPU readings began\)", rows["Power figures cover"])
    assert said is not None, rows["Power figures cover"]
    minutes, seconds = int(said[1]), int(said[2])
    assert attach - 2.0 <= 60 * minutes + seconds <= began  # the clock's whole seconds
    # the node figures still cover the whole run: the history at its rate, and the live lines at theirs
    for result in summary.nodes:
        assert result.tokens_per_s == pytest.approx(rates[result.name], rel=TOLERANCE)
