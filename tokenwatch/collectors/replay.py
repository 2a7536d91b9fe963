"""Replay of a recording: just another collector, paced at ``speed``, starting at ``start_s``.

Events before ``start_s`` are released at once (the core needs them to be in the same state as
the live run was at that time); from there on they are paced. The run start is re-labelled
``source="replay"`` with the recorded source kept in ``meta``.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from tokenwatch.clock import Clock, MonotonicClock
from tokenwatch.events import Notice, RunStarted
from tokenwatch.pacing import Pacer
from tokenwatch.recording import RecordingReader
from tokenwatch.session import Emit

MAX_WARNINGS_AS_NOTICES = 20


class ReplayCollector:
    name = "replay"

    def __init__(
        self, path: str | Path, *, speed: float = 1.0, start_s: float = 0.0, clock: Clock | None = None
    ) -> None:
        self.reader = RecordingReader(path)  # opens now: a bad file is reported before anything starts
        self.pacer = Pacer(clock or MonotonicClock(), speed)
        self.start_s = start_s

    @property
    def warnings(self) -> list[str]:
        return self.reader.warnings

    async def run(self, emit: Emit) -> None:
        last_t = 0.0
        for event in self.reader.events():
            if isinstance(event, RunStarted):
                meta = {**event.meta, "recorded_source": event.source}
                event = dataclasses.replace(event, source="replay", meta=meta)
            if event.t >= self.start_s:
                await self.pacer.wait_until(event.t)
            await emit(event)
            last_t = max(last_t, event.t)
        for warning in self.reader.warnings[:MAX_WARNINGS_AS_NOTICES]:
            await emit(Notice(last_t, "warning", warning, source="replay"))
