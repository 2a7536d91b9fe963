"""One node's verdict, from its connection and its streams, published only when it changes.

A node is **down** while its connection is (refused, auth error, host key, dropped), **stale**
while any stream that should tick (nvidia-smi, a scrape) has been silent past its limit
(``max(stale_after, 3 x its observed interval)``, see :mod:`tokenwatch.inputs.live.source_supervisor`),
and **up** otherwise. Once a parser reports the node **finished**, later connection trouble is
the job ending, not a failure: nothing more is published.
"""

from __future__ import annotations

from collections.abc import Callable

from tokenwatch.base.events import Emit, NodeState, NodeStatus, Notice, NoticeLevel


class NodeHealth:
    def __init__(self, node: str, emit: Emit, now: Callable[[], float]) -> None:
        self.node = node
        self._emit = emit
        self._now = now
        self.down_reason: str | None = "connecting"
        self.stale: dict[str, str] = {}
        self.finished = False
        self.published: tuple[NodeState, str] | None = None
        self._last_notice: dict[str, str] = {}

    @property
    def state(self) -> tuple[NodeState, str]:
        if self.down_reason is not None:
            return "down", self.down_reason
        if self.stale:
            return "stale", "; ".join(self.stale.values())
        return "up", ""

    async def connected(self) -> None:
        self.down_reason = None
        self.stale.clear()
        await self._publish()

    async def lost(self, reason: str) -> None:
        self.down_reason = reason
        self.stale.clear()
        await self._publish()

    async def set_stale(self, source: str, reason: str) -> None:
        if self.stale.get(source) != reason:
            self.stale[source] = reason
            await self._publish()

    async def clear_stale(self, source: str) -> None:
        if self.stale.pop(source, None) is not None:
            await self._publish()

    def mark_finished(self) -> None:
        self.finished = True

    async def notice(self, source: str, level: NoticeLevel, message: str) -> None:
        """A message for the engineer, once per change of text per source (retries do not spam)."""
        if self._last_notice.get(source) == message:
            return
        self._last_notice[source] = message
        await self._emit(Notice(self._now(), level, message, node=self.node, source=source))

    def forget_notice(self, source: str) -> None:
        self._last_notice.pop(source, None)

    async def _publish(self) -> None:
        if self.finished:
            return
        state = self.state
        if state == self.published or (
            state[0] == "down" and self.published is None and state[1] == "connecting"
        ):
            return
        self.published = state
        await self._emit(NodeStatus(self._now(), self.node, state[0], state[1]))
