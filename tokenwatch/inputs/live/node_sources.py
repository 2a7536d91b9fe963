"""A node's streams: a GPU telemetry command, file tails, ``/metrics`` scrapes.

Each source keeps what must survive a reconnect (a tail's byte offset and parser, a scrape's
previous counters) in itself, and is restarted by
:class:`tokenwatch.inputs.live.source_supervisor.SourceSupervisor` on a fresh transport. Parsers come
from factories, so this module knows nothing of formats.
"""

from __future__ import annotations

import asyncio
import statistics
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from tokenwatch.base.clock import Clock
from tokenwatch.base.events import Emit, Event, NodeStatus, Notice
from tokenwatch.core.cadence import CADENCE_GAPS, MIN_GAP_S
from tokenwatch.inputs.live.backlog import (
    MAX_HISTORY_S,
    Backfill,
    BacklogParser,
    Baseline,
    last_lines_only,
    place,
    read_local_backlog,
    read_remote_backlog,
    retime,
)
from tokenwatch.inputs.live.counter_owners import CounterOwners
from tokenwatch.inputs.live.file_tail import LocalFileTailer
from tokenwatch.inputs.live.http_fetch import HttpError, http_get, redact
from tokenwatch.inputs.live.node_health import NodeHealth
from tokenwatch.inputs.live.remote_commands import stat_command, tail_command
from tokenwatch.inputs.live.tail_fingerprint import TailFingerprint
from tokenwatch.inputs.live.tail_stream import (
    TailData,
    TailItem,
    TailMessage,
    TailReset,
    TailStart,
    TailStreamError,
    TailStreamSplitter,
)
from tokenwatch.inputs.live.transport import Transport
from tokenwatch.sources.filled_span import BacklogItem, FilledSpan
from tokenwatch.sources.node_gpu_index import NodeGpuIndex


class StreamParser(Protocol):
    def feed(self, data: bytes, t: float) -> list[Event]: ...


class ScrapeParser(Protocol):
    def parse(self, text: str, t: float) -> list[Event]: ...


class SourceEnded(Exception):  # noqa: N818 - not always an error: a stream may simply end
    """A source's stream ended or failed; the message is one line for the engineer."""


@dataclass(slots=True)
class NodeContext:
    """What a source needs: its node, where events go, run time, and the node's health."""

    node: str
    emit: Emit
    clock: Clock
    t0: float
    health: NodeHealth
    index: int = 0  # the node's place in RunStarted.nodes (for batch events)
    last_data: dict[str, float] = field(default_factory=dict)
    gaps: dict[str, deque[float]] = field(default_factory=dict)  # recent gaps between a source's arrivals
    gpu_index: NodeGpuIndex = field(init=False)  # this node's batch index columns, kept across reconnects
    owners: CounterOwners = field(default_factory=lambda: CounterOwners(()))  # which source counts what

    def __post_init__(self) -> None:
        self.gpu_index = NodeGpuIndex(self.index)

    def now(self) -> float:
        """Run time: seconds since the watch started."""
        return self.clock.time() - self.t0

    def saw(self, source: str) -> None:
        now = self.clock.time()
        last = self.last_data.get(source)
        if last is not None and now - last > MIN_GAP_S:
            self.gaps.setdefault(source, deque(maxlen=CADENCE_GAPS)).append(now - last)
        self.last_data[source] = now

    def restarted(self, source: str) -> None:
        """A fresh stream: it gets its time to speak, and the wait before it is no gap of its cadence."""
        self.last_data[source] = self.clock.time()

    def cadence(self, source: str) -> float | None:
        """The source's observed interval: the median of its recent gaps (None before two arrivals)."""
        gaps = self.gaps.get(source)
        return statistics.median(gaps) if gaps else None

    async def emit_all(self, events: Sequence[Event], source: str | None = None) -> None:
        """Emit a parser's events (GPU parsers emit one batch per read themselves). ``source`` names the
        source they come from: its counts pass only where it owns them (:mod:`.counter_owners`)."""
        if source is not None:
            events = self.owners.take(source, events)
        for event in events:
            if isinstance(event, NodeStatus) and event.state == "finished" and event.node == self.node:
                self.health.mark_finished()
            await self.emit(event)


class NodeSource(Protocol):
    name: str
    periodic_s: float | None  # the cadence data must keep (None: silence is normal, e.g. a quiet log)

    async def run(self, transport: Transport, ctx: NodeContext) -> None: ...


def has_readings(events: Sequence[Event]) -> bool:
    """Whether a parser's events hold a reading (not just notices about lines it could not read)."""
    return any(not isinstance(e, Notice) for e in events)


async def _feed(
    ctx: NodeContext, source: str, parser: StreamParser, data: bytes, baseline: Baseline | None = None
) -> bool:
    """Parse and emit; True when the bytes held a reading."""
    try:
        events = parser.feed(data, ctx.now())
    except Exception as exc:  # a parser bug must not take the node's other streams with it
        await ctx.health.notice(source, "error", f"{source}: parser failed: {type(exc).__name__}: {exc}")
        return False
    await ctx.emit_all(events if baseline is None else baseline.apply(events), source)
    return has_readings(events)


def describe_exit(program: str, status: int | None, stderr: str) -> str:
    last = stderr.strip().splitlines()[-1][:200] if stderr.strip() else ""
    if status == 127:
        return f"{program}: command not found on the node"
    if status is None:
        return f"{program} stream ended" + (f": {last}" if last else "")
    return f"{program} exited with status {status}" + (f": {last}" if last else "")


class CommandSource:
    """A long-lived command whose stdout a parser reads (``nvidia-smi --query-gpu ... -lms N``).

    ``parser_factory`` gets the node's index in ``RunStarted.nodes``: the parser emits batch events,
    which name their node by index."""

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        parser_factory: Callable[[int], StreamParser],
        periodic_s: float,
        *,
        program: str | None = None,
    ) -> None:
        """``program`` names the tool in messages where ``argv`` runs it through something else (a
        ``sh -c`` loop around a one-shot tool such as ``amd-smi metric --json``)."""
        self.name = name
        self.argv = list(argv)
        self.parser_factory = parser_factory
        self.periodic_s: float | None = periodic_s
        self.program = program or self.argv[0]

    async def run(self, transport: Transport, ctx: NodeContext) -> None:
        parser = self.parser_factory(ctx.index)  # a fresh stream starts with a fresh header
        stream = await transport.start(self.argv)
        try:
            while data := await stream.read():
                # Liveness counts parsed samples, not bytes: a stream of garbage or of "Unable to
                # determine the device handle" lines is as good as silent.
                if await _feed(ctx, self.name, parser, data):
                    ctx.saw(self.name)
            status, stderr = await stream.finish()
        finally:
            await stream.aclose()
        raise SourceEnded(describe_exit(self.program, status, stderr))


class FileTailSource:
    """Follows a file from the byte offset already read; a rotation or truncation starts a fresh parser
    (the core counts the restart once), a reconnect resumes the same parser at the same byte.

    What the file held when the watch began is read once first (:mod:`tokenwatch.inputs.live.backlog`): before
    the run starts, :meth:`backfill` places it at its own times; a source that first runs later (its node
    was unreachable at the start) takes it as a baseline, since the run's history is already written."""

    periodic_s: float | None = None

    def __init__(
        self, name: str, path: str, parser_factory: Callable[[], StreamParser], poll_s: float = 0.25
    ):
        self.name = name
        self.path = path
        self.parser_factory = parser_factory
        self.poll_s = poll_s
        self.parser: StreamParser | None = None
        self.inode: str | None = None
        self.offset = 0
        self.settled = False  # the file's content at the watch's start has been read (placed or a baseline)
        self.baseline: Baseline | None = None
        self.fingerprint = TailFingerprint()  # of the bytes read: a file rewritten meanwhile is noticed

    async def backfill(self, transport: Transport, ctx: NodeContext) -> Backfill:
        """Before the run starts: the file's backlog at its own times, or as a baseline."""
        return await self._read_backlog(transport, ctx, may_place=True)

    async def _read_backlog(self, transport: Transport, ctx: NodeContext, *, may_place: bool) -> Backfill:
        parser = self.parser = self.parser or self.parser_factory()
        placing = parser if may_place and isinstance(parser, BacklogParser) else None
        events: list[BacklogItem] = []

        def consume(data: bytes) -> None:
            if placing is not None:
                events.extend(placing.feed_backlog(data))
            else:
                events.extend(parser.feed(data, 0.0))

        if transport.local:
            state = await asyncio.to_thread(read_local_backlog, self.path, consume)
        else:
            state = await read_remote_backlog(transport, self.path, consume, ctx.clock.wall)
        self.settled = True
        done = Backfill(
            f"{self.name.split()[0]} of {ctx.node}"
        )  # "log of node03": no paths in the run's meta
        if state is None:
            return done  # no file yet: all it will hold is this run's
        self.inode, self.offset = state.inode, state.size
        if state.skipped:
            done.at_start.append(
                Notice(
                    0.0,
                    "info",
                    f"{self.path}: only its last {state.size - state.skipped:,} bytes were "
                    "read for the run's history",
                    ctx.node,
                    self.name,
                )
            )
        clock = None
        if placing is not None:
            last, clock = placing.end_backlog()
            events += last
        placed, start = (
            place(last_lines_only(events), clock, state.mtime) if clock is not None else ([], None)
        )
        if placed and _last_t(placed) >= ctx.clock.wall() - MAX_HISTORY_S:
            done.placed, done.start_wall = placed, start
        else:  # no times to place it by, or a history that ended long ago (not this run's)
            self.baseline = Baseline(ctx.node)
            done.at_start += self.baseline.take(events)
        if any(isinstance(e, NodeStatus) and e.state == "finished" and e.node == ctx.node for e in events):
            ctx.health.mark_finished()
        return done

    async def run(self, transport: Transport, ctx: NodeContext) -> None:
        if self.parser is None:
            self.parser = self.parser_factory()
        if not self.settled:  # the run is under way: what the file holds now is a baseline
            done = await self._read_backlog(transport, ctx, may_place=False)
            await ctx.emit_all([retime(e, ctx.now()) for e in done.at_start], self.name)
        if transport.local:
            tailer = LocalFileTailer(
                self.path,
                inode=self.inode,
                offset=self.offset,
                poll_s=self.poll_s,
                fingerprint=self.fingerprint.copy(),
            )
            async for items in tailer.follow(ctx.clock):
                await self._handle(items, ctx, lambda: _const(tailer.inode))
            return
        command = tail_command(self.path, self.inode, self.offset, self.fingerprint)
        stream = await transport.start([], shell_command=command)
        splitter = TailStreamSplitter()
        try:
            while data := await stream.read():
                try:
                    items = splitter.feed(data)
                except TailStreamError as exc:
                    raise SourceEnded(f"tail of {self.path}: {exc}") from None
                await self._handle(items, ctx, lambda: self._remote_inode(transport))
            await self._handle(splitter.flush(), ctx, lambda: _const(None))
            status, stderr = await stream.finish()
        finally:
            await stream.aclose()
        raise SourceEnded(describe_exit(f"tail of {self.path}", status, stderr))

    async def _handle(
        self, items: list[TailItem], ctx: NodeContext, inode_now: Callable[[], Awaitable[str | None]]
    ) -> None:
        for item in items:
            if isinstance(item, TailData):
                assert self.parser is not None
                self.fingerprint.read(self.offset, item.data)
                self.offset += len(item.data)
                ctx.saw(self.name)
                await _feed(ctx, self.name, self.parser, item.data, self.baseline)
            elif isinstance(item, TailStart):
                if item.offset != self.offset:
                    await ctx.health.notice(
                        self.name,
                        "info",
                        f"{self.path} was rotated or truncated meanwhile: reading it from the start",
                    )
                    self.parser, self.baseline = self.parser_factory(), None
                    self.fingerprint.reset()
                self.inode, self.offset = item.inode, item.offset
                ctx.saw(self.name)
            elif isinstance(item, TailReset):
                self.parser, self.baseline = self.parser_factory(), None
                self.offset = 0
                self.fingerprint.reset()
                self.inode = await inode_now()
                await ctx.health.notice(self.name, "info", item.reason)
            elif isinstance(item, TailMessage):
                await ctx.health.notice(self.name, "warning", item.text)

    async def _remote_inode(self, transport: Transport) -> str | None:
        """The inode now at the path, right after tail said it follows a new file there."""
        try:
            status, out = await transport.run(stat_command(self.path), timeout_s=10)
        except Exception:
            return None
        parts = out.split()
        return parts[0].decode("ascii", "replace") if status == 0 and len(parts) == 2 else None


class ScrapeSource:
    """``GET url`` every ``interval_s`` through the transport (an SSH direct-tcpip channel remotely).

    ``parser_factory`` gets the node's index in ``RunStarted.nodes`` (GPU batches name nodes by it).
    """

    def __init__(
        self,
        name: str,
        url: str,
        parser_factory: Callable[[int], ScrapeParser],
        interval_s: float,
        timeout_s: float = 10.0,
    ):
        self.name = name
        self.url = url
        self.parser_factory = parser_factory
        self.parser: ScrapeParser | None = None  # kept across reconnects: it holds the previous counters
        self.periodic_s: float | None = interval_s
        self.timeout_s = timeout_s

    async def run(self, transport: Transport, ctx: NodeContext) -> None:
        if self.parser is None:
            self.parser = self.parser_factory(ctx.index)
        interval = self.periodic_s or 1.0
        while True:
            began = ctx.clock.time()
            try:
                text = await http_get(
                    transport.open_tcp, self.url, timeout_s=min(self.timeout_s, interval * 5)
                )
            except HttpError as exc:
                await ctx.health.notice(self.name, "warning", str(exc))
            else:
                ctx.health.forget_notice(self.name)
                try:
                    events = self.parser.parse(text, ctx.now())
                except Exception as exc:
                    await ctx.health.notice(self.name, "error", f"{redact(self.url)}: parser failed: {exc}")
                else:
                    if has_readings(events):  # a page that reads as nothing is no sign of life
                        ctx.saw(self.name)
                    await ctx.emit_all(events, self.name)
            await ctx.clock.sleep(max(0.0, interval - (ctx.clock.time() - began)))


async def _const(value: str | None) -> str | None:
    return value


def _last_t(placed: list[BacklogItem]) -> float:
    """The placed history's last time (a span of filled-in points: its last point's)."""
    last = placed[-1]
    return last.placed_t(last.last_t) if isinstance(last, FilledSpan) else last.t
