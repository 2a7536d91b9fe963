"""The live run: one collector that starts the run, runs every node, keeps time, and ends it.

Before anything is emitted, every node reads what its files already hold and every rack-wide source
that keeps history is asked when the run began (:mod:`tokenwatch.inputs.live.history`). t = 0 is the run's own
start where a source knows it (the first line of a log, LoadGen's start in its trace), else the moment
the watch started; ``RunStarted`` says so (``meta``: ``attached_at_s``, ``t0``). The history follows in
time order, then live data: a ``Heartbeat`` every second so the core notices silent nodes, and
``RunEnded`` when ``--stop-after`` has passed, every node reported finished, or the session is stopped
(Ctrl-C). Each node runs in its own task (:class:`NodeRunner`): its failures become ``NodeStatus`` and
``Notice`` events, never exceptions that reach its siblings.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from tokenwatch.base.clock import Clock, MonotonicClock
from tokenwatch.base.events import (
    VOUCHED_NODES_META,
    Collector,
    Emit,
    Event,
    Heartbeat,
    NodeStatus,
    RunEnded,
    RunStarted,
    run_collector,
)
from tokenwatch.base.loading import Loading
from tokenwatch.base.wakeup_batching import batch_wakeups
from tokenwatch.inputs.config import WatchConfig
from tokenwatch.inputs.discovery import NodeDiscovery
from tokenwatch.inputs.live.backlog import Backfill, retime
from tokenwatch.inputs.live.counter_owners import CounterOwners
from tokenwatch.inputs.live.history import HistorySource, RunClock, merged, run_clock
from tokenwatch.inputs.live.node_health import NodeHealth
from tokenwatch.inputs.live.node_runner import NodeRunner
from tokenwatch.inputs.live.node_sources import NodeContext, NodeSource
from tokenwatch.inputs.live.ssh_connect import SshConnector
from tokenwatch.inputs.live.targets import NodeTarget, rack_name
from tokenwatch.inputs.live.tasks import cancel_and_wait


@dataclass(frozen=True, slots=True)
class LiveOptions:
    stop_after_s: float | None = None
    heartbeat_s: float = 1.0
    backoff_base_s: float = 1.0
    backoff_cap_s: float = 30.0
    history_timeout_s: float = 120.0  # the most the backfill may take before live data flows
    # Once every node has finished, the tails keep reading this long: LoadGen writes its detail log's
    # result at the end too, maybe after the trace's last event (the verdict reads LoadGen's own).
    finish_grace_s: float = 1.0
    # Once every node's first connection was tried, the loop reads what arrived at most this often
    # (tokenwatch.base.wakeup_batching): 64 nodes' rounds at their own phases each woke it alone.
    wakeup_gap_s: float = 0.1


class LiveCollector:
    name = "live"

    def __init__(
        self,
        config: WatchConfig,
        targets: Sequence[NodeTarget],
        sources_for: Callable[[NodeTarget], list[NodeSource]],
        *,
        gpus_per_node: int,
        connector: SshConnector | None = None,
        options: LiveOptions | None = None,
        clock: Clock | None = None,
        rack_collectors: Sequence[Collector] = (),
        rng: random.Random | None = None,
    ) -> None:
        self.config = config
        self.targets = list(targets)
        self.sources_for = sources_for
        self.gpus_per_node = gpus_per_node
        self.connector = connector
        self.options = options or LiveOptions()
        self.clock = clock or MonotonicClock()
        self.rack_collectors = list(rack_collectors)
        self.rng = rng or random.Random()
        self.runners: list[NodeRunner] = []
        self.healths: dict[str, NodeHealth] = {}
        self._finished: set[str] = set()
        self._all_finished = asyncio.Event()
        self._emit: Emit | None = None
        self._held: list[Event] | None = None  # events before the run starts (connections, notices)
        self.meta_extra: dict[str, Any] = {}  # what the run's sources add to its meta (a fleet's racks)
        self.t0 = 0.0
        self.run_clock = RunClock(0.0, 0.0, "")
        self.loading: Loading | None = None  # the backlogs and history read before the run starts
        self._wakeups_spaced = False

    def now(self) -> float:
        return self.clock.time() - self.t0

    async def emit(self, event: Event) -> None:
        if self._held is not None:
            self._held.append(event)
            return
        if isinstance(event, NodeStatus) and event.state == "finished":
            self._finished.add(event.node)
            if len(self._finished & set(self.healths)) == len(self.healths):
                self._all_finished.set()
        assert self._emit is not None
        await self._emit(event)

    def run_started(self) -> RunStarted:
        run, config, clock = self.config.run, self.config, self.run_clock
        meta: dict[str, Any] = {
            "config": config.path,
            "gpu_source": config.gpu.source,
            "progress": [p.kind for p in config.progress],
            "local": config.local,
            "attached_at_s": round(clock.attach_s, 3),
            "t0": clock.started_by or "watch start",
            # their streams are supervised here: a source that stops answering is said at once, so a
            # silent node is an idle engine (vLLM logs nothing without requests), not a lost one
            VOUCHED_NODES_META: [r.target.name for r in self.runners],
        }
        if run.benchmark is not None:  # a replay of the recording judges by the same rules
            meta["benchmark"] = run.benchmark
        rack = rack_name(config)
        if rack is not None:  # the rack /metrics names (one exporter per rack feeds a fleet)
            meta["rack"] = rack
        if config.nodes is not None and config.nodes.rack_label is not None:
            meta["rack_label"] = config.nodes.rack_label
        meta.update(self.meta_extra)
        return RunStarted(
            0.0,
            run.name,
            run.scenario,
            tuple(t.name for t in self.targets),
            self.gpus_per_node,
            run.duration_s,
            run.total_samples,
            "live",
            clock.start_wall,
            meta,
        )

    async def run(self, emit: Emit) -> None:
        self._emit = emit
        self._held = []
        self.t0 = self.clock.time()
        await self._discover()
        self._make_runners()
        try:
            history, watch_mono = await self._history()
        finally:
            if self.loading is not None:
                self.loading.finish()
        self.t0 = watch_mono - self.run_clock.attach_s  # now() = run time: attach_s when the watch began
        for runner in self.runners:
            runner.ctx.t0 = self.t0
        held, self._held = self._held, None
        started = self.run_started()
        await emit(started)
        # each instant's records as one batch, before the attach as the run's start states it (rounded:
        # a node's first count after it is its catch-up, read as an event of its own)
        attach = min(self.run_clock.attach_s, started.meta["attached_at_s"])
        for event in merged(history, self.run_clock, [t.name for t in self.targets], attach):
            await self.emit(event)
        for event in held:
            await self.emit(retime(event, self.run_clock.attach_s))
        tasks = [asyncio.create_task(r.run(), name=f"node {r.target.name}") for r in self.runners]
        tasks += [asyncio.create_task(run_collector(c, self.emit, self.now)) for c in self.rack_collectors]
        tasks.append(asyncio.create_task(self._heartbeat()))
        reason = "interrupted"
        try:
            reason = await self._until_end()
        finally:
            batch_wakeups(0.0)  # the channels close, and the run ends, without a pause per round trip
            await cancel_and_wait(tasks)
            await emit(RunEnded(self.now(), reason))

    async def _discover(self) -> None:
        """The nodes a rack-wide source finds for itself (a fleet's Prometheus), before the run starts:
        they become the run's nodes (within ``history_timeout_s``; none if the source cannot say)."""
        finders = [c for c in self.rack_collectors if isinstance(c, NodeDiscovery)]
        for finder in finders:
            try:
                found = await asyncio.wait_for(finder.discover(), self.options.history_timeout_s)
            except TimeoutError:
                found = None
            if found is None or not found.nodes:  # none found (yet): the run keeps the config's nodes
                continue
            self.targets = [NodeTarget(name, name) for name in found.nodes]
            if found.gpus_per_node is not None:
                self.gpus_per_node = found.gpus_per_node
            self.meta_extra.update(found.meta)

    async def _history(self) -> tuple[list[Backfill], float]:
        """Every node's backlog and the rack-wide sources' start, then their history from the run's start
        (bounded by ``history_timeout_s``: what is not read by then is taken as a baseline later), and
        the monotonic time the watch joined the run at."""
        done: list[Backfill] = []
        histories = [c for c in self.rack_collectors if isinstance(c, HistorySource)]
        watch_wall = self.clock.wall()
        nodes = [asyncio.create_task(r.backfill()) for r in self.runners]
        starts = [asyncio.create_task(h.run_start(watch_wall)) for h in histories]
        # Minutes of logs at rack size: said with how far it is (the share of nodes and sources read).
        steps = len(nodes) + len(starts) + (1 if histories else 0)
        what = f"reading the backlog of {len(nodes)} node{'s' if len(nodes) != 1 else ''}"
        loading = self.loading = Loading(what if nodes else "reading the run's history", self.clock.time)
        for task in (*nodes, *starts):
            task.add_done_callback(lambda _: loading(loading.share + 1 / steps))
        budget = self.options.history_timeout_s
        began = self.clock.time()
        finished = await _settle([*nodes, *starts], budget)
        for node in nodes:
            if node in finished:
                done += node.result()
        known: list[tuple[str, float | None]] = [(d.source, d.start_wall) for d in done if d.placed]
        for start, source in zip(starts, histories, strict=True):
            if start in finished:
                known.append((getattr(source, "name", "prometheus"), start.result()))
        watch_wall, watch_mono = self.clock.wall(), self.clock.time()
        self.run_clock = run_clock(watch_wall, known)
        if self.run_clock.attach_s > 0 and histories:
            left = max(0.0, budget - (self.clock.time() - began))
            asks = [asyncio.create_task(h.history(self.run_clock.start_wall, watch_wall)) for h in histories]
            finished = await _settle(asks, left)
            for ask, source in zip(asks, histories, strict=True):
                if ask in finished:
                    done.append(Backfill(getattr(source, "name", "prometheus"), placed=list(ask.result())))
        return done, watch_mono

    def _make_runners(self) -> None:
        opts = self.options
        for index, target in enumerate(self.targets):
            health = NodeHealth(target.name, self.emit, self.now)
            self.healths[target.name] = health
            sources = self.sources_for(target)
            if not sources:  # everything about it comes rack-wide (Prometheus): no SSH to it
                continue
            ctx = NodeContext(target.name, self.emit, self.clock, self.t0, health, index)
            ctx.owners = CounterOwners([source.name for source in sources])
            self.runners.append(
                NodeRunner(
                    target,
                    sources,
                    ctx,
                    connector=self.connector,
                    stale_after_s=self.config.alerts.stale_after_s,
                    backoff_base_s=opts.backoff_base_s,
                    backoff_cap_s=opts.backoff_cap_s,
                    rng=self.rng,
                )
            )

    async def _until_end(self) -> str:
        waits: list[asyncio.Task[Any]] = [asyncio.create_task(self._all_finished.wait())]
        if self.options.stop_after_s is not None:
            waits.append(asyncio.create_task(self.clock.sleep(self.options.stop_after_s)))
        try:
            done, _ = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in waits:
                task.cancel()
        if waits[0] in done:
            await self.clock.sleep(self.options.finish_grace_s)
            return "every node finished"
        return f"stopped after {self.options.stop_after_s:g} s (--stop-after)"

    async def _heartbeat(self) -> None:
        """Every second: a Heartbeat (run time passes for the core) and every node's silence check,
        in one task for the whole rack rather than a timer per node."""
        interval = self.options.heartbeat_s
        k = int(self.now() / interval) + 1  # the run may be well under way when the watch joins it
        while True:
            await self.clock.sleep(max(0.0, k * interval - self.now()))
            await self.emit(Heartbeat(self.now()))
            for runner in self.runners:
                await runner.check_silence()
            self._space_wakeups_once_connected()
            k = max(k + 1, int(self.now() / interval) + 1)

    def _space_wakeups_once_connected(self) -> None:
        """Once every node's first connection has been tried (up or refused), the loop's wake-ups are
        spaced: before, each round trip of a handshake would have waited for the gap. Only in a watch of
        nodes alone: a rack-wide source (a Prometheus fleet's queries) keeps its timing as it was."""
        if self._wakeups_spaced or not self.runners or self.rack_collectors:
            return
        if all(h.down_reason != "connecting" for h in self.healths.values()):
            batch_wakeups(self.options.wakeup_gap_s)
            self._wakeups_spaced = True


async def _settle(tasks: list[asyncio.Task[Any]], timeout_s: float) -> set[asyncio.Task[Any]]:
    """The tasks that finished without failing within ``timeout_s``; the others are cancelled."""
    if not tasks:
        return set()
    done, pending = await asyncio.wait(tasks, timeout=max(0.001, timeout_s))
    await cancel_and_wait(list(pending))
    return {task for task in done if not task.cancelled() and task.exception() is None}
