"""Recordings: the typed event stream as JSON lines (optionally .zst), written crash-safe, read tolerantly."""

from typing import TYPE_CHECKING

from tokenwatch.base.lazy_names import lazy_names

if TYPE_CHECKING:
    from tokenwatch.recording.reader import ReadPoint, RecordingFormatError, RecordingReader, read_events
    from tokenwatch.recording.writer import RecordingError, RecordingWriter

__all__ = [
    "ReadPoint",
    "RecordingError",
    "RecordingFormatError",
    "RecordingReader",
    "RecordingWriter",
    "read_events",
]

# Loaded on first use: ``summarize`` of a recording with a summary trailer (recording.trailer) reads a
# few bytes of its end and must not pay for numpy and the codec that the reader and writer bring.
__getattr__ = lazy_names(
    __name__,
    {
        "ReadPoint": "tokenwatch.recording.reader",
        "RecordingFormatError": "tokenwatch.recording.reader",
        "RecordingReader": "tokenwatch.recording.reader",
        "read_events": "tokenwatch.recording.reader",
        "RecordingError": "tokenwatch.recording.writer",
        "RecordingWriter": "tokenwatch.recording.writer",
    },
)
