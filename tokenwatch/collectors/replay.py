"""Replay of a recording: one player for the headless logger and the dashboard.

The player is a collector: it releases the recording's events into the session paced by the project's
:class:`~tokenwatch.pacing.Pacer` (``speed`` run seconds per wall second; 0 as fast as possible), so the
recorder, the core and every observer see one stream, exactly as the live run did. Events before
``start_s`` are released at once (the core must reach the state the live run had then).

Headless replay never seeks: its tape streams (bounded memory). Bound to a session (:meth:`bind`, the
dashboard), the tape keeps every event and the player can pause, change speed and seek both ways.
Seeking forward plays unpaced up to the target; seeking back rebuilds the core from the nearest earlier
keyframe (a clone of the session's core taken every few minutes of run time on the first pass) and
hands it to the session, which keeps showing the old core until the new one is complete.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from tokenwatch.clock import Clock, MonotonicClock
from tokenwatch.collectors.replay_tape import ReplayTape
from tokenwatch.core import RackCore
from tokenwatch.core.memory import approx_nbytes
from tokenwatch.events import Emit, Notice
from tokenwatch.pacing import Pacer
from tokenwatch.recording import RecordingReader, RecordingWriter

# Speeds `+` and `-` step through; 0 means as fast as possible and sorts as the fastest.
SPEEDS: tuple[float, ...] = (0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 0.0)
KEYFRAME_EVERY_S = 300.0
KEYFRAME_BUDGET_BYTES = 512 * 2**20  # keyframes are dropped (every other one) beyond this
_SLICE_EVENTS = 256  # events ingested between yields to the loop while rebuilding a core
_MAX_WARNINGS_AS_NOTICES = 20


class PlaybackHost(Protocol):
    """What the player needs of the session it feeds (:class:`tokenwatch.session.Session` is one)."""

    core: RackCore
    recorder: RecordingWriter | None
    stop_on_run_end: bool

    async def drained(self) -> None: ...

    def replace_core(self, core: RackCore) -> None: ...


@dataclass(frozen=True, slots=True)
class Keyframe:
    index: int  # events[:index] are in `core`
    t: float  # run time of the last of them (0 before any)
    core: RackCore  # never mutated once taken


def _speed_rank(speed: float) -> float:
    return math.inf if speed == 0 else speed


class ReplayPlayer:
    """A collector over a recording; ``bind(session)`` before it runs to pause, seek and change speed."""

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
        self.pacer = Pacer(clock or MonotonicClock(), max(0.0, speed))
        self.pacer.paused = paused
        self.keyframe_every_s = keyframe_every_s
        self.keyframe_budget_bytes = keyframe_budget_bytes
        self.message = ""  # the latest thing the engineer should know (e.g. why a seek was refused)
        self._tape = ReplayTape(self.reader, retain=False)
        self._host: PlaybackHost | None = None
        self._keyframes: list[Keyframe] = []
        self._max_keyframes: int | None = None
        self._next = 0  # index of the next event to emit
        self._position = 0.0
        self._seek_target: float | None = max(0.0, start_s)
        self._seeking = True
        self._changed = asyncio.Event()
        self._end_reported = False
        self._end_handled = False

    # ------------------------------------------------------------ wiring
    def bind(self, host: PlaybackHost) -> None:
        """Feed ``host`` (a session) with controls: keep every event, keyframe its core, seek back."""
        self._host = host
        self._tape.retain = True
        host.stop_on_run_end = False  # the end of the run is not the end of the replay
        self._keyframes = [Keyframe(0, 0.0, RackCore(host.core.config))]

    @property
    def warnings(self) -> list[str]:
        return self.reader.warnings

    # ------------------------------------------------------------ state for the screen
    @property
    def speed(self) -> float:
        return self.pacer.speed

    @property
    def paused(self) -> bool:
        return self.pacer.paused

    @property
    def position_s(self) -> float:
        """Run time of the latest event played."""
        return self._position

    @property
    def duration_s(self) -> float | None:
        """Run time of the recording's last event, once it is all read."""
        return self._tape.last_time if self._tape.loaded else None

    @property
    def loaded(self) -> bool:
        return self._tape.loaded

    @property
    def seeking(self) -> bool:
        return self._seeking or self._seek_target is not None

    @property
    def at_end(self) -> bool:
        """Everything played and handled by the session."""
        return self._end_handled and self._next >= self._tape.end and not self.seeking

    @property
    def keyframe_count(self) -> int:
        return len(self._keyframes)

    # ------------------------------------------------------------ controls
    def _poke(self) -> None:
        self._changed.set()

    def pause(self) -> None:
        self.pacer.paused = True
        self._poke()

    def resume(self) -> None:
        self.pacer.paused = False
        self.pacer.rebase(self._position)
        self._poke()

    def toggle_pause(self) -> None:
        self.resume() if self.paused else self.pause()

    def set_speed(self, speed: float) -> None:
        self.pacer.set_speed(speed, self._position)
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

    # ------------------------------------------------------------ playing
    async def run(self, emit: Emit) -> None:
        loader = asyncio.create_task(asyncio.to_thread(self._tape.load))
        try:
            await self._play(emit)
        finally:
            self._tape.closing = True
            loader.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await asyncio.shield(loader)

    async def _wait_change(self, wait_s: float | None) -> bool:
        """Sleep until a control is used (True) or ``wait_s`` of the pacer's clock pass (False).

        Not ``asyncio.timeout``: the wait runs on the injected clock, not the loop's."""
        if wait_s is None:
            await self._changed.wait()
            self._changed.clear()
            return True
        changed = asyncio.ensure_future(self._changed.wait())
        slept = asyncio.ensure_future(self.pacer.clock.sleep(wait_s))
        try:
            done, _ = await asyncio.wait({changed, slept}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (changed, slept):
                task.cancel()
        if changed in done:
            self._changed.clear()
            return True
        return False

    async def _play(self, emit: Emit) -> None:
        while True:
            if self._seek_target is not None:
                await self._seek(emit)
                continue
            if self._seeking:
                await self._drain()  # the seek is done once the session has handled what it played
                self._seeking = self._seek_target is not None
                self.pacer.rebase(self._position)
            if self._next >= self._tape.end:
                if not self._tape.loaded:
                    await asyncio.sleep(0.02)
                    continue
                if await self._reach_end(emit):
                    return
                await self._wait_change(None)
                continue
            if self.paused:
                await self._wait_change(None)
                continue
            delay = self.pacer.delay_until(self._tape.get(self._next).t)
            if delay > 0:
                await self._wait_change(min(delay, 1.0))
                continue  # due now, or a control changed the plan: look again
            if self.speed == 0:
                await self.pacer.yield_sometimes()  # unpaced: still let the screen and the keys in
            await self._emit_next(emit)

    async def _emit_next(self, emit: Emit) -> None:
        event = self._tape.get(self._next)
        await self._maybe_keyframe(event.t)
        await emit(event)
        self._end_handled = False
        self._next += 1
        self._position = max(self._position, event.t)
        self._tape.release_before(self._next)

    async def _reach_end(self, emit: Emit) -> bool:
        """At the end: warnings as notices once. True when the player is done (nothing bound to seek)."""
        if not self._end_reported:
            self._end_reported = True
            for warning in self.reader.warnings[:_MAX_WARNINGS_AS_NOTICES]:
                await emit(Notice(self._position, "warning", warning, source="replay"))
        await self._drain()
        self._end_handled = True
        return self._host is None

    async def _drain(self) -> None:
        """Wait until the session has handled everything emitted so far."""
        if self._host is not None:
            await self._host.drained()

    # ------------------------------------------------------------ keyframes
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
        self._keyframes.append(Keyframe(self._next, self._position, host.core.clone()))
        if self._max_keyframes is None:
            size = max(1, approx_nbytes(host.core.state))
            self._max_keyframes = int(min(256, max(4, self.keyframe_budget_bytes // size)))
        if len(self._keyframes) > self._max_keyframes:
            # Keep the empty start and every other keyframe after it; space the next ones wider.
            self._keyframes = self._keyframes[:1] + self._keyframes[2::2]
            self.keyframe_every_s *= 2

    def _keyframe_before(self, k: int) -> Keyframe:
        usable = [kf for kf in self._keyframes if kf.index <= k]
        return usable[-1] if usable else Keyframe(0, 0.0, RackCore())

    # ------------------------------------------------------------ seeking
    async def _seek(self, emit: Emit) -> None:
        self._seeking = True
        target = self._seek_target
        assert target is not None
        if not self._tape.retain:  # headless: only ever forward, to the start time
            self._seek_target = None
            await self._stream_forward(emit, target)
            return
        while not self._tape.loaded and (self._tape.last_time is None or self._tape.last_time < target):
            await asyncio.sleep(0.02)  # the target is not read yet
            if self._seek_target != target:
                return
        self._seek_target = None
        k = self._tape.index_after(target)
        k = max(k, 1) if self._tape.end else 0  # the run start always comes along
        keyframe = self._keyframe_before(k)
        host = self._host
        if k >= self._next and (
            host is None or host.recorder is not None or k - self._next <= k - keyframe.index
        ):
            await self._fast_forward(emit, k)
        elif host is None or host.recorder is not None:
            self.message = "seeking back is off while recording a replay"
        else:
            await self._rebuild(host, keyframe, k)

    async def _stream_forward(self, emit: Emit, target: float) -> None:
        """Release every event at or before ``target`` unpaced (a streaming tape's start time)."""
        while True:
            if self._next >= self._tape.end:
                if self._tape.loaded:
                    return
                await asyncio.sleep(0.005)
                continue
            if self._tape.get(self._next).t > target and self._next > 0:
                return
            await self._emit_next(emit)
            await self.pacer.yield_sometimes()

    async def _fast_forward(self, emit: Emit, k: int) -> None:
        while self._next < k:
            if self._seek_target is not None:
                return  # a newer seek replaces this one
            await self._emit_next(emit)
            await self.pacer.yield_sometimes()

    async def _rebuild(self, host: PlaybackHost, keyframe: Keyframe, k: int) -> None:
        core = await asyncio.to_thread(keyframe.core.clone)
        for n, i in enumerate(range(keyframe.index, k), 1):
            core.ingest(self._tape.get(i))
            if n % _SLICE_EVENTS == 0:
                await asyncio.sleep(0)
                if self._seek_target is not None:
                    return  # a newer seek replaces this one; the screen never saw this core
        await self._drain()
        host.replace_core(core)
        self._next = k
        self._position = self._tape.time_of(k - 1) if k else 0.0
        self._end_reported = self._end_reported and k >= self._tape.end
        self._end_handled = self._end_handled and k >= self._tape.end
