"""Reads recordings back: every complete line becomes an event; nothing a reader meets is fatal.

A torn last line (the writer was killed mid-line), garbage lines, records that do not decode, a
damaged or cut-off zstd frame and a span where run time goes back (a body appended twice) are skipped
with a warning naming the file and line; only a file that is not a recording at all (no header) is an
error. What was lost or left out is also in :attr:`RecordingReader.losses`, for the run's summary.

A reader may start in the middle of a file, at a :class:`ReadPoint` an earlier reader passed (a .zst
frame, a line of a plain file): a replay seeks by re-reading from there instead of keeping every event.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import orjson

from tokenwatch.base.events import GPU_METRICS, Event
from tokenwatch.base.safe_files import NotARegularFileError, open_regular
from tokenwatch.recording.codec import SCHEMA_VERSION, CodecError, Decoder
from tokenwatch.recording.latency_buckets import TABLE_KEY, BucketRecordError, writers_table
from tokenwatch.recording.pieces import Piece, plain_pieces, zstd_pieces
from tokenwatch.recording.time_order import TimeOrder, Verdict
from tokenwatch.recording.writer import HEADER_KEY

READABLE_VERSIONS: tuple[int, ...] = (SCHEMA_VERSION,)  # header versions this reader understands
# The longest line a reader holds. A GPU batch of the largest run (100,000 GPUs) is ~10 MiB; anything
# longer is damage, skipped as it streams past rather than gathered into memory.
MAX_LINE_BYTES = 64 << 20
_HEADER_PREFIX = b'{"' + HEADER_KEY.encode() + b'"'


class RecordingFormatError(ValueError):
    """Not a readable recording; one line naming the file."""


@dataclass(frozen=True, slots=True)
class ReadPoint:
    """A place a reader can start at: byte ``offset`` of the file begins line ``line + 1``, and ``order``
    is what the time-order filter knew there (copied: never changed once taken)."""

    offset: int
    line: int
    order: TimeOrder


class RecordingReader:
    """Iterate over :meth:`events`; ``header`` is read on construction, ``warnings`` fill as you go.

    ``point`` is the latest :class:`ReadPoint` passed and ``since_point`` the events handed out since it:
    together they say where the last event came from, so a later reader can come back to it."""

    def __init__(
        self, path: str | Path, gpu_metrics: tuple[str, ...] = GPU_METRICS, start: ReadPoint | None = None
    ) -> None:
        """``gpu_metrics``: decode only these GPU batch columns (see :class:`codec.Decoder`). ``start``:
        read from there (a point an earlier reader of this file passed) instead of the beginning."""
        self.path = Path(path)
        self.gpu_metrics = gpu_metrics
        self._decoder = Decoder(gpu_metrics)
        self.warnings: list[str] = []
        self.losses: list[str] = []  # the warnings about events lost or left out (damage, repeats)
        self.skipped = 0
        self._zstd = self.path.suffix == ".zst"
        try:
            # Only a regular file: a FIFO in its place would block the open (and the replay) until a
            # writer came.
            self._fh: BinaryIO = os.fdopen(open_regular(self.path), "rb")  # closed by close()/events()
        except FileNotFoundError:
            raise RecordingFormatError(f"{self.path}: no such file") from None
        except NotARegularFileError as exc:
            why = (exc.strerror or "not a regular file").replace("a regular file", "a recording")
            raise RecordingFormatError(f"{self.path}: {why}") from None
        except OSError as exc:
            raise RecordingFormatError(f"{self.path}: cannot open: {exc.strerror}") from None
        self.header = self._read_header()
        try:  # latency histograms in bucket form read as the writer's table had them
            self._decoder.bucket_values = writers_table(self.header.get(TABLE_KEY))
        except BucketRecordError as exc:
            self._warn(1, str(exc))
        begin = start or ReadPoint(0, 0, TimeOrder())
        self._order = begin.order.copy()
        self.point = begin
        self.since_point = 0
        self._lines = self._iter_lines(begin)

    def fraction_read(self) -> float:
        """How far through the file the reading is (0..1, by bytes of the file): a slow load's progress."""
        try:
            size = self.path.stat().st_size
            return min(1.0, self._fh.tell() / size) if size else 1.0
        except (OSError, ValueError):  # closed: read to its end
            return 1.0

    # ------------------------------------------------------------------ bytes and lines
    def _pieces(self, offset: int) -> Iterator[Piece]:
        if self._zstd:
            return zstd_pieces(self._fh, offset, lambda message: self._warn(None, message, loss=True))
        return plain_pieces(self._fh, offset)

    def _iter_lines(self, begin: ReadPoint) -> Iterator[tuple[int, bytes, bool, int | None]]:
        """(line number, line, complete, offset of the read point it begins, or None).

        ``complete`` is False for a last line with no newline. A line longer than :data:`MAX_LINE_BYTES`
        is skipped (with a warning) without being held."""
        number = begin.line
        tail = b""
        overlong = False  # inside a line already too long: drop bytes up to its newline
        for piece in self._pieces(begin.offset):
            if piece.start is not None and (tail or overlong):  # a frame was lost mid-line
                number += 1
                self._warn(number, "skipped: a line cut short by damage")
                tail, overlong = b"", False
            point = piece.start
            data = tail + piece.data
            start = 0
            search = len(tail)  # the tail has no newline: look only at the new bytes
            while True:
                end = data.find(b"\n", search)
                if end < 0:
                    break
                number += 1
                if overlong:
                    overlong = False
                    self._warn(number, f"skipped: a line longer than {MAX_LINE_BYTES >> 20} MiB")
                elif number == 1:
                    point = None  # the header, read already: what follows counts from the start (line 0)
                else:
                    yield number, data[start:end], True, point
                    point = None
                start = search = end + 1
            tail = data[start:]
            if overlong or len(tail) > MAX_LINE_BYTES:
                overlong, tail = True, b""
        if overlong:
            self._warn(number + 1, f"skipped: a line longer than {MAX_LINE_BYTES >> 20} MiB")
        elif tail.strip():
            yield number + 1, tail, False, None

    def _warn(self, line: int | None, message: str, loss: bool = False) -> None:
        self.skipped += 1
        where = f"{self.path}:{line}" if line is not None else str(self.path)
        self.warnings.append(f"{where}: {message}")
        if loss:
            self.losses.append(f"{where}: {message}")

    # ------------------------------------------------------------------ the header
    def _first_line(self) -> bytes | None:
        """The header's line (None: no bytes decode); a ``.zst`` damaged on the way is noted in
        ``_damage`` (byte offset, what zstd said)."""
        pieces = self._pieces(0)
        if self._zstd:
            pieces = zstd_pieces(
                self._fh,
                0,
                lambda message: self._warn(None, message, loss=True),
                lambda at, why: self._damage.append((at, why)),
            )
        for piece in pieces:
            end = piece.data.find(b"\n")
            if end >= 0 or len(piece.data) > MAX_LINE_BYTES:
                return piece.data[: max(end, 0)]
            return piece.data  # a header without its newline: judged below
        return None

    def _read_header(self) -> dict[str, Any]:
        self._damage: list[tuple[int, str]] = []
        first = self._first_line()
        try:
            head = orjson.loads(first) if first else None
        except orjson.JSONDecodeError:
            head = None
        if not isinstance(head, dict) or HEADER_KEY not in head:
            if self._damage:  # the bytes where the header should be do not decompress
                at, why = self._damage[0]
                raise RecordingFormatError(
                    f"{self.path}: damaged: the compressed data fails at byte {at} ({why}), "
                    "before the recording's header could be read"
                )
            if not first:
                empty = self._fh.seek(0, 2) == 0
                raise RecordingFormatError(
                    f"{self.path}: {'empty' if empty else 'cut off before its header'}: "
                    "not a tokenwatch recording"
                )
            raise RecordingFormatError(f"{self.path}: not a tokenwatch recording (line 1 is not its header)")
        version = head[HEADER_KEY]
        if type(version) is not int or version not in READABLE_VERSIONS:  # bool is an int: refused
            readable = ", ".join(map(str, READABLE_VERSIONS))
            newer = type(version) is int and version > max(READABLE_VERSIONS)
            raise RecordingFormatError(
                f"{self.path}: recording format version {orjson.dumps(version).decode()[:40]} is "
                f"{'newer than this tokenwatch reads' if newer else 'not one this tokenwatch reads'} "
                f"(this tokenwatch reads version {readable})"
            )
        self.warnings.clear()  # the header's own read may have met (and will meet again) the same damage
        self.losses.clear()
        self.skipped = 0
        return head

    # ------------------------------------------------------------------ events
    def events(self) -> Iterator[Event]:
        last = self.point.line
        try:
            for number, line, complete, point in self._lines:
                last = number
                if point is not None:
                    self.point = ReadPoint(point, number - 1, self._order.copy())
                    self.since_point = 0
                    if self._zstd:  # differences chain within a frame; a plain file's chunks are no frames
                        self._decoder.new_frame()
                if not line.strip():
                    continue
                if line.startswith(_HEADER_PREFIX):
                    self._warn(
                        number,
                        "a second recording header: another recording was appended to this one (cat a b?)",
                        loss=True,
                    )
                    continue
                try:
                    event = self._decoder.loads(line)
                except CodecError as exc:
                    why = "torn last line (the recording was cut off)" if not complete else str(exc)
                    self._warn(number, f"skipped: {why}")
                    continue
                verdict = self._order.admit(event, number, self._order_warning)
                if verdict is Verdict.STOP:
                    return
                if verdict is Verdict.KEEP:
                    self.since_point += 1
                    yield event
            self._order.finish(last, self._order_warning)
        finally:
            self.close()

    def _order_warning(self, line: int, message: str) -> None:
        self._warn(line, message, loss=True)

    def close(self) -> None:
        self._fh.close()


def read_events(path: str | Path) -> tuple[list[Event], list[str]]:
    """All events of a recording and the warnings met on the way."""
    reader = RecordingReader(path)
    events = list(reader.events())
    return events, reader.warnings
