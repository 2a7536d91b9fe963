"""Replay of a recording: one player for the headless logger and the dashboard.

The player is a collector: it releases the recording's events into the session paced by the project's
:class:`~tokenwatch.base.pacing.Pacer` (``speed`` run seconds per wall second; 0 as fast as possible), so the
recorder, the core and every observer see one stream, exactly as the live run did. Events before
``start_s`` are released at once (the core must reach the state the live run had then).

Memory stays bounded, headless or in the dashboard: events come off a :class:`ReplayTape` (a bounded
window read ahead from the file) and are forgotten once played. Bound to a session (:meth:`bind`, the
dashboard), the player can pause, change speed and seek both ways. Seeking forward plays unpaced up to
the target; seeking back restores the nearest earlier keyframe (the session's core, compressed, taken
every few minutes of run time on the first pass, with the file position of the next event), re-reads
the recording from that position into it, and hands it to the session, which keeps showing the old core
until the new one is complete. With ``index=True`` (the CLI's replay) the keyframes live in
the recording's index instead, every 10 s of run time (see replay_index): a seek from one of those is short
enough to be made without yielding to the loop. A background scan of the file gives the run's length.

The player's state, what the screen reads of it and the controls are :class:`PlayerControls`'s
(:mod:`.controls`); this module plays, keeps keyframes and seeks.
"""

from __future__ import annotations

import asyncio
import contextlib

from tokenwatch.base.events import Emit, Notice
from tokenwatch.base.formatting import format_clock
from tokenwatch.base.loading import Loading
from tokenwatch.core import RackCore
from tokenwatch.inputs.replay.controls import PlaybackHost, PlayerControls
from tokenwatch.inputs.replay.keeper import AnyKeyframe
from tokenwatch.inputs.replay.keyframes import Keyframe
from tokenwatch.inputs.replay.tape import ReplayTape
from tokenwatch.recording import RecordingReader

_SLICE_EVENTS = 256  # events ingested between yields to the loop while rebuilding a core
_TICKS_PER_SLICE = 500  # a long gap in run time is filled this many core ticks at a time
_MAX_WARNINGS_AS_NOTICES = 20
_WAIT_S = 0.005  # how long the loop waits for the reading thread


class ReplayPlayer(PlayerControls):
    """A collector over a recording; ``bind(session)`` before it runs to pause, seek and change speed."""

    name = "replay"

    # ------------------------------------------------------------ playing
    def _start_loading(self, tape: ReplayTape) -> None:
        # Submitted now, not when the loop next runs: a short seek waits for it without yielding. The
        # player owns every loader until it has ended (run's way out waits for them); ended ones go.
        self._loaders = [loader for loader in self._loaders if not loader.done()]
        self._loaders.append(asyncio.get_running_loop().run_in_executor(None, tape.load))

    async def run(self, emit: Emit) -> None:
        self._start_loading(self._tape)
        scan = asyncio.ensure_future(asyncio.to_thread(self._scan)) if self._host is not None else None
        try:
            await self._play(emit)
        finally:
            self._closing = True
            self._tape.close()
            self._keyframes.close()
            for task in [*self._loaders, *([scan] if scan is not None else [])]:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await asyncio.shield(task)

    def _scan(self) -> None:
        """The recording's length, read in a thread (run times only: GPU columns are not decoded)."""
        newest: float | None = None
        for event in RecordingReader(self.path, gpu_metrics=()).events():
            if self._closing:
                return
            newest = event.t if newest is None else max(newest, event.t)
        self._scanned_end = newest
        self._scan_done = True

    async def _wait_change(self, within_s: float | None) -> bool:
        """Sleep until a control is used (True) or ``within_s`` of the pacer's clock passes (False)."""
        if within_s is None:
            await self._changed.wait()
            self._changed.clear()
            return True
        changed = asyncio.ensure_future(self._changed.wait())
        slept = asyncio.ensure_future(self.pacer.clock.sleep(within_s))  # the injected clock, not the loop's
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
            event = self._tape.peek()
            if event is None:
                if not self._tape.done:
                    await asyncio.sleep(_WAIT_S)
                    continue
                if await self._reach_end(emit):
                    return
                await self._wait_change(None)
                continue
            if self.paused:
                await self._wait_change(None)
                continue
            delay = self.pacer.delay_until(event.t)
            if delay > 0:
                await self._wait_change(min(delay, 1.0))
                continue  # due now, or a control changed the plan: look again
            if self.speed == 0:
                await self.pacer.yield_sometimes()  # unpaced: still let the screen and the keys in
            await self._emit_next(emit)

    async def _emit_next(self, emit: Emit) -> None:
        event = self._tape.peek()
        assert event is not None
        # Due by what has been played, not by the next event: the keyframe comes after the tick it is
        # due at (see keyframe_due), so seeks from it skip that tick's forecasts.
        if self._host is not None and self._keyframes.due(self._position):
            await self._take_keyframe()
        event, _ = self._tape.pop()
        await emit(event)
        self._played_any = True
        self._end_handled = False
        self._position = max(self._position, event.t)

    async def _reach_end(self, emit: Emit) -> bool:
        """At the end: warnings as notices once. True when the player is done (nothing bound to seek)."""
        if not self._end_reported:
            self._end_reported = True
            self._keyframes.commit()
            for warning in self.warnings[:_MAX_WARNINGS_AS_NOTICES]:
                await emit(Notice(self._position, "warning", warning, source="replay"))
        await self._drain()
        self._end_handled = True
        return self._host is None

    async def _drain(self) -> None:
        """Wait until the session has handled everything emitted so far."""
        if self._host is not None:
            await self._host.drained()

    # ------------------------------------------------------------ keyframes
    async def _take_keyframe(self) -> None:
        """The session's core as of now (before the next event), kept with that event's position."""
        host = self._host
        assert host is not None
        await self._drain()
        event = self._tape.peek()
        if not host.core.started or event is None:
            return
        position = self._tape.position_of_next()
        self._keyframes.keep(self._position, position, host.core)  # on the loop: the core holds still

    # ------------------------------------------------------------ seeking
    async def _seek(self, emit: Emit) -> None:
        self._seeking = True
        target = self._seek_target
        assert target is not None
        self._seek_target = None
        host = self._host
        keyframe = self._keyframes.before(target)
        recording = host is not None and host.recorder is not None
        if target >= self._position and (host is None or recording or keyframe.t <= self._position):
            await self._fast_forward(emit, target)
        elif host is None or recording:
            self.message = "seeking back is off while recording a replay"
        else:
            await self._rebuild(host, keyframe, target)

    async def _fast_forward(self, emit: Emit, target: float) -> None:
        """Release every event at or before ``target`` unpaced (the start time, or a seek ahead). A target
        past the recording's end stops at the end and says so (the start's in the warnings too)."""
        starting = not self._played_any
        loading = self.loading = self._loading_to(target, starting)
        try:
            await self._play_up_to(emit, target, starting, loading)
        finally:
            loading.finish()

    def _loading_to(self, target: float, starting: bool) -> Loading:
        """What a play up to ``target`` says while it goes (a large recording's --start takes seconds)."""
        what = (
            f"loading {self.path.name} up to {format_clock(target)}"
            if starting
            else (f"playing up to {format_clock(target)}")
        )
        if self._keyframes.indexed and not self._keyframes.complete:
            what += ", writing its replay index"
        return Loading(what)

    async def _play_up_to(self, emit: Emit, target: float, starting: bool, loading: Loading) -> None:
        begin = self._position
        while self._seek_target is None:  # a newer seek replaces this one
            event = self._tape.peek()
            if event is None:
                if self._tape.done and target > self._position:
                    at, end = format_clock(target), format_clock(self._position)
                    if starting:
                        self._warn(
                            f"--start {at} is past the recording's end at {end}: the replay starts there"
                        )
                    else:
                        self.message = f"{at} is past the end ({end})"
                if self._tape.done:
                    return
                await asyncio.sleep(_WAIT_S)
                continue
            if event.t > target and self._played_any:  # the run start always comes along
                return
            await self._emit_next(emit)
            goal = min(target, self.duration_s or target)  # a --start past the end stops at the end
            loading((self._position - begin) / (goal - begin) if goal > begin else 1.0)
            await self.pacer.yield_sometimes()

    async def _rebuild(self, host: PlaybackHost, keyframe: AnyKeyframe, target: float) -> None:
        """Restore ``keyframe``, read on from its position to ``target`` into it, swap it in. The new
        tape's reading thread is this method's until the swap: closed on every other way out (an error,
        a newer seek, a cancel at any await), or it would wait forever on its full window."""
        start = self._keyframes.start_of(keyframe)
        tape = ReplayTape(self.path, start.position)
        self._start_loading(tape)
        try:
            # A keyframe of the index is near (a few hundred ms of work): the seek is made without yielding
            # to the loop, so the screen neither draws meanwhile (slowing it) nor sees the empty core put
            # in first, which lets the old core's memory go back before the new one is made.
            quick = self._keyframes.near(keyframe, target)
            if quick:
                await self._drain()
                host.replace_core(RackCore(self._config))
            # On the loop, not in a worker thread: a core allocated in another thread's malloc arena is
            # fragmentation that never goes back (the resident size crept up by ~70 MB per seek).
            core = self._keyframes.core_of(keyframe, start)
            if core is None:
                quick = False
                tape.close()
                start, core = Keyframe(None, 0.0, b""), RackCore(self._config)
                tape = ReplayTape(self.path)
                self._start_loading(tape)
            position = await self._play_into(core, tape, start.t, target, quick)
            if position is None:  # a newer seek replaces this one; the screen never saw this core
                tape.close()
                return
            await self._drain()
        except BaseException:
            tape.close()
            raise
        host.replace_core(core)
        self._gather_warnings(self._tape)
        self._tape.close()
        self._tape = tape
        self._position = position
        self._end_reported = self._end_reported and tape.exhausted
        self._end_handled = self._end_handled and tape.exhausted

    async def _play_into(
        self, core: RackCore, tape: ReplayTape, position: float, target: float, quick: bool
    ) -> float | None:
        """``tape``'s events up to ``target`` into ``core``; the run time reached, or None when a newer
        seek came meanwhile. ``quick``: without yielding to the loop."""
        played = 0
        while True:
            event = tape.peek()
            if event is None:
                if tape.done:
                    return position
                if quick:
                    tape.wait_ready(_WAIT_S)
                else:
                    await asyncio.sleep(_WAIT_S)
            elif event.t > target and core.started:
                return position
            else:
                while not core.advance_toward(event.t, _TICKS_PER_SLICE):  # a long gap, in slices
                    if not quick:
                        await asyncio.sleep(0)
                    if self._seek_target is not None:
                        break
                event, _ = tape.pop()
                core.ingest(event)
                position = max(position, event.t)
                played += 1
                if played % _SLICE_EVENTS == 0 and not quick:
                    await asyncio.sleep(0)
            if self._seek_target is not None:
                return None
