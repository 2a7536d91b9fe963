"""Delivery that never holds up the run: one bounded outbox and one task per receiver.

:meth:`Courier.put` only appends to the outboxes (the session's event loop returns at once); each
receiver's task sends in the background, so a slow or dead receiver delays nothing but its own
messages. A send that fails is retried with backoff (0.5 s, doubling to 30 s) for ``retry_for_s``; then
it is dropped with ONE warning for the outage (the next warning only after a send has arrived again).
An outbox that overflows drops its oldest message, counted in that warning. The run's recording is
never involved: a receiver's failure costs notifications, never data.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from tokenwatch.frontends.notify.notification import Notification
from tokenwatch.frontends.notify.payloads import alertmanager_alert, grouped
from tokenwatch.frontends.notify.receivers import HttpPoster, Receiver, SendError, run_command
from tokenwatch.inputs.notify_config import NotifyConfig

_FIRST_BACKOFF_S = 0.5
_MAX_BACKOFF_S = 30.0
# At exit (the run over, the screen gone) what is left gets at most this long, however long retry_for
# is: a dead receiver must not keep a finished command from returning.
EXIT_WAIT_S = 10.0


@dataclass(slots=True)
class _Outbox:
    receiver: Receiver
    pending: deque[Notification]
    wake: asyncio.Event | None = None
    task: asyncio.Task[None] | None = None
    in_flight: list[Notification] = field(default_factory=list)  # taken from pending, not yet done
    dropped: int = 0  # alerts overflowed, or given up on, since the last warning
    warned: bool = False  # a warning stands for the current outage
    delivered: int = 0
    # Alertmanager: the firing alerts it must keep hearing (key -> (notification, first sent, epoch)).
    active: dict[str, tuple[Notification, float]] = field(default_factory=dict)
    next_resend: float = 0.0


class Courier:
    """Sends notifications to ``receivers``; ``warn`` hears each outage once (one line, no secret)."""

    def __init__(
        self,
        config: NotifyConfig,
        receivers: Sequence[Receiver],
        warn: Callable[[str], None],
        *,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.config = config
        self.warn = warn
        self.wall = wall
        self.boxes = [_Outbox(r, deque()) for r in receivers]
        self._poster = HttpPoster(config.timeout_s)
        self._closing = False
        self._give_up_at: float | None = None  # monotonic deadline while closing

    # ------------------------------------------------------------------ the run's side
    def put(self, notes: Sequence[Notification]) -> None:
        """Queue ``notes`` for every receiver; never waits. Called on the running event loop."""
        if not notes:
            return
        for box in self.boxes:
            for note in notes:
                if len(box.pending) >= self.config.queue:
                    box.pending.popleft()
                    box.dropped += 1
                box.pending.append(note)
            self._start(box)

    @property
    def queued(self) -> int:
        return sum(len(b.pending) for b in self.boxes)

    async def close(self, wait_s: float = EXIT_WAIT_S) -> None:
        """Deliver what is queued (at most ``wait_s`` more), resolve what Alertmanager holds as firing,
        then stop. Runs on any event loop (after the dashboard's has ended, a fresh one)."""
        self._closing = True
        self._give_up_at = time.monotonic() + min(wait_s, self.config.retry_for_s)
        for box in self.boxes:
            self._start(box)
        tasks = [b.task for b in self.boxes if b.task is not None]
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.gather(*tasks, return_exceptions=True)
        for box in self.boxes:
            if box.pending or box.dropped:
                self._warn(box, "not delivered before exit", len(box.pending) + box.dropped)

    # ------------------------------------------------------------------ each receiver's task
    def _start(self, box: _Outbox) -> None:
        loop = asyncio.get_running_loop()
        if box.task is None or box.task.done() or box.task.get_loop() is not loop:
            box.wake = asyncio.Event()
            box.task = loop.create_task(self._work(box), name=f"notify {box.receiver.shown}")
        assert box.wake is not None
        box.wake.set()

    async def _work(self, box: _Outbox) -> None:
        assert box.wake is not None
        while True:
            if not box.pending:
                if self._closing:
                    await self._resolve_active(box)
                    return
                try:
                    async with asyncio.timeout(self._until_resend(box)):
                        await box.wake.wait()
                except TimeoutError:
                    await self._resend(box)
                    continue
            box.wake.clear()
            if self.config.group_wait_s > 0 and not self._closing:
                await asyncio.sleep(self.config.group_wait_s)  # let the rest of a group arrive
            box.in_flight = list(box.pending)
            box.pending.clear()
            try:
                await self._send_batch(box, list(box.in_flight))
            except asyncio.CancelledError:
                # The loop is ending (the dashboard quit): what was not sent yet goes out at close.
                box.pending.extendleft(reversed(box.in_flight))
                raise
            finally:
                box.in_flight = []

    def _until_resend(self, box: _Outbox) -> float | None:
        if box.receiver.kind != "alertmanager" or not box.active:
            return None
        return max(0.0, box.next_resend - time.monotonic())

    async def _send_batch(self, box: _Outbox, batch: list[Notification]) -> None:
        receiver = box.receiver
        if receiver.kind == "alertmanager":
            now = self.wall()
            for note in batch:
                if note.firing and not note.instant:
                    box.active.setdefault(note.key, (note, now))
                else:
                    box.active.pop(note.key, None)
            alerts = [self._am_alert(box, note, now) for note in batch]
            if await self._deliver(box, alerts, len(batch)):
                box.next_resend = time.monotonic() + self.config.resend_s
            box.in_flight.clear()
            return
        for group in grouped(batch):
            body: object = {"text": group.slack_text()} if receiver.kind == "slack" else group.to_json()
            await self._deliver(box, body, len(group.notes))
            done = {id(note) for note in group.notes}  # delivered or given up: never sent twice
            box.in_flight = [note for note in box.in_flight if id(note) not in done]

    def _am_alert(self, box: _Outbox, note: Notification, now: float) -> dict[str, object]:
        started = box.active.get(note.key, (note, now))[1]
        return alertmanager_alert(note, started, now, self.config.resend_s)

    async def _resend(self, box: _Outbox) -> None:
        """Alertmanager hears every firing alert again, before it would expire."""
        now = self.wall()
        body = [
            alertmanager_alert(note, started, now, self.config.resend_s)
            for note, started in box.active.values()
        ]
        box.next_resend = time.monotonic() + self.config.resend_s
        if body:
            await self._deliver(box, body, 0)

    async def _resolve_active(self, box: _Outbox) -> None:
        """At exit: what Alertmanager holds as firing ends now (the run that raised it is over)."""
        if box.receiver.kind != "alertmanager" or not box.active:
            return
        now = self.wall()
        body = []
        for note, started in box.active.values():
            alert = alertmanager_alert(note, started, now, self.config.resend_s)
            alert["endsAt"] = alert_time(now)
            body.append(alert)
        box.active.clear()
        await self._deliver(box, body, 0)

    async def _deliver(self, box: _Outbox, body: object, alerts: int) -> bool:
        """One body, retried with backoff while it may still arrive; True once it has."""
        receiver = box.receiver
        retry_until = time.monotonic() + self.config.retry_for_s
        backoff = _FIRST_BACKOFF_S
        while True:
            give_up = retry_until if self._give_up_at is None else min(retry_until, self._give_up_at)
            try:
                if receiver.kind == "command":
                    await run_command(receiver, body, self.config.timeout_s)
                else:
                    await self._poster.post(receiver, body)
            except SendError as exc:
                left = give_up - time.monotonic()
                if not exc.retry or left <= 0:
                    box.dropped += alerts
                    self._warn(box, receiver.scrub(str(exc)), box.dropped)
                    return False
                await asyncio.sleep(min(backoff, left))
                backoff = min(backoff * 2, _MAX_BACKOFF_S)
                continue
            box.delivered += alerts
            box.warned = False  # arriving again: a later outage is news
            box.dropped = 0
            return True

    def _warn(self, box: _Outbox, why: str, lost: int) -> None:
        if box.warned:
            return
        box.warned = True
        lost_text = f"{lost} alert{'s' * (lost != 1)} not delivered" if lost else "not delivered"
        self.warn(
            f"notify: {box.receiver.shown}: {why}; {lost_text} (retried up to "
            f"{self.config.retry_for_s:g} s); the run and its recording go on"
        )


def alert_time(epoch_s: float) -> str:
    from tokenwatch.frontends.notify.payloads import rfc3339

    return rfc3339(epoch_s)
