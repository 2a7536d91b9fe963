"""One node's life: connect, run its sources, and on any failure report it and reconnect.

Each node is its own fault domain, as the rack is built: its connection, its retries and its
backoff are its own, and nothing it raises reaches another node. A node that comes back resumes
its tails from their byte offsets with the same parsers (see :class:`FileTailSource`), so no
work is counted twice. Before the run starts, :meth:`NodeRunner.backfill` reads what its files already
hold, on the connection its live sources then use.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Sequence

import asyncssh

from tokenwatch.inputs.live.backlog import Backfill
from tokenwatch.inputs.live.backoff import STABLE_S, Backoff
from tokenwatch.inputs.live.node_sources import FileTailSource, NodeContext, NodeSource
from tokenwatch.inputs.live.source_supervisor import SourceSupervisor
from tokenwatch.inputs.live.ssh_connect import ConnectError, HostKeyClient, SshConnector
from tokenwatch.inputs.live.targets import NodeTarget
from tokenwatch.inputs.live.tasks import cancel_and_wait, raise_if_cancelling
from tokenwatch.inputs.live.transport import LocalTransport, SshTransport, Transport


class NodeRunner:
    def __init__(
        self,
        target: NodeTarget,
        sources: Sequence[NodeSource],
        ctx: NodeContext,
        *,
        connector: SshConnector | None,
        stale_after_s: float,
        backoff_base_s: float = 1.0,
        backoff_cap_s: float = 30.0,
        rng: random.Random | None = None,
    ) -> None:
        self.target = target
        self.sources = list(sources)
        self.ctx = ctx
        self.connector = connector
        self.stale_after_s = stale_after_s
        self.rng = rng or random.Random()
        self.backoff = Backoff(backoff_base_s, backoff_cap_s, rng=self.rng)
        self.connects = 0
        self.supervisor: SourceSupervisor | None = None  # while its sources run
        self._ready: tuple[asyncssh.SSHClientConnection, HostKeyClient] | None = None  # opened by backfill

    async def backfill(self) -> list[Backfill]:
        """What the node's files held when the watch began (see :mod:`tokenwatch.inputs.live.backlog`). A node
        that cannot be reached now gives none: its files become baselines once it is."""
        sources = [s for s in self.sources if isinstance(s, FileTailSource)]
        if not sources:
            return []
        ctx = self.ctx
        transport: Transport
        if self.target.local or self.connector is None:
            transport = LocalTransport()
        else:
            try:
                self._ready = await self.connector.connect(self.target)
            except ConnectError as exc:
                await ctx.health.lost(str(exc))
                await ctx.health.notice("ssh", "error", f"{self.target.name}: {exc}")
                return []
            self.connects += 1
            await ctx.health.connected()
            transport = SshTransport(self._ready[0])
        done = []
        for source in sources:
            try:
                done.append(await source.backfill(transport, ctx))
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the history is lost, not the node: its backlog becomes a baseline
                source.settled = False
                await ctx.health.notice(source.name, "warning", f"{source.name}: no history: {exc}")
        return done

    async def check_silence(self) -> None:
        if self.supervisor is not None:
            await self.supervisor.check_silence()

    def _supervisor(self) -> SourceSupervisor:
        self.supervisor = SourceSupervisor(
            self.sources,
            self.ctx,
            stale_after_s=self.stale_after_s,
            retry_base_s=self.backoff.base_s,
            retry_cap_s=self.backoff.cap_s,
            rng=self.rng,
        )
        return self.supervisor

    async def run(self) -> None:
        if self.target.local or self.connector is None:
            await self.ctx.health.connected()
            await self._supervisor().run(LocalTransport())
            return
        while True:
            await self._connect_and_run(self.connector)
            raise_if_cancelling()
            await self.ctx.clock.sleep(self.backoff.next_delay())

    async def _connect_and_run(self, connector: SshConnector) -> None:
        ctx = self.ctx
        if self._ready is not None:  # the connection the backfill opened
            (conn, client), self._ready = self._ready, None
            ctx.health.forget_notice("ssh")
        else:
            try:
                conn, client = await connector.connect(self.target)
            except ConnectError as exc:
                await ctx.health.lost(str(exc))
                await ctx.health.notice("ssh", "error", f"{self.target.name}: {exc}")
                return
            self.connects += 1
            await ctx.health.connected()
            if self.connects > 1:
                await ctx.health.notice("ssh", "info", f"{self.target.name}: reconnected")
            else:
                ctx.health.forget_notice("ssh")
        up_since = ctx.clock.time()
        sources = asyncio.create_task(self._supervisor().run(SshTransport(conn)))
        closed = asyncio.create_task(conn.wait_closed())
        try:
            await asyncio.wait({sources, closed}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            await cancel_and_wait([sources])  # its streams close their channels before the connection goes
            conn.close()
            await cancel_and_wait([closed])
        reason = client.lost_reason or "connection closed"
        self.supervisor = None
        await ctx.health.lost(reason)
        await ctx.health.notice("ssh", "error", f"{self.target.name}: {reason}")
        if ctx.clock.time() - up_since >= STABLE_S:
            self.backoff.reset()
