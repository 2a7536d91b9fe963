"""Recordings: the typed event stream as JSON lines (optionally .zst), written crash-safe, read tolerantly."""

from tokenwatch.recording.reader import RecordingFormatError, RecordingReader, read_events
from tokenwatch.recording.writer import RecordingError, RecordingWriter

__all__ = ["RecordingError", "RecordingFormatError", "RecordingReader", "RecordingWriter", "read_events"]
