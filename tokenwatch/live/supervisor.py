"""The live run: one collector that starts the run, runs every node, keeps time, and ends it.

It emits ``RunStarted`` (t = 0 is when the watch started, from the injected clock), then a
``Heartbeat`` every second so the core notices silent nodes, and ``RunEnded`` when
``--stop-after`` has passed, every node reported finished, or the session is stopped (Ctrl-C).
Each node runs in its own task (:class:`NodeRunner`): its failures become ``NodeStatus`` and
``Notice`` events, never exceptions that reach its siblings.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from tokenwatch.clock import Clock, MonotonicClock
from tokenwatch.events import Collector, Emit, Event, Heartbeat, NodeStatus, RunEnded, RunStarted
from tokenwatch.live.config import WatchConfig
from tokenwatch.live.node_health import NodeHealth
from tokenwatch.live.node_runner import NodeRunner
from tokenwatch.live.node_sources import NodeContext, NodeSource
from tokenwatch.live.ssh_connect import SshConnector
from tokenwatch.live.targets import NodeTarget
from tokenwatch.live.tasks import cancel_and_wait
from tokenwatch.session import run_collector


@dataclass(frozen=True, slots=True)
class LiveOptions:
    stop_after_s: float | None = None
    heartbeat_s: float = 1.0
    backoff_base_s: float = 1.0
    backoff_cap_s: float = 30.0
    # Once every node has finished, the tails keep reading this long: LoadGen writes its detail log's
    # result at the end too, maybe after the trace's last event (the verdict reads LoadGen's own).
    finish_grace_s: float = 1.0


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
        self.t0 = 0.0

    def now(self) -> float:
        return self.clock.time() - self.t0

    async def emit(self, event: Event) -> None:
        if isinstance(event, NodeStatus) and event.state == "finished":
            self._finished.add(event.node)
            if len(self._finished & set(self.healths)) == len(self.healths):
                self._all_finished.set()
        assert self._emit is not None
        await self._emit(event)

    def run_started(self) -> RunStarted:
        run, config = self.config.run, self.config
        meta: dict[str, Any] = {
            "config": config.path,
            "gpu_source": config.gpu.source,
            "progress": [p.kind for p in config.progress],
            "local": config.local,
        }
        if run.benchmark is not None:  # a replay of the recording judges by the same rules
            meta["benchmark"] = run.benchmark
        return RunStarted(
            0.0,
            run.name,
            run.scenario,
            tuple(t.name for t in self.targets),
            self.gpus_per_node,
            run.duration_s,
            run.total_samples,
            "live",
            self.clock.wall(),
            meta,
        )

    async def run(self, emit: Emit) -> None:
        self._emit = emit
        self.t0 = self.clock.time()
        await emit(self.run_started())
        opts = self.options
        for index, target in enumerate(self.targets):
            health = NodeHealth(target.name, self.emit, self.now)
            self.healths[target.name] = health
            sources = self.sources_for(target)
            if not sources:  # everything about it comes rack-wide (Prometheus): no SSH to it
                continue
            ctx = NodeContext(target.name, self.emit, self.clock, self.t0, health, index)
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
        tasks = [asyncio.create_task(r.run(), name=f"node {r.target.name}") for r in self.runners]
        tasks += [asyncio.create_task(run_collector(c, self.emit, self.now)) for c in self.rack_collectors]
        tasks.append(asyncio.create_task(self._heartbeat()))
        reason = "interrupted"
        try:
            reason = await self._until_end()
        finally:
            await cancel_and_wait(tasks)
            await emit(RunEnded(self.now(), reason))

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
        k = 1
        while True:
            await self.clock.sleep(max(0.0, k * interval - self.now()))
            await self.emit(Heartbeat(self.now()))
            for runner in self.runners:
                await runner.check_silence()
            k = max(k + 1, int(self.now() / interval) + 1)
