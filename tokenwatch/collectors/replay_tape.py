"""A recording's events, read off the event loop by a worker thread, for the replay player.

The thread decodes the file in chunks (one hand-over per chunk, not per event) into a list the loop
reads by index. A *retained* tape keeps every event, so the player can seek back (the dashboard); a
streaming tape drops what has been played and makes the reader wait when it is far enough ahead,
so a headless replay of any length holds a bounded window of events.
"""

from __future__ import annotations

import bisect
import dataclasses
import threading
import time

from tokenwatch.events import Event, RunStarted
from tokenwatch.recording import RecordingReader

_CHUNK = 512  # events decoded between hand-overs to the loop
_STREAM_AHEAD = 64 * _CHUNK  # a streaming tape reads at most this far ahead of the player


def as_replayed(event: Event) -> Event:
    """The run start re-labelled ``source="replay"``, the recorded source kept in ``meta``."""
    if isinstance(event, RunStarted):
        meta = {**event.meta, "recorded_source": event.source}
        return dataclasses.replace(event, source="replay", meta=meta)
    return event


class ReplayTape:
    """Events ``[base, base + len(events))`` of the recording, appended by :meth:`load` (a thread)."""

    def __init__(self, reader: RecordingReader, *, retain: bool) -> None:
        self.reader = reader
        self.retain = retain
        self._events: list[Event] = []
        self._times: list[float] = []  # only kept when retained: for bisecting a seek target
        self._base = 0
        self._lock = threading.Lock()
        self.loaded = False
        self.closing = False

    # ------------------------------------------------------------ the reading thread
    def load(self) -> None:
        chunk: list[Event] = []
        for event in self.reader.events():
            if self.closing:
                break
            chunk.append(as_replayed(event))
            if len(chunk) >= _CHUNK:
                self._hand_over(chunk)
                chunk = []
        self._hand_over(chunk)
        self.loaded = True

    def _hand_over(self, chunk: list[Event]) -> None:
        while not self.retain and len(self._events) > _STREAM_AHEAD and not self.closing:
            time.sleep(0.002)  # the player is behind: wait instead of holding the whole file
        with self._lock:
            self._events.extend(chunk)
            if self.retain:
                self._times.extend(e.t for e in chunk)

    # ------------------------------------------------------------ the loop's side
    @property
    def end(self) -> int:
        """Index one past the last event read so far."""
        return self._base + len(self._events)

    @property
    def last_time(self) -> float | None:
        """Run time of the last event read so far (retained tapes)."""
        return self._times[-1] if self._times else None

    def get(self, i: int) -> Event:
        return self._events[i - self._base]

    def index_after(self, t: float) -> int:
        """How many events have a run time at or before ``t`` (retained tapes only)."""
        return bisect.bisect_right(self._times, t)

    def time_of(self, i: int) -> float:
        return self._times[i]

    def release_before(self, i: int) -> None:
        """A streaming tape forgets the events before ``i`` (played; never needed again)."""
        if self.retain or i - self._base < _CHUNK:
            return
        with self._lock:
            del self._events[: i - self._base]
            self._base = i
