"""One session: collectors -> one bounded queue -> recorder + core -> observers.

Every front end runs through this: the TUI, the headless logger and the Prometheus exporter only
read the core it feeds. Collectors run side by side on one event loop; one that fails becomes a
``Notice`` in the stream and never cancels its siblings.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from tokenwatch.clock import Clock, MonotonicClock
from tokenwatch.core import RackCore
from tokenwatch.events import Event, Notice, RunEnded, RunStarted
from tokenwatch.recording import RecordingWriter

Emit = Callable[[Event], Awaitable[None]]


class Collector(Protocol):
    """A source of events. ``run`` returns when the source is exhausted; cancel it to stop early."""

    name: str

    async def run(self, emit: Emit) -> None: ...


@dataclass(slots=True)
class _IntervalObserver:
    interval_s: float
    callback: Callable[[float], None]
    next_k: int = 1

    def fire_before(self, t: float) -> None:
        """Call back for every boundary k*interval strictly before ``t`` not yet reported."""
        while self.next_k * self.interval_s < t:
            self.callback(self.next_k * self.interval_s)
            self.next_k += 1


_DONE = object()


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
    ) -> None:
        """``flush_interval_s=None`` turns the recorder's timer flush off (unpaced runs: flushes by size
        alone keep the output byte-identical from run to run)."""
        self.core = core
        self.collectors = list(collectors)
        self.recorder = recorder
        self.clock = clock or MonotonicClock()
        self.queue: asyncio.Queue[object] = asyncio.Queue(maxsize=queue_size)
        self.flush_interval_s = flush_interval_s
        self._interval_observers: list[_IntervalObserver] = []
        self._event_observers: list[Callable[[Event], None]] = []
        self._tasks: list[asyncio.Task[None]] = []
        self.events_seen = 0
        self.stopped = False
        # A seekable replay keeps its session open past the run's end, so it can seek back.
        self.stop_on_run_end = True

    def every(self, interval_s: float, callback: Callable[[float], None]) -> None:
        """``callback(T)`` at each multiple T of ``interval_s`` of run time, once all events to T are in."""
        self._interval_observers.append(_IntervalObserver(interval_s, callback))

    def on_event(self, callback: Callable[[Event], None]) -> None:
        self._event_observers.append(callback)

    async def emit(self, event: Event) -> None:
        await self.queue.put(event)

    async def _run_collector(self, collector: Collector) -> None:
        try:
            await collector.run(self.emit)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a failing source is news for the engineer, not a crash
            name = getattr(collector, "name", type(collector).__name__)
            await self.emit(Notice(self.core.now, "error", f"{name} stopped: {exc}", source=name))

    async def _produce(self) -> None:
        self._tasks = [asyncio.create_task(self._run_collector(c)) for c in self.collectors]
        try:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        finally:
            await self.queue.put(_DONE)

    async def _flush_periodically(self, interval_s: float) -> None:
        assert self.recorder is not None
        while not self.recorder.closed:
            await self.clock.sleep(interval_s)
            if not self.recorder.closed:
                self.recorder.flush()

    async def run(self) -> None:
        producer = asyncio.create_task(self._produce())
        flusher = None
        if self.recorder is not None and self.flush_interval_s:
            flusher = asyncio.create_task(self._flush_periodically(self.flush_interval_s))
        try:
            while True:
                item = await self.queue.get()
                if item is _DONE:
                    break
                self.handle(item)  # type: ignore[arg-type]
        finally:
            producer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await producer
            if flusher is not None:
                flusher.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await flusher
            if self.recorder is not None:
                self.recorder.close()

    def handle(self, event: Event) -> None:
        """Record, advance time (interval observers see the state as of their boundary), ingest."""
        if self.recorder is not None:
            self.recorder.write(event)
        self.events_seen += 1
        # ingest() advances time itself; advancing first only lets interval observers fire in between.
        if self._interval_observers and not isinstance(event, RunStarted) and self.core.started:
            self.core.advance(event.t)
            for observer in self._interval_observers:
                observer.fire_before(event.t)
        self.core.ingest(event)
        for callback in self._event_observers:
            callback(event)
        if isinstance(event, RunEnded) and self.stop_on_run_end:
            self.stop()

    def stop(self) -> None:
        """Stop the collectors; events already queued are still handled, then ``run`` returns."""
        self.stopped = True
        for task in self._tasks:
            task.cancel()
