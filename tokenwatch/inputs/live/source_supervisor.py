"""Keeps a node's sources running on one transport: retries with backoff, and notices silence.

A source that ends (nvidia-smi exited, a tail died) is reported once and restarted after a
jittered backoff; its siblings go on. A periodic source silent past its limit makes the node
**stale** (with the reason); silent for ``restart_factor`` times that, its stream is restarted
(a wedged channel or a hung command), the node staying stale until data flows again. A source's limit
follows its cadence: ``max(stale_after, 3 x its interval)``, the interval being the median of its recent
gaps between arrivals (before it has any, the configured one), so a scrape every 10 s is not stale
after 5 s. Silence is checked by :meth:`SourceSupervisor.check_silence`, which the run calls once a
second for all nodes.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Sequence

from tokenwatch.base.formatting import one_line
from tokenwatch.core.cadence import STALE_CADENCE_FACTOR
from tokenwatch.inputs.live.backoff import STABLE_S, Backoff
from tokenwatch.inputs.live.node_sources import NodeContext, NodeSource, SourceEnded
from tokenwatch.inputs.live.tasks import cancel_and_wait, raise_if_cancelling
from tokenwatch.inputs.live.transport import Transport


class SourceSupervisor:
    def __init__(
        self,
        sources: Sequence[NodeSource],
        ctx: NodeContext,
        *,
        stale_after_s: float,
        restart_factor: float = 3.0,
        retry_base_s: float = 1.0,
        retry_cap_s: float = 30.0,
        rng: random.Random | None = None,
    ) -> None:
        self.sources = list(sources)
        self.ctx = ctx
        self.stale_after_s = stale_after_s
        self.restart_factor = restart_factor
        self.retry_base_s = retry_base_s
        self.retry_cap_s = retry_cap_s
        self.rng = rng or random.Random()
        self._running: dict[str, asyncio.Task[None]] = {}
        self._restarted: dict[str, float] = {}

    async def run(self, transport: Transport) -> None:
        """Run every source until cancelled (the connection went, or the watch ends)."""
        for source in self.sources:  # a fresh transport: every stream gets its limit to speak
            self.ctx.restarted(source.name)
            self._restarted[source.name] = self.ctx.clock.time()
        tasks = [asyncio.create_task(self._keep_running(s, transport)) for s in self.sources]
        try:
            await asyncio.gather(*tasks)
        finally:
            await cancel_and_wait(tasks)

    async def _keep_running(self, source: NodeSource, transport: Transport) -> None:
        backoff = Backoff(self.retry_base_s, self.retry_cap_s, rng=self.rng)
        ctx = self.ctx
        while True:
            started = ctx.clock.time()
            inner = asyncio.create_task(source.run(transport, ctx))
            self._running[source.name] = inner
            try:
                await inner
                why = f"{source.name} ended"
            except asyncio.CancelledError:
                current = asyncio.current_task()
                if current is not None and current.cancelling():
                    inner.cancel()
                    raise
                continue  # restarted by the silence watch: at once, it has waited long enough
            except SourceEnded as exc:
                why = str(exc)
            except Exception as exc:  # a channel that failed to open, a dropped stream
                why = f"{source.name}: {one_line(exc)[:200]}"
            finally:
                self._running.pop(source.name, None)
            raise_if_cancelling()  # a source that swallowed our cancel must not keep us running
            if ctx.clock.time() - started >= STABLE_S:
                backoff.reset()  # it had been working: this is a new failure, not the same one again
            await ctx.health.notice(source.name, "warning", why)
            await ctx.clock.sleep(backoff.next_delay())

    async def check_silence(self) -> None:
        """Called about once a second (by the run's clock task, one for all nodes, not a task per
        node): a periodic stream silent for stale_after makes the node stale; for restart_after,
        its stream is restarted."""
        ctx = self.ctx
        now = ctx.clock.time()
        for source in self.sources:
            if source.periodic_s is None:
                continue
            limit = self.stale_limit_s(source)
            silent = now - ctx.last_data.get(source.name, now)
            if silent > limit:
                await ctx.health.set_stale(source.name, f"no {source.name} data for {limit:g} s")
                quiet = now - max(ctx.last_data.get(source.name, now), self._restarted.get(source.name, now))
                if quiet > self.restart_factor * limit and source.name in self._running:
                    self._restarted[source.name] = now
                    self._running[source.name].cancel()
            else:
                await ctx.health.clear_stale(source.name)

    def stale_limit_s(self, source: NodeSource) -> float:
        """Seconds of silence after which ``source`` makes its node stale."""
        interval = self.ctx.cadence(source.name) or source.periodic_s or 0.0
        return max(self.stale_after_s, STALE_CADENCE_FACTOR * interval)
