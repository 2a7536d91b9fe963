"""Append-only, crash-safe recording writer: JSON lines, optionally zstandard-compressed.

Lines are buffered and handed to the OS with ``os.write`` at least every ``flush_interval_s``
(the session also calls :meth:`flush` on a timer), so after ``kill -9`` everything older than
about a second is on disk. A ``.zst`` file is a series of independent zstd frames, each ending on a
line and carrying a checksum: a flush ends a frame once it holds :data:`FRAME_BYTES` of lines and at
least :data:`LONGEST_LINES_PER_FRAME` times the longest line (other flushes end a block), so a reader
decodes every complete block of a cut-off file, skips a damaged frame to the next intact one, and can
start reading at any frame (a replay's seek).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import errno
import math
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
import zstandard

from tokenwatch import __version__
from tokenwatch.base.events import Event, GpuBatch, LatencyBatch, ProgressBatch
from tokenwatch.recording.codec import SCHEMA_VERSION, dumps, encode
from tokenwatch.recording.counter_deltas import CounterDeltaWriter
from tokenwatch.recording.gpu_int_columns import GpuIntColumnWriter
from tokenwatch.recording.latency_buckets import TABLE_KEY, bucket_records, table_differences

if TYPE_CHECKING:
    from tokenwatch.base.clock import Clock

HEADER_KEY = "tokenwatch_recording"
_MAX_BUFFER_BYTES = 1 << 20
# Lines per zstd frame (uncompressed). Damage loses at most one frame; a reader starting mid-file decodes
# at most one frame it does not need. 1 MiB frames compress as well as one stream (within 1 %).
FRAME_BYTES = 1 << 20
# ...and at least this many of the longest line written: the counters' differences start afresh with each
# frame, and a 64-rack GPU batch is ~370 KB, so 1 MiB frames wrote every third batch whole (3.15 MB per
# rack-hour, 2.6 with frames of 8 batches). A rack's batch is ~6 KB: its frames stay 1 MiB.
LONGEST_LINES_PER_FRAME = 8
# Latency histograms held to be written together (recording.latency_buckets): a rack's burst is 54
# (18 nodes x 3 metrics); a source that sends nothing else still has them written at this many.
_MAX_BURST = 4096


class RecordingError(OSError):
    """The recording cannot be created or written; the message names the file.

    ``disk_full``: the write failed for want of space (ENOSPC, EDQUOT): the recording stopped, what was
    written before is intact. ``written_until_t``: the run time of the latest event in the file then (None:
    no event), which is where a reader of the file will find it ends, not the time of the failure."""

    def __init__(
        self, message: str, *, disk_full: bool = False, written_until_t: float | None = None
    ) -> None:
        super().__init__(message)
        self.disk_full = disk_full
        self.written_until_t = written_until_t


def header(meta: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        HEADER_KEY: SCHEMA_VERSION,
        "tokenwatch_version": __version__,
        "created": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        **(meta or {}),
    }


class RecordingWriter:
    def __init__(
        self,
        path: str | Path,
        *,
        clock: Clock | None = None,
        flush_interval_s: float = 0.5,
        zstd_level: int = 3,
        meta: dict[str, Any] | None = None,
        overwrite: bool = False,
    ) -> None:
        self.path = Path(path)
        # Only the clock's time() is used; importing tokenwatch.base.clock would drag asyncio into readers.
        self._now = clock.time if clock is not None else time.monotonic
        self.flush_interval_s = flush_interval_s
        flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | (os.O_TRUNC if overwrite else os.O_EXCL)
        try:
            self._fd: int | None = os.open(self.path, flags, 0o644)
        except FileExistsError:
            raise RecordingError(f"{self.path}: already exists; choose another name or remove it") from None
        except OSError as exc:
            raise RecordingError(f"{self.path}: cannot create the recording: {exc.strerror}") from None
        self._compressor = zstandard.ZstdCompressor(level=zstd_level, write_checksum=True)
        self._zstd = self._compressor.compressobj() if self.path.suffix == ".zst" else None
        self._frame_bytes = 0  # lines in the open frame
        self._longest = 0  # the longest line written
        # The GPU batches' columns as whole numbers (the energy counters' included) and nodes' work counters,
        # most as differences, chained within a frame (recording.gpu_int_columns, recording.counter_deltas).
        self._gpu_ints = GpuIntColumnWriter() if self._zstd is not None else None
        self._counts = CounterDeltaWriter() if self._zstd is not None else None
        self._buffer: list[bytes] = []
        self._histograms: list[LatencyBatch] = []  # a burst of latency histograms not yet written
        self._buffered = 0
        self._last_flush = self._now()
        self._good_size = 0  # bytes on disk up to the end of the last complete write
        self.events_written = 0
        # The latest run time among the events buffered, and among those on disk (a failed write loses the
        # buffer: the file then ends at the latter, which can be minutes before the failure).
        self._buffered_until_t: float | None = None
        self.written_until_t: float | None = None
        differences = table_differences() if self._zstd is not None else []
        if differences:  # where this machine's bucket values differ from the reference (latency_buckets)
            meta = {**(meta or {}), TABLE_KEY: differences}
        self._append(orjson.dumps(header(meta)) + b"\n")
        self.flush()

    def fileno(self) -> int:
        if self._fd is None:
            raise ValueError(f"{self.path}: the recording is closed")
        return self._fd

    def write(self, event: Event) -> None:
        """Buffer one event. After a failed write (:class:`RecordingError`, raised once) the recording
        has stopped: later events are dropped."""
        if self._fd is None:
            return
        if self._histograms and (type(event) is not LatencyBatch or len(self._histograms) >= _MAX_BURST):
            self._write_histograms()
        if self._gpu_ints is not None and type(event) is GpuBatch:
            record = self._gpu_ints.record(event)
            self._append(orjson.dumps(record, option=orjson.OPT_SERIALIZE_NUMPY) + b"\n")
        elif self._counts is not None and type(event) is ProgressBatch:
            record = self._counts.rewrite(event, encode(event))
            self._append(orjson.dumps(record, option=orjson.OPT_SERIALIZE_NUMPY) + b"\n")
        elif self._zstd is not None and type(event) is LatencyBatch:
            # Held until the burst ends (the next other event, or a flush): written as bucket numbers
            # together (recording.latency_buckets).
            self._histograms.append(event)
        else:
            self._append(dumps(event))
        self.events_written += 1
        if self._buffered_until_t is None or event.t > self._buffered_until_t:
            self._buffered_until_t = event.t
        if self._buffered > _MAX_BUFFER_BYTES or (
            self.flush_interval_s != math.inf and self._now() - self._last_flush >= self.flush_interval_s
        ):
            self.flush()

    def _write_histograms(self) -> None:
        events, self._histograms = self._histograms, []
        for event, record in zip(events, bucket_records(events), strict=True):
            if record is None:
                self._append(dumps(event))
            else:
                self._append(orjson.dumps(record, option=orjson.OPT_SERIALIZE_NUMPY) + b"\n")

    def _append(self, line: bytes) -> None:
        self._buffer.append(line)
        self._buffered += len(line)
        if len(line) > self._longest:
            self._longest = len(line)

    def flush(self) -> None:
        """Hand everything buffered to the OS (for ``.zst`` a complete block, or the end of a frame)."""
        if self._fd is None:
            return
        if self._histograms:
            self._write_histograms()
        data = b"".join(self._buffer)
        self._buffer.clear()
        self._buffered = 0
        if self._zstd is not None:
            self._frame_bytes += len(data)
            if self._frame_bytes >= max(FRAME_BYTES, LONGEST_LINES_PER_FRAME * self._longest):
                # End the frame: the next one starts afresh.
                data = self._zstd.compress(data) + self._zstd.flush(zstandard.COMPRESSOBJ_FLUSH_FINISH)
                self._zstd = self._compressor.compressobj()
                self._frame_bytes = 0
                if self._gpu_ints is not None and self._counts is not None:
                    self._gpu_ints.new_frame()
                    self._counts.new_frame()
            else:
                data = self._zstd.compress(data) + self._zstd.flush(zstandard.COMPRESSOBJ_FLUSH_BLOCK)
        self._write_all(data)
        self._last_flush = self._now()

    def _write_all(self, data: bytes) -> None:
        assert self._fd is not None
        view = memoryview(data)
        try:
            while view:
                view = view[os.write(self._fd, view) :]
        except OSError as exc:
            self._stop_after_failure()
            full = exc.errno in (errno.ENOSPC, errno.EDQUOT)
            raise RecordingError(
                f"{self.path}: write failed: {exc.strerror}",
                disk_full=full,
                written_until_t=self.written_until_t,
            ) from None
        self._good_size += len(data)
        self.written_until_t = self._buffered_until_t

    def _stop_after_failure(self) -> None:
        """Cut a partly written block off the end (so the file ends where the last complete write did:
        no torn line, no damaged block) and close: the recording has stopped."""
        fd, self._fd = self._fd, None
        self._buffer.clear()
        self._histograms.clear()
        self._buffered = 0
        if fd is None:
            return
        with contextlib.suppress(OSError):  # frees space on a full disk; not possible on every file
            os.ftruncate(fd, self._good_size)
        with contextlib.suppress(OSError):
            os.close(fd)

    def close(self) -> None:
        if self._fd is None:
            return
        self.flush()
        if self._zstd is not None and self._fd is not None and self._frame_bytes:
            self._write_all(self._zstd.flush(zstandard.COMPRESSOBJ_FLUSH_FINISH))
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    @property
    def closed(self) -> bool:
        return self._fd is None

    def __enter__(self) -> RecordingWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
