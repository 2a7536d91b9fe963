"""Reads recordings back: every complete line becomes an event; nothing a reader meets is fatal.

A torn last line (the writer was killed mid-line), garbage lines, records that do not decode and a
cut-off zstd stream are skipped with a warning naming the file and line; only a file that is not a
recording at all (no header) is an error.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

import orjson
import zstandard

from tokenwatch.events import GPU_METRICS, Event
from tokenwatch.recording.codec import SCHEMA_VERSION, CodecError, Decoder
from tokenwatch.recording.writer import HEADER_KEY

_CHUNK = 1 << 20
READABLE_VERSIONS: tuple[int, ...] = (SCHEMA_VERSION,)  # header versions this reader understands
# The longest line a reader holds. A GPU batch of the largest run (100,000 GPUs) is ~10 MiB; anything
# longer is damage, skipped as it streams past rather than gathered into memory.
MAX_LINE_BYTES = 64 << 20


class RecordingFormatError(ValueError):
    """Not a readable recording; one line naming the file."""


class RecordingReader:
    """Iterate over :meth:`events`; ``header`` is read on construction, ``warnings`` fill as you go."""

    def __init__(self, path: str | Path, gpu_metrics: tuple[str, ...] = GPU_METRICS) -> None:
        """``gpu_metrics``: decode only these GPU batch columns (see :class:`codec.Decoder`)."""
        self.path = Path(path)
        self.gpu_metrics = gpu_metrics
        self._decoder = Decoder(gpu_metrics)
        self.warnings: list[str] = []
        self.skipped = 0
        try:
            self._fh: BinaryIO = open(self.path, "rb")  # noqa: SIM115 - closed by close()/events()
        except FileNotFoundError:
            raise RecordingFormatError(f"{self.path}: no such file") from None
        except IsADirectoryError:
            raise RecordingFormatError(f"{self.path}: is a directory, not a recording") from None
        except OSError as exc:
            raise RecordingFormatError(f"{self.path}: cannot open: {exc.strerror}") from None
        self._lines = self._iter_lines()
        self.header = self._read_header()

    def _chunks(self) -> Iterator[bytes]:
        if self.path.suffix != ".zst":
            while chunk := self._fh.read(_CHUNK):
                yield chunk
            return
        # One decompressor per frame, so a cut-off last frame is noticed (not .eof at the end).
        dobj = zstandard.ZstdDecompressor().decompressobj()
        pending = b""
        while True:
            raw = pending or self._fh.read(_CHUNK)
            pending = b""
            if not raw:
                break
            try:
                out = dobj.decompress(raw)
            except zstandard.ZstdError as exc:
                self._warn(None, f"compressed data is damaged ({exc}); kept what came before")
                return
            if out:
                yield out
            if dobj.eof:
                pending = dobj.unused_data
                dobj = zstandard.ZstdDecompressor().decompressobj()
                if not pending and not (pending := self._fh.read(_CHUNK)):
                    return
        self._warn(
            None, "compressed stream was cut off (the writer did not close it); kept every complete block"
        )

    def _iter_lines(self) -> Iterator[tuple[int, bytes, bool]]:
        """(line number, line, complete) — complete is False for a last line with no newline.

        A line longer than :data:`MAX_LINE_BYTES` is skipped (with a warning) without being held."""
        number = 0
        tail = b""
        overlong = False  # inside a line already too long: drop bytes up to its newline
        for chunk in self._chunks():
            data = tail + chunk
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
                else:
                    yield number, data[start:end], True
                start = search = end + 1
            tail = data[start:]
            if overlong or len(tail) > MAX_LINE_BYTES:
                overlong, tail = True, b""
        if overlong:
            self._warn(number + 1, f"skipped: a line longer than {MAX_LINE_BYTES >> 20} MiB")
        elif tail.strip():
            yield number + 1, tail, False

    def _warn(self, line: int | None, message: str) -> None:
        self.skipped += 1
        where = f"{self.path}:{line}" if line is not None else str(self.path)
        self.warnings.append(f"{where}: {message}")

    def _read_header(self) -> dict[str, Any]:
        first = next(self._lines, None)
        if first is None:
            raise RecordingFormatError(
                f"{self.path}: empty, or cut off before its header: not a tokenwatch recording"
            )
        try:
            head = orjson.loads(first[1])
        except orjson.JSONDecodeError:
            head = None
        if not isinstance(head, dict) or HEADER_KEY not in head:
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
        return head

    def events(self) -> Iterator[Event]:
        try:
            for number, line, complete in self._lines:
                if not line.strip():
                    continue
                try:
                    yield self._decoder.loads(line)
                except CodecError as exc:
                    why = "torn last line (the recording was cut off)" if not complete else str(exc)
                    self._warn(number, f"skipped: {why}")
        finally:
            self.close()

    def close(self) -> None:
        self._fh.close()


def read_events(path: str | Path) -> tuple[list[Event], list[str]]:
    """All events of a recording and the warnings met on the way."""
    reader = RecordingReader(path)
    events = list(reader.events())
    return events, reader.warnings
