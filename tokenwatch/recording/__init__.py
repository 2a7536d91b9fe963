"""Recordings: the typed event stream as JSON lines (optionally .zst), written crash-safe, read tolerantly."""

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
