"""A replay you can pause, speed up, slow down and seek, backwards too: what the dashboard replays with.

The recording is read in a thread into memory (the file stays off the event loop) and played through
the session like any collector, so the recorder, the core and every observer see one stream. Seeking
forward plays unpaced up to the target. Seeking backwards rebuilds the core from the nearest earlier
keyframe, a deep copy of the session's core taken every few minutes of run time on the first pass,
feeds it the events from there to the target, and swaps it into the session: the screen keeps the old
core until the new one is complete. No Textual here; the dashboard only calls the controls.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import copy
import dataclasses
import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np

from tokenwatch.clock import Clock, MonotonicClock
from tokenwatch.core import RackCore
from tokenwatch.events import Event, Notice, RunStarted
from tokenwatch.recording import RecordingReader, RecordingWriter
from tokenwatch.session import Emit

# Speeds `+` and `-` step through; 0 means as fast as possible and sorts as the fastest.
SPEEDS: tuple[float, ...] = (0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 0.0)
KEYFRAME_EVERY_S = 300.0
KEYFRAME_BUDGET_BYTES = 512 * 2**20  # keyframes are dropped (every other one) beyond this
_SLICE_EVENTS = 256  # events ingested between yields to the loop while rebuilding a core
_MAX_WARNINGS_AS_NOTICES = 20


class PlaybackHost(Protocol):
    """What the player needs of the session it feeds (``tokenwatch.session.Session`` is one)."""

    core: RackCore
    queue: asyncio.Queue[object]
    recorder: RecordingWriter | None
    stop_on_run_end: bool


@dataclass(frozen=True, slots=True)
class Keyframe:
    index: int  # events[:index] are in `core`
    t: float  # run time of the last of them (0 before any)
    core: RackCore  # never mutated once taken


def _speed_rank(speed: float) -> float:
    return math.inf if speed == 0 else speed


def approx_nbytes(obj: object, _seen: set[int] | None = None, _depth: int = 0) -> int:
    """The bytes held by numpy arrays inside ``obj`` (what a core's deep copy costs)."""
    seen = _seen if _seen is not None else set()
    if id(obj) in seen or _depth > 4:
        return 0
    seen.add(id(obj))
    if isinstance(obj, np.ndarray):
        return int(obj.nbytes)
    if isinstance(obj, dict):
        return sum(approx_nbytes(v, seen, _depth + 1) for v in obj.values())
    if isinstance(obj, list | tuple):
        return sum(approx_nbytes(v, seen, _depth + 1) for v in obj)
    fields: list[object] = list(vars(obj).values()) if hasattr(obj, "__dict__") else []
    for name in getattr(type(obj), "__slots__", ()):
        fields.append(getattr(obj, name, None))
    return sum(approx_nbytes(v, seen, _depth + 1) for v in fields)


class ReplayPlayer:
    """A collector over a recording with live controls; ``bind(session)`` before it runs to seek back."""

    name = "replay"

    def __init__(
        self,
        path: str | Path,
        *,
        speed: float = 1.0,
        start_s: float = 0.0,
        paused: bool = False,
        clock: Clock | None = None,
        keyframe_every_s: float = KEYFRAME_EVERY_S,
        keyframe_budget_bytes: int = KEYFRAME_BUDGET_BYTES,
    ) -> None:
        self.reader = RecordingReader(path)  # reads the header now: a bad file is reported up front
        self.clock = clock or MonotonicClock()
        self.speed = max(0.0, speed)
        self.paused = paused
        self.keyframe_every_s = keyframe_every_s
        self.keyframe_budget_bytes = keyframe_budget_bytes
        self.message = ""  # the latest thing the engineer should know (e.g. why a seek was refused)
        self._events: list[Event] = []
        self._times: list[float] = []
        self._loaded = False
        self._closing = False
        self._host: PlaybackHost | None = None
        self._keyframes: list[Keyframe] = []
        self._max_keyframes: int | None = None
        self._next = 0  # index of the next event to emit
        self._position = 0.0
        self._seek_target: float | None = max(0.0, start_s)
        self._seeking = True
        self._anchor: tuple[float, float] | None = None  # (wall, run time) that pacing counts from
        self._changed = asyncio.Event()
        self._end_reported = False

    # ------------------------------------------------------------ wiring
    def bind(self, host: PlaybackHost) -> None:
        """Feed ``host`` (a session): keyframes copy its core and backward seeks replace it."""
        self._host = host
        host.stop_on_run_end = False  # the end of the run is not the end of the replay
        self._keyframes = [Keyframe(0, 0.0, RackCore(host.core.config))]

    @property
    def warnings(self) -> list[str]:
        return self.reader.warnings

    # ------------------------------------------------------------ state for the screen
    @property
    def position_s(self) -> float:
        """Run time of the latest event played."""
        return self._position

    @property
    def duration_s(self) -> float | None:
        """Run time of the recording's last event, once it is all read."""
        return self._times[-1] if self._loaded and self._times else None

    @property
    def loaded(self) -> bool:
        return self._loaded

    @property
    def seeking(self) -> bool:
        return self._seeking or self._seek_target is not None

    @property
    def at_end(self) -> bool:
        """Everything played and handled by the session."""
        drained = self._host is None or self._host.queue.qsize() == 0
        return self._loaded and self._next >= len(self._events) and not self.seeking and drained

    @property
    def can_seek_back(self) -> bool:
        return self._host is not None and self._host.recorder is None

    @property
    def keyframe_count(self) -> int:
        return len(self._keyframes)

    # ------------------------------------------------------------ controls
    def _poke(self) -> None:
        self._changed.set()

    def pause(self) -> None:
        self.paused = True
        self._poke()

    def resume(self) -> None:
        self.paused = False
        self._anchor = None
        self._poke()

    def toggle_pause(self) -> None:
        self.resume() if self.paused else self.pause()

    def set_speed(self, speed: float) -> None:
        self.speed = max(0.0, speed)
        self._anchor = None
        self._poke()

    def faster(self) -> None:
        ahead = [s for s in SPEEDS if _speed_rank(s) > _speed_rank(self.speed)]
        if ahead:
            self.set_speed(min(ahead, key=_speed_rank))

    def slower(self) -> None:
        behind = [s for s in SPEEDS if _speed_rank(s) < _speed_rank(self.speed)]
        if behind:
            self.set_speed(max(behind, key=_speed_rank))

    def seek(self, t: float) -> None:
        """Go to run time ``t`` (clamped to the recording); the latest request wins."""
        self._seek_target = max(0.0, t) if math.isfinite(t) else 0.0
        self._poke()

    def seek_by(self, delta_s: float) -> None:
        base = self._seek_target if self._seek_target is not None else self._position
        self.seek(base + delta_s)

    # ------------------------------------------------------------ loading (a thread)
    def _load(self) -> None:
        for event in self.reader.events():
            if self._closing:
                break
            if isinstance(event, RunStarted):
                meta = {**event.meta, "recorded_source": event.source}
                event = dataclasses.replace(event, source="replay", meta=meta)
            self._events.append(event)
            self._times.append(event.t)
        self._loaded = True

    # ------------------------------------------------------------ playing
    async def run(self, emit: Emit) -> None:
        loader = asyncio.create_task(asyncio.to_thread(self._load))
        try:
            await self._play(emit)
        finally:
            self._closing = True
            loader.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await asyncio.shield(loader)

    async def _wait_change(self, timeout: float | None) -> bool:
        """Sleep until a control is used (True) or ``timeout`` passes (False)."""
        try:
            await asyncio.wait_for(self._changed.wait(), timeout)
        except TimeoutError:
            return False
        self._changed.clear()
        return True

    def _due_in(self, t: float) -> float:
        now = self.clock.time()
        if self._anchor is None:
            self._anchor = (now, self._position)
        wall0, t0 = self._anchor
        return wall0 + (t - t0) / self.speed - now

    async def _play(self, emit: Emit) -> None:
        emitted = 0
        while True:
            if self._seek_target is not None:
                await self._seek(emit)
                continue
            if self._seeking:
                await self._drain()  # the seek is done once the session has handled what it played
                self._seeking = self._seek_target is not None
            if self._next >= len(self._events):
                if not self._loaded:
                    await asyncio.sleep(0.02)
                    continue
                await self._report_end(emit)
                await self._wait_change(None)
                continue
            if self.paused:
                await self._wait_change(None)
                continue
            event = self._events[self._next]
            if self.speed > 0:
                delay = self._due_in(event.t)
                if delay > 0:
                    await self._wait_change(min(delay, 1.0))
                    continue  # due now, or a control changed the plan: look again
            else:
                emitted += 1
                if emitted % 64 == 0:
                    await asyncio.sleep(0)  # unpaced: still let the screen and the keys in
            await self._emit_next(emit)

    async def _emit_next(self, emit: Emit) -> None:
        event = self._events[self._next]
        await self._maybe_keyframe(event.t)
        await emit(event)
        self._next += 1
        self._position = max(self._position, event.t)

    async def _report_end(self, emit: Emit) -> None:
        if self._end_reported:
            return
        self._end_reported = True
        for warning in self.reader.warnings[:_MAX_WARNINGS_AS_NOTICES]:
            await emit(Notice(self._position, "warning", warning, source="replay"))

    # ------------------------------------------------------------ keyframes
    async def _drain(self) -> None:
        """Wait until the session has handled everything emitted so far."""
        host = self._host
        while host is not None and host.queue.qsize() > 0:
            await asyncio.sleep(0)

    async def _maybe_keyframe(self, t: float) -> None:
        host = self._host
        if host is None or not self._keyframes:
            return
        last = self._keyframes[-1]
        if self._next <= last.index or t < last.t + self.keyframe_every_s:
            return
        await self._drain()
        if not host.core.started:
            return
        self._keyframes.append(Keyframe(self._next, self._position, copy.deepcopy(host.core)))
        if self._max_keyframes is None:
            size = max(1, approx_nbytes(host.core))
            self._max_keyframes = int(min(256, max(4, self.keyframe_budget_bytes // size)))
        if len(self._keyframes) > self._max_keyframes:
            # Keep the empty start and every other keyframe after it; space the next ones wider.
            self._keyframes = self._keyframes[:1] + self._keyframes[2::2]
            self.keyframe_every_s *= 2

    # ------------------------------------------------------------ seeking
    async def _seek(self, emit: Emit) -> None:
        self._seeking = True
        target = self._seek_target
        assert target is not None
        while not self._loaded and (not self._times or self._times[-1] < target):
            await asyncio.sleep(0.02)  # the target is not read yet
            if self._seek_target != target:
                return
        self._seek_target = None
        k = bisect.bisect_right(self._times, target)
        k = max(k, 1) if self._events else 0  # the run start always comes along
        keyframe = self._keyframe_before(k)
        forward = k >= self._next
        host = self._host
        if forward and (host is None or host.recorder is not None or k - self._next <= k - keyframe.index):
            await self._fast_forward(emit, k)
        elif host is None or host.recorder is not None:
            self.message = "seeking back is off while recording a replay"
        else:
            await self._rebuild(host, keyframe, k)
        self._anchor = None

    def _keyframe_before(self, k: int) -> Keyframe:
        indexes = [kf.index for kf in self._keyframes]
        if not indexes:
            return Keyframe(0, 0.0, RackCore())
        return self._keyframes[max(0, bisect.bisect_right(indexes, k) - 1)]

    async def _fast_forward(self, emit: Emit, k: int) -> None:
        while self._next < k:
            if self._seek_target is not None:
                return  # a newer seek replaces this one
            await self._emit_next(emit)
            if self._next % 64 == 0:
                await asyncio.sleep(0)

    async def _rebuild(self, host: PlaybackHost, keyframe: Keyframe, k: int) -> None:
        core = await asyncio.to_thread(copy.deepcopy, keyframe.core)
        for n, event in enumerate(self._slice(keyframe.index, k), 1):
            core.ingest(event)
            if n % _SLICE_EVENTS == 0:
                await asyncio.sleep(0)
                if self._seek_target is not None:
                    return  # a newer seek replaces this one; the screen never saw this core
        await self._drain()
        host.core = core
        self._next = k
        self._position = self._times[k - 1] if k else 0.0
        self._end_reported = self._end_reported and k >= len(self._events)

    def _slice(self, start: int, stop: int) -> Iterator[Event]:
        for i in range(start, stop):
            yield self._events[i]
