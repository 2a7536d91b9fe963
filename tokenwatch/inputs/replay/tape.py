"""A recording's events from some place in the file on, read ahead by a worker thread into a bounded window.

The thread decodes the file in chunks (one hand-over per chunk, not per event) into a window the loop
pops from, and waits while the window is full (:data:`WINDOW_EVENTS` events or :data:`WINDOW_BYTES` of
arrays): a replay of any length holds a bounded window, dashboard or headless. Every event comes with its
:class:`TapePosition`, so a replay can come back to it later with a fresh tape (a seek) instead of
keeping what it played.
"""

from __future__ import annotations

import dataclasses
import threading
from collections import deque
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tokenwatch.base.events import Event, RunStarted
from tokenwatch.recording import ReadPoint, RecordingReader

_CHUNK = 512  # events decoded between hand-overs to the loop
# ... or fewer, as many as hold this much: a 64-rack GPU batch is ~260 KB, and a seek must not wait for
# 512 of them (minutes of run time) before it gets its first event.
_CHUNK_BYTES = 1 << 20
WINDOW_EVENTS = 64 * _CHUNK
WINDOW_BYTES = 16 << 20  # of event arrays: a second or two of an 8-rack replay, a minute of one rack


@dataclass(frozen=True, slots=True)
class TapePosition:
    """Where an event is: a place a reader can start (None: the file's start), then ``skip`` events."""

    point: ReadPoint | None
    skip: int


def as_replayed(event: Event) -> Event:
    """The run start re-labelled ``source="replay"``, the recorded source kept in ``meta``."""
    if isinstance(event, RunStarted):
        meta = {**event.meta, "recorded_source": event.source}
        return dataclasses.replace(event, source="replay", meta=meta)
    return event


def event_nbytes(event: Event) -> int:
    """About what an event holds: its arrays, plus a small object."""
    size = 200
    for name in (
        "values",
        "node_index",
        "gpu",
        "throttle_reasons",
        "samples_done",
        "tokens_done",
        "values_s",
    ):
        value = getattr(event, name, None)
        if isinstance(value, np.ndarray):
            size += value.nbytes
    return size


class ReplayTape:
    """Events of ``path`` from ``start`` on: :meth:`load` (in a thread) fills, the loop peeks and pops."""

    def __init__(self, path: str | Path, start: TapePosition | None = None) -> None:
        self.reader = RecordingReader(path, start=None if start is None else start.point)
        self._skip = 0 if start is None else start.skip
        self._window: deque[tuple[Event, TapePosition, int]] = deque()
        self._bytes = 0
        self._cond = threading.Condition()
        self.done = False  # the reader reached the end of the file (or was stopped)
        self.closing = False
        self.last_time: float | None = None  # run time of the last event read so far

    # ------------------------------------------------------------ the reading thread
    def load(self) -> None:
        chunk: list[tuple[Event, TapePosition, int]] = []
        chunk_bytes = 0
        try:
            for event in self.reader.events():
                if self.closing:
                    break
                if self._skip:
                    self._skip -= 1
                    continue
                position = TapePosition(self.reader.point, self.reader.since_point - 1)
                size = event_nbytes(event)
                chunk.append((as_replayed(event), position, size))
                chunk_bytes += size
                if len(chunk) >= _CHUNK or chunk_bytes >= _CHUNK_BYTES:
                    self._hand_over(chunk)
                    chunk, chunk_bytes = [], 0
            self._hand_over(chunk)
        finally:
            with self._cond:
                self.done = True
                self._cond.notify_all()

    def _hand_over(self, chunk: list[tuple[Event, TapePosition, int]]) -> None:
        if not chunk:
            return
        with self._cond:
            while (len(self._window) > WINDOW_EVENTS or self._bytes > WINDOW_BYTES) and not self.closing:
                self._cond.wait(0.1)  # the player is behind: wait instead of holding the file
            self._window.extend(chunk)
            self._bytes += sum(size for _, _, size in chunk)
            self.last_time = chunk[-1][0].t
            self._cond.notify_all()  # a short seek may be waiting (wait_ready)

    # ------------------------------------------------------------ the loop's side
    def peek(self) -> Event | None:
        """The next event, or None when none is read yet (or the file has ended: see :attr:`exhausted`)."""
        window = self._window
        return window[0][0] if window else None

    def position_of_next(self) -> TapePosition:
        """Where the next event (:meth:`peek`) is in the file: a new tape from there starts with it."""
        return self._window[0][1]

    def wait_ready(self, within_s: float) -> None:
        """Block (the reading thread goes on) until an event is read or the file has ended, at most
        ``within_s``: for a short seek that must not yield to the loop."""
        with self._cond:
            if not self._window and not self.done:
                self._cond.wait(within_s)

    def pop(self) -> tuple[Event, TapePosition]:
        with self._cond:
            event, position, size = self._window.popleft()
            self._bytes -= size
            self._cond.notify_all()
        return event, position

    @property
    def exhausted(self) -> bool:
        """Every event of the file has been popped."""
        return self.done and not self._window

    def close(self) -> None:
        with self._cond:
            self.closing = True
            self._window.clear()
            self._bytes = 0
            self._cond.notify_all()
