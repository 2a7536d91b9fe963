"""Complete lines out of byte chunks, with bounded memory, and bounded reporting of skipped lines.

Streaming sources (``tail -f`` of a trace, ``nvidia-smi -lms``, a harness log) deliver bytes cut
anywhere; :class:`LineSplitter` returns only complete lines and keeps the rest for the next chunk.
A line longer than ``max_line_bytes`` is cut (its head kept, the rest dropped up to the next newline)
so that a runaway writer cannot grow our buffer without bound.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from tokenwatch.base.events import Event, Notice

DEFAULT_MAX_LINE_BYTES = 1 << 20  # 1 MiB: far above any real line of the formats we read
MAX_NOTICES = 100  # per parser: after that one summary notice, then silence (counts are kept)
SNIPPET_CHARS = 80


@dataclass(slots=True)
class SplitLines:
    """Lines completed by one chunk. ``first_line`` is the 1-based number of ``lines[0]``."""

    first_line: int
    lines: list[bytes]
    cut: list[int] = field(default_factory=list)  # numbers of lines that were longer than the limit


class LineSplitter:
    """``feed(chunk)`` -> the lines that chunk completed (without their ``\\n``)."""

    __slots__ = ("_cut_current", "_dropping", "_partial", "line_count", "max_line_bytes")

    def __init__(self, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES) -> None:
        self.max_line_bytes = max_line_bytes
        self._partial = b""
        self._dropping = False  # inside an over-long line: discard up to the next newline
        self._cut_current = False
        self.line_count = 0  # lines returned so far

    def feed(self, data: bytes) -> SplitLines:
        first = self.line_count + 1
        cut: list[int] = []
        if self._dropping:
            newline = data.find(b"\n")
            if newline < 0:
                return SplitLines(first, [], cut)
            data = data[newline:]
            self._dropping = False
        buffer = self._partial + data if self._partial else data
        lines = buffer.split(b"\n")
        self._partial = lines.pop()
        if self._cut_current and lines:
            cut.append(first)
            self._cut_current = False
        limit = self.max_line_bytes
        for i, line in enumerate(lines):
            if len(line) > limit:
                lines[i] = line[:limit]
                cut.append(first + i)
        if len(self._partial) > limit:
            self._partial = self._partial[:limit]
            self._dropping = True
            self._cut_current = True
        self.line_count += len(lines)
        return SplitLines(first, lines, sorted(set(cut)))

    def flush(self) -> SplitLines:
        """The last line of a file that does not end in a newline (call at end of input)."""
        first = self.line_count + 1
        if not self._partial:
            return SplitLines(first, [])
        line, self._partial, self._dropping = self._partial, b"", False
        cut = [first] if self._cut_current else []
        self._cut_current = False
        self.line_count += 1
        return SplitLines(first, [line], cut)

    @property
    def pending_bytes(self) -> int:
        return len(self._partial)


def snippet(line: bytes | str) -> str:
    """A short, printable excerpt of a bad line for a message."""
    text = line.decode("utf-8", "replace") if isinstance(line, bytes) else line
    text = text.strip()
    return repr(text if len(text) <= SNIPPET_CHARS else text[:SNIPPET_CHARS] + "…")


def checked_tokens_per_sample(value: float | None) -> float | None:
    """A parser's fixed tokens-per-sample figure: finite and >= 0, or None (tokens unknown)."""
    if value is not None and not (math.isfinite(value) and value >= 0):
        raise ValueError(f"tokens_per_sample must be a non-negative number, not {value}")
    return value


class NoticeLog:
    """Warnings about skipped input, as ``Notice`` events, at most :data:`MAX_NOTICES` per parser."""

    __slots__ = ("limit", "node", "reported", "skipped", "source")

    def __init__(self, source: str, node: str | None, limit: int = MAX_NOTICES) -> None:
        self.source = source
        self.node = node
        self.limit = limit
        self.reported = 0
        self.skipped = 0  # every skipped line, reported or not

    def warn(self, out: list[Event], t: float, message: str) -> None:
        """Append a warning for one skipped input (``out`` is the parser's event list)."""
        self.skipped += 1
        if self.reported < self.limit:
            self.reported += 1
            out.append(Notice(t, "warning", f"{self.source}: {message}", self.node, self.source))
        elif self.reported == self.limit:
            self.reported += 1
            out.append(
                Notice(
                    t,
                    "warning",
                    f"{self.source}: more than {self.limit} bad lines; further ones are skipped silently",
                    self.node,
                    self.source,
                )
            )


class LineParser:
    """Base of the streaming line parsers: ``feed(chunk, t)`` / ``close(t)`` -> events.

    Subclasses set ``self._lines`` (a :class:`LineSplitter`) and ``self.notices``, and implement
    :meth:`parse_line` for one complete line; :meth:`end_of_chunk` may add events once per chunk.
    Over-long lines are skipped here, with a warning, before a subclass sees them.
    """

    _lines: LineSplitter
    notices: NoticeLog

    def feed(self, data: bytes, t: float) -> list[Event]:
        return self._parse(self._lines.feed(data), t)

    def close(self, t: float) -> list[Event]:
        """End of input: a last line without a newline still counts."""
        return self._parse(self._lines.flush(), t)

    def _parse(self, split: SplitLines, t: float) -> list[Event]:
        out: list[Event] = []
        for offset, line in enumerate(split.lines):
            number = split.first_line + offset
            if number in split.cut:
                self.notices.warn(
                    out, t, f"line {number}: longer than {self._lines.max_line_bytes} bytes, skipped"
                )
                continue
            self.parse_line(number, line, t, out)
        self.end_of_chunk(t, out)
        return out

    def parse_line(self, number: int, line: bytes, t: float, out: list[Event]) -> None:
        raise NotImplementedError

    def end_of_chunk(self, t: float, out: list[Event]) -> None:
        """Called after each chunk's lines (default: nothing)."""
