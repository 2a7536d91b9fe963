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
        buffer = self._partial + data if self._partial else data
        start = 0
        size = len(buffer)
        while True:
            cr = buffer.find(b"\r", start)
            lf = buffer.find(b"\n", start)
            end = min(i for i in (cr, lf, size) if i >= 0)
            if end == size:
                break
            if buffer[end] == 0x0D and end + 1 == size:  # a lone \r at the end: \r\n or a rewrite?
                break
            segment = buffer[start:end]
            if buffer[end] == 0x0D and buffer[end + 1] != 0x0A:
                self._end_segment(segment, "rewrite", pieces)
                start = end + 1
                continue
            self._end_segment(segment, "line", pieces)
            self.line_number += 1
            start = end + (2 if buffer[end] == 0x0D else 1)
        rest = buffer[start:]
        if self._dropping:
            rest = rest[-1:] if rest.endswith(b"\r") else b""
        elif len(rest) > self.max_segment_bytes:
            pieces.append(Piece(self.line_number, b"", "cut"))
            self._dropping = True
            rest = b""
        self._partial = rest
        return pieces

    def flush(self) -> list[Piece]:
        """The last line of input that has no ``\\n``."""
        rest, self._partial = self._partial.rstrip(b"\r"), b""
        pieces: list[Piece] = []
        if rest or self._last_rewrite:
            self._end_segment(rest, "line", pieces)
            self.line_number += 1
        self._dropping = False
        return pieces

    @property
    def pending_bytes(self) -> int:
        return len(self._partial)

    def _end_segment(self, segment: bytes, kind: PieceKind, pieces: list[Piece]) -> None:
        if self._dropping:  # the rest of an over-long segment, already reported
            self._dropping = False
            segment = b""
        elif len(segment) > self.max_segment_bytes:
            pieces.append(Piece(self.line_number, b"", "cut"))
            segment = b""
        if kind == "rewrite":
            if segment:
                pieces.append(Piece(self.line_number, segment, "rewrite"))
                self._last_rewrite = segment
            return
        if segment:
            pieces.append(Piece(self.line_number, segment, "line"))
        elif self._last_rewrite:
            pieces.append(Piece(self.line_number, self._last_rewrite, "shown"))
        self._last_rewrite = b""
