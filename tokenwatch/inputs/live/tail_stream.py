"""What a file tail produces, local or remote: where it starts, the file's bytes, and resets.

Both tailers speak in these items, so one consumer
(:class:`tokenwatch.inputs.live.node_sources.FileTailSource`) keeps the byte offset and the parser
whatever the transport:

- :class:`TailStart` — the stream begins at ``offset`` of the file with ``inode``;
- :class:`TailData` — the next bytes of the file;
- :class:`TailReset` — the file was rotated or truncated: what follows is a new file from byte 0;
- :class:`TailMessage` — the tailer has news that is not data (file missing, unreadable).

:class:`TailStreamSplitter` turns the output of the remote command of
:func:`tokenwatch.inputs.live.remote_commands.tail_command` into items: a ``TW-START`` header line, then
the file's bytes with GNU ``tail -F``'s announcements (merged from stderr, in order) lifted out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TypeAlias

from tokenwatch.inputs.live.remote_commands import TAIL_HEADER

MAX_HEADER = 256
MAX_MESSAGE = 4096  # a "tail: " line longer than this is file data, not an announcement
_PREFIX = b"tail: "
# GNU tail (LC_ALL=C) announcements. Only these are lifted out; any other line is the file's.
_RESET = re.compile(
    rb"^tail: .+(?:has appeared|has been replaced);  following new file$|^tail: .+: file truncated$"
)
_MESSAGE = re.compile(
    rb"^tail: (?:.+ has become inaccessible: .+|cannot open .+ for reading: .+|.+; giving up on this name"
    rb"|inotify .+|no files remaining|error reading .+|.+: cannot follow end of this type of file.*)$"
)


@dataclass(frozen=True, slots=True)
class TailStart:
    inode: str | None
    offset: int


@dataclass(frozen=True, slots=True)
class TailData:
    data: bytes


@dataclass(frozen=True, slots=True)
class TailReset:
    reason: str


@dataclass(frozen=True, slots=True)
class TailMessage:
    text: str


TailItem: TypeAlias = TailStart | TailData | TailReset | TailMessage


class TailStreamError(ValueError):
    """The remote tail's output did not start with its header (a broken shell or ``stat``)."""


class TailStreamSplitter:
    """Feed it the remote command's stdout in any chunking; the items come out the same."""

    def __init__(self) -> None:
        self._header: bytes | None = b""
        self._pending = b""
        self._at_line_start = True

    def feed(self, chunk: bytes) -> list[TailItem]:
        items: list[TailItem] = []
        if self._header is not None:
            self._header += chunk
            newline = self._header.find(b"\n")
            if newline < 0:
                if len(self._header) > MAX_HEADER:
                    raise TailStreamError(f"unexpected output: {self._header[:80]!r}")
                return items
            items.append(_parse_header(self._header[:newline]))
            chunk, self._header = self._header[newline + 1 :], None
        self._split(self._pending + chunk, items)
        return items

    def flush(self) -> list[TailItem]:
        """At the end of the stream: bytes held back as a possible announcement are file data."""
        items: list[TailItem] = []
        _add_data(items, self._pending)
        self._pending = b""
        return items

    def _split(self, buf: bytes, items: list[TailItem]) -> None:
        self._pending = b""
        pos = data_start = 0
        size = len(buf)
        while pos < size:
            if self._at_line_start and buf[pos] == _PREFIX[0]:
                head = buf[pos : pos + len(_PREFIX)]
                if _PREFIX.startswith(head):
                    newline = buf.find(b"\n", pos)
                    if newline < 0 and size - pos < MAX_MESSAGE:
                        # maybe an announcement still arriving: hold it back until its line ends
                        _add_data(items, buf[data_start:pos])
                        self._pending = buf[pos:]
                        return
                    if newline >= 0:
                        item = _announcement(buf[pos:newline])
                        if item is not None:
                            _add_data(items, buf[data_start:pos])
                            items.append(item)
                            pos = data_start = newline + 1
                            continue
            newline = buf.find(b"\n", pos)
            if newline < 0:
                self._at_line_start = False
                pos = size
            else:
                self._at_line_start = True
                pos = newline + 1
        _add_data(items, buf[data_start:])


def _add_data(items: list[TailItem], data: bytes) -> None:
    if data:
        items.append(TailData(data))


def _parse_header(line: bytes) -> TailStart:
    if not line.startswith(TAIL_HEADER):
        raise TailStreamError(f"unexpected output: {line[:80]!r}")
    parts = line[len(TAIL_HEADER) :].split()
    if len(parts) != 2 or not parts[1].isdigit():
        raise TailStreamError(f"bad header: {line[:80]!r}")
    inode = parts[0].decode("ascii", "replace")
    return TailStart(None if inode == "-" else inode, int(parts[1]))


def _announcement(line: bytes) -> TailItem | None:
    text = line.decode("utf-8", "replace").removeprefix("tail: ")
    if _RESET.match(line):
        return TailReset(text)
    if _MESSAGE.match(line):
        return TailMessage(text)
    return None
