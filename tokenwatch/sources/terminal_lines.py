"""Log lines out of byte chunks as a terminal shows them, with tqdm's carriage-return rewrites.

A progress bar (tqdm) rewrites one terminal line with ``\\r`` for the whole run and writes ``\\n``
only at the end, so a log of an 80-minute run may hold its progress as one "line" of megabytes.
Splitting on ``\\n`` alone would show nothing until the run ends (and cut the line at the size
limit); here every ``\\r``-ended segment is a *rewrite*, readable as soon as it is complete, and the
``\\n``-ended text after the last ``\\r`` is the *line* the terminal keeps. ``\\r\\n`` is a plain line
end. A segment longer than the limit is reported once (*cut*) and dropped up to its end.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

PieceKind = Literal["rewrite", "line", "shown", "cut"]


@dataclass(frozen=True, slots=True)
class Piece:
    """One segment of line ``number`` (1-based): ``rewrite`` (ended by ``\\r``), ``line`` (ended by
    ``\\n``), ``shown`` (a line whose visible text is its last rewrite, already read) or ``cut``."""

    number: int
    data: bytes
    kind: PieceKind


class TerminalLineSplitter:
    """``feed(chunk)`` -> the pieces that chunk completed; ``flush()`` at end of input."""

    __slots__ = ("_dropping", "_last_rewrite", "_partial", "line_number", "max_segment_bytes")

    def __init__(self, max_segment_bytes: int) -> None:
        self.max_segment_bytes = max_segment_bytes
        self._partial = b""
        self._dropping = False  # inside an over-long segment: discard up to its end
        self._last_rewrite = b""  # what the terminal shows if the line ends on an empty segment
        self.line_number = 1

    def feed(self, data: bytes) -> list[Piece]:
        pieces: list[Piece] = []
        if self._dropping:  # the rest of an over-long segment, already reported, runs to its end
            ends = [i for i in (data.find(b"\r"), data.find(b"\n")) if i >= 0]
            if not ends:
                return pieces
            data = data[min(ends) :]
            self._dropping = False
            if data[:1] == b"\r" and data[1:2] not in (b"\n", b""):  # it was a rewrite: the line goes on
                data = data[1:]
        buffer = self._partial + data if self._partial else data
        lines = buffer.split(b"\n")
        rest = lines.pop()
        for line in lines:
            if line.endswith(b"\r"):
                line = line[:-1]
            if b"\r" in line:
                *rewrites, line = line.split(b"\r")
                for segment in rewrites:
                    self._end_segment(segment, pieces)
            self._end_line(line, pieces)
        if b"\r" in rest[:-1]:  # rewrites of the line still being written are complete already
            cut_at = rest.rindex(b"\r", 0, len(rest) - 1)
            for segment in rest[:cut_at].split(b"\r"):
                self._end_segment(segment, pieces)
            rest = rest[cut_at + 1 :]
        pending_cr = rest.endswith(b"\r")  # ends the segment, as a rewrite or a line: the next byte says
        if len(rest) - pending_cr > self.max_segment_bytes:
            pieces.append(Piece(self.line_number, b"", "cut"))
            if pending_cr:
                rest = b"\r"
            else:
                self._dropping, rest = True, b""
        self._partial = rest
        return pieces

    def flush(self) -> list[Piece]:
        """The last line of input that has no ``\\n``."""
        rest, self._partial = self._partial.rstrip(b"\r"), b""
        pieces: list[Piece] = []
        if rest or self._last_rewrite:
            self._end_line(rest, pieces)
        self._dropping = False
        return pieces

    @property
    def pending_bytes(self) -> int:
        return len(self._partial)

    def _end_segment(self, segment: bytes, pieces: list[Piece]) -> None:
        """A rewrite (a segment ended by a bare ``\\r``)."""
        if len(segment) > self.max_segment_bytes:
            pieces.append(Piece(self.line_number, b"", "cut"))
        elif segment:
            pieces.append(Piece(self.line_number, segment, "rewrite"))
            self._last_rewrite = segment

    def _end_line(self, segment: bytes, pieces: list[Piece]) -> None:
        """The text after the line's last ``\\r``, ended by ``\\n``: what the terminal keeps."""
        if len(segment) > self.max_segment_bytes:
            pieces.append(Piece(self.line_number, b"", "cut"))
            segment = b""
        if segment:
            pieces.append(Piece(self.line_number, segment, "line"))
        elif self._last_rewrite:
            pieces.append(Piece(self.line_number, self._last_rewrite, "shown"))
        self._last_rewrite = b""
        self.line_number += 1
