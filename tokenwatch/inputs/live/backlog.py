"""What a tailed file already held when the watch began: its history, placed in time, or a baseline.

Attaching to a run in progress, a log or a LoadGen trace holds minutes of records written before the
watch started. Crediting them all to the first seconds of the watch makes a spike (a vLLM server making
~1,000 tok/s read as 24,245 tok/s). So a file tail reads the backlog once, up to the size the file had
when it was looked at, and then:

* **places it in time** when its records carry their own time (log lines with timestamps, the trace's
  and the endpoints events' own clocks): each record's time on the source's clock is mapped to Unix time
  by the file's modification time, which is when its newest record was written (so neither the log's
  time zone nor its missing year matters; over SSH the node's clock is corrected by its offset from
  ours, read in the same command). The run's history is then filled in before live data flows;
* otherwise takes it as a **baseline**: its counters are where this source starts from, nothing in it
  is counted as made after the watch began. Notices, the "finished" verdict, LoadGen's detail records
  (its settings, plan and result) and the last log lines (for the node screen) are kept.

Either way the live tail resumes at the byte where the backlog ended, with the same parser, so nothing
is read twice, and a writer's clock carries over: the first live rate line is credited the time since
the last backlog line, never a whole interval nor the backlog again.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from tokenwatch.base.events import Event, LoadGenDetail, LogLine, NodeStatus, Notice, Progress
from tokenwatch.inputs.live.remote_commands import BACKLOG_HEADER, backlog_command
from tokenwatch.inputs.live.transport import Transport
from tokenwatch.sources.filled_span import BacklogItem, FilledSpan

MAX_BACKLOG_BYTES = 512 << 20  # read at most the last 512 MiB of a file (an 80-minute rack trace is less)
KEEP_LOG_LINES = 200  # of a backlog (placed or a baseline): the node screen's last lines, as the core keeps
READ_CHUNK = 1 << 20
MAX_HISTORY_S = 24 * 3600.0  # history older than this before the watch is left out (a week-old log)


@runtime_checkable
class BacklogParser(Protocol):
    """A stream parser that can read a backlog with the times its records carry."""

    def feed_backlog(self, data: bytes) -> Sequence[BacklogItem]:
        """Events (and spans of filled-in points) at times on the source's own clock (seconds)."""
        ...

    def end_backlog(self) -> tuple[Sequence[BacklogItem], tuple[float, float] | None]:
        """The last events, and (the run's start, the newest record) on that clock; None if the backlog
        cannot be placed in time."""
        ...


@dataclass(frozen=True, slots=True)
class FileState:
    """The file as it was when its backlog was read: ``mtime`` in Unix time on this machine's clock."""

    inode: str | None
    size: int
    mtime: float
    skipped: int = 0  # bytes at its head left unread (a file larger than MAX_BACKLOG_BYTES)


@dataclass(slots=True)
class Backfill:
    """One source's history: ``placed`` events have ``t`` in Unix time (a log's filled-in points as
    :class:`FilledSpan`, placed too), ``start_wall`` is the run's start as the source knows it;
    ``at_start`` events belong to the moment the live watch starts."""

    source: str
    placed: Sequence[BacklogItem] = field(default_factory=list)
    start_wall: float | None = None
    at_start: list[Event] = field(default_factory=list)


def retime(event: Event, t: float) -> Event:
    if type(event) is Progress:  # most of a history: built directly, several times faster than replace
        return Progress(
            t, event.node, event.samples_done, event.tokens_done, event.prompt_tokens_done, event.filled
        )
    if type(event) is LogLine:  # a backlog's last lines, 200 a node (14,400 for a 72-node rack)
        return LogLine(t, event.node, event.text)
    return dataclasses.replace(event, t=t)


def last_lines_only(events: list[BacklogItem], keep: int = KEEP_LOG_LINES) -> list[BacklogItem]:
    """``events`` with only the last ``keep`` of their log lines (the node screen's; the core keeps no
    more): a backlog of a busy server's log is mostly lines, each an event through the core otherwise."""
    seen = 0
    out: list[BacklogItem] = []
    for event in reversed(events):
        if isinstance(event, LogLine):
            seen += 1
            if seen > keep:
                continue
        out.append(event)
    out.reverse()
    return out


def place(
    events: Iterable[BacklogItem], clock: tuple[float, float], mtime: float
) -> tuple[list[BacklogItem], float]:
    """Events on a source's clock -> Unix time, anchored so the newest record was written at ``mtime``.
    Times never go back within one source (a clock that went backwards in a log holds its place), so
    a cumulative counter is never read as restarting. Returns the events and the run's start."""
    first, last = clock
    anchor = mtime - last
    placed: list[BacklogItem] = []
    latest = -math.inf
    for event in events:
        if isinstance(event, FilledSpan):  # its points follow the same rule, made when merged
            placed.append(event.placed(first, anchor, latest))
            latest = max(latest, max(event.last_t, first) + anchor)
            continue
        latest = max(latest, max(event.t, first) + anchor)
        placed.append(retime(event, latest))
    return placed, first + anchor


class Baseline:
    """The counters a backlog that could not be placed in time had reached: subtracted from every later
    ``Progress`` of the node, so the run is credited only what the source counts from now on."""

    def __init__(self, node: str) -> None:
        self.node = node
        self.counts: tuple[int | None, int | None, int | None] = (None, None, None)

    def take(self, events: Iterable[BacklogItem]) -> list[Event]:
        """Read a backlog's events: remember the node's last counters; keep what is news now."""
        kept: list[Event] = []
        lines: deque[Event] = deque(maxlen=KEEP_LOG_LINES)
        for event in events:
            if isinstance(event, Progress) and event.node == self.node:
                self.counts = (event.samples_done, event.tokens_done, event.prompt_tokens_done)
            elif isinstance(event, LogLine):
                lines.append(event)
            elif isinstance(event, Notice | NodeStatus | LoadGenDetail):
                kept.append(event)  # LoadGen's settings, plan and result hold whenever they were written
        return [*lines, *kept]

    def apply(self, events: list[Event]) -> list[Event]:
        if self.counts == (None, None, None):
            return events
        return [self._less(e) if isinstance(e, Progress) and e.node == self.node else e for e in events]

    def _less(self, event: Progress) -> Progress:
        samples, tokens, prompt = self.counts

        def minus(value: int | None, base: int | None) -> int | None:
            return None if value is None else value - (base or 0)

        return Progress(
            event.t,
            event.node,
            minus(event.samples_done, samples),
            minus(event.tokens_done, tokens),
            minus(event.prompt_tokens_done, prompt),
        )


def read_local_backlog(path: str, consume: Callable[[bytes], None]) -> FileState | None:
    """Read ``path`` up to its current size into ``consume`` (blocking: run it in a thread). None when
    there is no file yet: whatever it will hold is this run's."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        return None
    try:
        st = os.fstat(fd)
        skipped = max(0, st.st_size - MAX_BACKLOG_BYTES)
        os.lseek(fd, skipped, os.SEEK_SET)
        left = st.st_size - skipped
        head = skipped > 0  # a cut file starts mid-line: drop up to the first line end
        while left > 0:
            data = os.read(fd, min(READ_CHUNK, left))
            if not data:
                break
            left -= len(data)
            if head:
                newline = data.find(b"\n")
                if newline < 0:
                    continue
                data, head = data[newline + 1 :], False
            consume(data)
        return FileState(str(st.st_ino), st.st_size - left, st.st_mtime, skipped)
    finally:
        os.close(fd)


class BacklogStreamError(ValueError):
    """The node's answer to the backlog command did not start with its header."""


async def read_remote_backlog(
    transport: Transport, path: str, consume: Callable[[bytes], None], wall_now: Callable[[], float]
) -> FileState | None:
    """Like :func:`read_local_backlog`, through the node's connection; ``wall_now`` is our Unix time,
    to move the node's mtime onto our clock."""
    stream = await transport.start([], shell_command=backlog_command(path, MAX_BACKLOG_BYTES))
    try:
        header = b""
        while b"\n" not in header:
            chunk = await stream.read()
            if not chunk:
                raise BacklogStreamError(f"no answer about {path}")
            header += chunk
            if len(header) > 512 and b"\n" not in header:
                raise BacklogStreamError(f"unexpected answer about {path}: {header[:60]!r}")
        line, rest = header.split(b"\n", 1)
        state, skew = _parse_backlog_header(line, wall_now())
        if state is None:
            return None
        left = state.size - state.skipped
        head = state.skipped > 0
        data = rest
        while True:
            data = data[:left]
            left -= len(data)
            if head and data:
                newline = data.find(b"\n")
                data, head = (data[newline + 1 :], False) if newline >= 0 else (b"", True)
            if data:
                consume(data)
            if left <= 0:
                break
            data = await stream.read()
            if not data:
                break
        return dataclasses.replace(state, size=state.size - max(0, left), mtime=state.mtime + skew)
    finally:
        await stream.aclose()


def _parse_backlog_header(line: bytes, our_now: float) -> tuple[FileState | None, float]:
    if not line.startswith(BACKLOG_HEADER):
        raise BacklogStreamError(f"unexpected answer: {line[:60]!r}")
    parts = line[len(BACKLOG_HEADER) :].decode("ascii", "replace").split()
    if len(parts) != 5:
        raise BacklogStreamError(f"bad header: {line[:80]!r}")
    inode, size, mtime, node_now, start = parts
    if inode == "-":
        return None, 0.0
    try:
        state = FileState(inode, int(size), float(mtime), int(start))
        skew = our_now - float(node_now) if float(node_now) > 0 else 0.0
    except ValueError:
        raise BacklogStreamError(f"bad header: {line[:80]!r}") from None
    return state, skew
