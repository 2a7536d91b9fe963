"""A recording file as pieces of decoded bytes, each marked where a reader could have started.

Plain ``.jsonl`` files are read in chunks cut at line ends: any line start is a place to start. A
``.zst`` file is a series of independent zstd frames (see :mod:`tokenwatch.recording.writer`): each
frame's lines are held until the frame's end (and checksum) proves them, then handed on, so a
damaged frame is dropped whole and reading goes on at the next intact frame, found by its magic number.
Frames longer than :data:`FRAME_HOLD_BYTES` (recordings written as one stream, before frames) are
handed on as they decode: damage there keeps what came before it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import BinaryIO

import zstandard

ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
SKIPPABLE_MAGIC_TAIL = b"\x2a\x4d\x18"  # bytes 1-3 of a skippable frame's magic (little-endian 0x184D2A5?)
CHUNK_BYTES = 1 << 20
FRAME_HOLD_BYTES = 16 << 20  # a frame's decoded lines held back until its end proves them


@dataclass(frozen=True, slots=True)
class Piece:
    """Decoded bytes. ``start``: the file offset where this piece begins a line a reader can start at
    (a frame of a ``.zst``, a line of a plain file); None: it continues the previous piece."""

    data: bytes
    start: int | None


Warn = Callable[[str], None]


def plain_pieces(fh: BinaryIO, offset: int) -> Iterator[Piece]:
    """Chunks of a plain file from ``offset`` (a line start), cut after their last newline."""
    fh.seek(offset)
    carry = b""
    begin = offset  # file offset of carry's first byte
    at_line_start = True
    while chunk := fh.read(CHUNK_BYTES):
        data = carry + chunk
        cut = data.rfind(b"\n") + 1
        if cut == 0:  # no line end in the whole chunk: a long line goes on
            yield Piece(data, begin if at_line_start else None)
            begin += len(data)
            carry, at_line_start = b"", False
            continue
        yield Piece(data[:cut], begin if at_line_start else None)
        begin += cut
        carry, at_line_start = data[cut:], True
    if carry:
        yield Piece(carry, begin if at_line_start else None)


def zstd_pieces(
    fh: BinaryIO, offset: int, warn: Warn, damaged: Callable[[int, str], None] | None = None
) -> Iterator[Piece]:
    """The decoded frames of a ``.zst`` file from ``offset`` (a frame start); ``warn`` hears of a damaged
    frame (dropped) and of a cut-off last frame (its complete blocks kept); ``damaged`` of a damaged
    frame's byte offset and what zstd said, before ``warn``."""
    start = offset
    fh.seek(start)
    pending = b""
    while True:
        raw = pending or fh.read(CHUNK_BYTES)
        pending = b""
        if not raw:
            return
        dobj = zstandard.ZstdDecompressor().decompressobj()
        held: list[bytes] = []
        held_bytes = fed = 0
        streamed = False  # part of this frame was handed on already (a frame longer than the hold)
        problem: str | None = None
        while True:
            try:
                out = dobj.decompress(raw)
            except zstandard.ZstdError as exc:
                problem = str(exc)
                break
            fed += len(raw)
            if out:
                held.append(out)
                held_bytes += len(out)
                if held_bytes > FRAME_HOLD_BYTES:
                    yield Piece(b"".join(held), None if streamed else start)
                    held, held_bytes, streamed = [], 0, True
            if dobj.eof:
                pending = dobj.unused_data
                break
            raw = fh.read(CHUNK_BYTES)
            if not raw:
                break
        if problem is None and dobj.eof:
            if held:
                yield Piece(b"".join(held), None if streamed else start)
            start += fed - len(pending)
            continue
        later = find_magic(fh, start + 1)
        if problem is None and later is None and not held and _skippable_at(fh, start):
            return  # a trailer cut off (recording.trailer): it held no events, nothing is lost
        if problem is None and later is None:  # the writer was killed: keep every complete block
            if held:
                yield Piece(b"".join(held), None if streamed else start)
            warn("compressed stream was cut off (the writer did not close it); kept every complete block")
            return
        if damaged is not None:
            damaged(start, problem or "it runs into the next frame")
        kept = "; what it held before the damage is kept" if streamed else ""
        warn(
            f"compressed frame at byte {start} is damaged ({problem or 'it runs into the next frame'}): "
            f"its events are lost{kept}; reading on at the next intact frame"
        )
        if later is None:
            return
        start = later
        fh.seek(start)
        pending = b""


def _skippable_at(fh: BinaryIO, offset: int) -> bool:
    """Whether a zstd skippable frame (magic 0x184D2A50-5F, no events) begins at ``offset``."""
    fh.seek(offset)
    head = fh.read(4)
    return len(head) == 4 and head[1:] == SKIPPABLE_MAGIC_TAIL and head[0] & 0xF0 == 0x50


def find_magic(fh: BinaryIO, offset: int) -> int | None:
    """The offset of the next zstd frame magic number at or after ``offset`` (None: there is none)."""
    fh.seek(offset)
    base = offset
    tail = b""
    while chunk := fh.read(CHUNK_BYTES):
        data = tail + chunk
        at = data.find(ZSTD_MAGIC)
        if at >= 0:
            return base - len(tail) + at
        tail = data[-(len(ZSTD_MAGIC) - 1) :]
        base += len(chunk)
    return None
