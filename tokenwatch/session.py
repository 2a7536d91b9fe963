"""One session: collectors -> one bounded queue -> recorder + core -> observers.

Every front end runs through this: the TUI, the headless logger and the Prometheus exporter only
read the core it feeds. Collectors run side by side on one event loop; one that fails becomes a
``Notice`` in the stream and never cancels its siblings. Interval observers (headless lines, JSONL
snapshots) are the core's own tick callbacks, so they see the state exactly as of their boundary.

A session stopped before its run has ended (Ctrl-C, a signal, quitting the dashboard) ends the run
itself: ``RunEnded(reason="interrupted")`` is recorded and ingested as the last event, so the recording,
the summary and the exit status all say the run was cut short.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import Callable, Iterable, Sequence
from typing import Protocol

from tokenwatch.base.clock import Clock, MonotonicClock
from tokenwatch.base.events import Collector, Event, Notice, RunEnded, run_collector
from tokenwatch.base.formatting import format_clock
from tokenwatch.base.loading import Loading
from tokenwatch.base.loop_share import LoopShare, LoopTurns
from tokenwatch.base.pacing import Pacer
from tokenwatch.core import RackCore, RunSummary
from tokenwatch.recording import RecordingError, RecordingWriter

_DONE = object()
_TICKS_PER_SLICE = 500  # a long gap in run time is filled this many core ticks at a time


class RackFocus(Protocol):
    """Which racks' nodes and GPUs a fleet input fetches in detail (the racks on screen); the dashboard
    steers it through the session, which only carries it."""

    @property
    def racks(self) -> frozenset[str]: ...

    def show(self, racks: Iterable[str]) -> None: ...

    def clear(self) -> None: ...


class Session:
    def __init__(
        self,
        core: RackCore,
        collectors: Sequence[Collector],
        *,
        recorder: RecordingWriter | None = None,
        clock: Clock | None = None,
        queue_size: int = 4096,
        flush_interval_s: float | None = 0.5,
        loop_share: LoopShare | None = None,
    ) -> None:
        """``flush_interval_s=None`` turns the recorder's timer flush off (unpaced runs: flushes by size
        alone keep the output byte-identical from run to run). ``loop_share``: a dashboard on the same
        loop gets its turns while the input is behind (:mod:`tokenwatch.base.loop_share`); its backlog
        bounds the queue in place of ``queue_size``."""
        self.core = core
        self.collectors = list(collectors)
        self.recorder = recorder
        self.clock = clock or MonotonicClock()
        self.loop_share = loop_share
        backlog = loop_share.backlog if loop_share is not None else queue_size
        self.queue: asyncio.Queue[object] = asyncio.Queue(maxsize=backlog)
        self.flush_interval_s = flush_interval_s
        self._intervals: list[tuple[float, Callable[[float], None]]] = []
        self._event_observers: list[Callable[[Event], None]] = []
        self._recording_observers: list[Callable[[str], None]] = []
        self.recording_stopped: str | None = None  # why the recording stopped before the run did
        self._tasks: list[asyncio.Task[None]] = []
        self.events_seen = 0
        self.stopped = False
        self.interrupted = False  # stopped before the run ended: it ends as "interrupted"
        # What quitting the dashboard stops, when that is not the run: a replay (its recording is whole,
        # whatever part of it was watched) or the demo (a run nobody asked to finish). None: quitting
        # interrupts the run being made (sim, watch), as a stop signal does.
        self.quit_stops: str | None = None
        self.left_early = False  # the dashboard was quit before the run's end, the run not interrupted
        # A seekable replay keeps its session open past the run's end, so it can seek back.
        self.stop_on_run_end = True
        # A fleet watched through Prometheus: the racks on screen, whose nodes are fetched every
        # interval. The dashboard sets it when a rack is opened (None for every other run).
        self.fleet_focus: RackFocus | None = None

    def every(self, interval_s: float, callback: Callable[[float], None]) -> None:
        """``callback(T)`` at each multiple T of ``interval_s`` of run time, once all events to T are in."""
        self._intervals.append((interval_s, callback))
        self.core.every(interval_s, callback)

    def loading(self) -> Loading | None:
        """The slow start under way, if any: a collector's ``loading`` (a watch reading its nodes'
        backlogs, a replay playing up to its start), for the front ends to say with its progress."""
        for collector in self.collectors:
            loading = getattr(collector, "loading", None)
            if isinstance(loading, Loading) and loading.finished_at is None:
                return loading
        return None

    def says_fleet(self) -> bool:
        """Whether an input says before its run starts that the run has several racks (``sim --racks``):
        the dashboard then draws the fleet board first, not the rack's dashboard it would replace."""
        said = (getattr(collector, "run_racks", 1) for collector in self.collectors)
        return any(isinstance(racks, int) and racks > 1 for racks in said)

    def pace_behind(self) -> float | None:
        """The pace a paced input keeps (run s per wall s) while it cannot keep its speed (a 64-rack sim
        at x60: it drops its pace rather than freeze the screen, :class:`Pacer`); None while it can."""
        for collector in self.collectors:
            pacer = getattr(collector, "pacer", None)
            if isinstance(pacer, Pacer) and pacer.behind is not None:
                return pacer.behind
        return None

    def on_event(self, callback: Callable[[Event], None]) -> None:
        self._event_observers.append(callback)

    def on_recording_stopped(self, callback: Callable[[str], None]) -> None:
        """``callback(message)`` once, if the recording fails (a full disk) while the run goes on."""
        self._recording_observers.append(callback)

    def summary(self) -> RunSummary:
        """The core's run summary, saying so when the recording is partial."""
        summary = self.core.summary(self.quit_stops if self.left_early else None)
        if self.recording_stopped is None:
            return summary
        note = f"the recording is partial: {self.recording_stopped}"
        return dataclasses.replace(summary, warnings=(*summary.warnings, note))

    def _recording_failed(self, exc: RecordingError) -> None:
        """The recorder could not write: the run goes on without it, with one alert saying so."""
        why = "disk full" if exc.disk_full else str(exc).rsplit(": ", 1)[-1].lower()
        at = format_clock(self.core.now)
        # What the file holds, not the time of the failure: the buffer the failed write carried is lost,
        # and with it up to a few minutes of an unpaced run.
        kept = exc.written_until_t
        ends = "the file holds no events" if kept is None else f"the file ends at {format_clock(kept)}"
        message = f"recording stopped: {why} at {at}; {ends}, all of it readable"
        self.recording_stopped = message
        if self.core.started:  # not recorded (the recording is what failed): straight into the core
            self.core.ingest(Notice(self.core.now, "error", message, source="recording"))
        for callback in self._recording_observers:
            callback(message)

    def _recorder_call(self, action: Callable[[], None]) -> None:
        try:
            action()
        except RecordingError as exc:
            if self.recording_stopped is None:
                self._recording_failed(exc)

    def replace_core(self, core: RackCore) -> None:
        """Feed ``core`` from now on (a replay's backward seek rebuilt it); interval observers follow it."""
        for interval_s, callback in self._intervals:
            core.every(interval_s, callback)
        self.core = core

    async def drained(self) -> None:
        """Return once every event emitted so far has been handled (recorded and ingested)."""
        await self.queue.join()

    async def emit(self, event: Event) -> None:
        await self.queue.put(event)

    async def _produce(self) -> None:
        self._tasks = [
            asyncio.create_task(run_collector(c, self.emit, lambda: self.core.now)) for c in self.collectors
        ]
        try:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        finally:
            await self.queue.put(_DONE)

    async def _flush_periodically(self, interval_s: float) -> None:
        assert self.recorder is not None
        while not self.recorder.closed:
            await self.clock.sleep(interval_s)
            if not self.recorder.closed:
                self._recorder_call(self.recorder.flush)

    async def run(self) -> None:
        producer = asyncio.create_task(self._produce())
        flusher = None
        if self.recorder is not None and self.flush_interval_s:
            flusher = asyncio.create_task(self._flush_periodically(self.flush_interval_s))
        turns = LoopTurns(self.loop_share) if self.loop_share is not None else None
        try:
            while True:
                waits = self.queue.empty()
                item = await self.queue.get()
                try:
                    if item is _DONE:
                        break
                    if turns is None:
                        await self._handle_responsively(item)  # type: ignore[arg-type]
                    else:
                        if waits:
                            turns.restart()  # the loop was free while the queue was empty
                        await self._handle_sharing(item, turns)  # type: ignore[arg-type]
                finally:
                    self.queue.task_done()
        finally:
            producer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await producer
            if flusher is not None:
                flusher.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await flusher
            self._end_if_interrupted()
            if self.recorder is not None:
                self._recorder_call(self.recorder.close)

    async def _handle_responsively(self, event: Event) -> None:
        """:meth:`handle`, after filling a long gap in run time in slices that let the loop in between
        (a stop then ends the run at once: the event after the gap is left out)."""
        while not self.core.advance_toward(event.t, self._ticks_per_slice()):
            await asyncio.sleep(0)
            if self.stopped:
                return
        self.handle(event)

    async def _handle_sharing(self, event: Event, turns: LoopTurns) -> None:
        """:meth:`handle`, letting the loop in whenever a slice of work is over: between ticks, between a
        fleet's racks at a verdict tick, and after the event (a stop ends the run there: the event is
        left out, as after a gap)."""
        steps = self.core.advance_steps(event.t)
        try:
            for _ in steps:
                if turns.slice_over():
                    await self._give_turn(turns)
                    if self.stopped:
                        return
        finally:
            steps.close()  # stopped part way: the tick it was in counts as done
        self.handle(event)
        if turns.slice_over():
            await self._give_turn(turns)

    @staticmethod
    async def _give_turn(turns: LoopTurns) -> None:
        """A sleep of real time, not ``sleep(0)``: every callback a key or a frame is made of runs in it
        (longer while a key is on its way: :class:`~tokenwatch.base.loop_share.InputHold`)."""
        await turns.pause()

    def _ticks_per_slice(self) -> int:
        """Ticks filled between yields: fewer where interval observers run (a headless line and a JSONL
        snapshot each), so a slice is at most about one of them and Ctrl-C is answered at once (500
        ticks of 1-s snapshots were seconds of work on a loaded machine)."""
        if not self._intervals:
            return _TICKS_PER_SLICE
        shortest = min(interval_s for interval_s, _ in self._intervals)
        return max(1, min(_TICKS_PER_SLICE, int(shortest / self.core.config.tick_s)))

    def handle(self, event: Event) -> None:
        """Record, then ingest (the core calls interval observers due before the event's time first)."""
        if self.recorder is not None and self.recording_stopped is None:
            recorder = self.recorder
            self._recorder_call(lambda: recorder.write(event))
        self.events_seen += 1
        self.core.ingest(event)
        for callback in self._event_observers:
            callback(event)
        if isinstance(event, RunEnded) and self.stop_on_run_end:
            self.stop()

    def stop(self) -> None:
        """Stop the collectors; events already queued are still handled, then ``run`` returns. A run
        that has started and not ended is then ended as interrupted (see :meth:`_end_if_interrupted`)."""
        self.stopped = True
        if self.core.started and not self.core.ended:
            self.interrupted = True
        for task in self._tasks:
            task.cancel()

    def quit(self) -> None:
        """The engineer quit the dashboard: a run being made is interrupted (:meth:`stop`); a replay or
        the demo (:attr:`quit_stops`) stops where it is, the run not ended, so nothing calls it
        interrupted. A recording made of it still ends, as interrupted: the copy goes no further."""
        if self.stopped:
            return
        core = self.core
        if self.quit_stops is None or not core.started or core.ended:
            self.stop()
            return
        self.left_early = True
        self.stopped = True
        for task in self._tasks:
            task.cancel()

    def _end_if_interrupted(self) -> None:
        """Once the queue is done: the run an interrupt cut ends here, unless a collector ended it on its
        way out (a watch records its own ``RunEnded(reason="interrupted")``). A replay or demo left early
        ends only in its recording (the core's run goes on being the run up to there)."""
        core = self.core
        if self.interrupted and core.started and not core.ended:
            self.handle(RunEnded(core.now, "interrupted"))
        elif self.left_early and self.recorder is not None and self.recording_stopped is None:
            recorder = self.recorder
            self._recorder_call(lambda: recorder.write(RunEnded(core.now, "interrupted")))
