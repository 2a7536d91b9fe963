"""The dashboard's terminal driver: Textual's Linux driver, made to end when its terminal goes.

When a terminal closes (``tmux kill-session``, a closed SSH window) the kernel hangs the pty up and sends
the foreground process group SIGHUP and SIGCONT. Textual's driver (the pinned version) takes every SIGCONT
for a return from Ctrl-Z and starts application mode a second time: a second writer thread, which dies
on its first write's EIO, after which every write waits forever on that thread's full queue. The app then
deadlocks in its own shutdown, deaf to SIGTERM (its loop never runs the handler again).

Here SIGCONT resumes only what a SIGTSTP suspended, a write whose writer thread has stopped (it does on a
write error) is dropped instead of waited on, and a gone terminal (the writer stopped, a read's error) is
posted to the app as :class:`TerminalGone`, which ends the run as a stop signal does.

A key read here is told to the app's input hold at once (``input_hold``, when the app has one): the
session then stops its ingest at the next step, so the key's trip through the app's queues does not
wait behind slices of it (:class:`tokenwatch.base.loop_share.InputHold`).
"""

from __future__ import annotations

import queue
from typing import Any

from textual import events
from textual.drivers.linux_driver import LinuxDriver
from textual.message import Message

# How often a write that finds the writer's queue full checks whether the writer is still there.
_FULL_QUEUE_RECHECK_S = 0.1


class TerminalGone(Message):
    """The terminal the dashboard draws on is gone (its pty hung up or closed): nobody can see it."""


class TerminalDriver(LinuxDriver):
    """Textual's Linux driver with the terminal's going handled (see the module docstring)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._suspended = False  # by a SIGTSTP (Ctrl-Z), so a SIGCONT resumes
        self._gone = False

    def _sigtstp_application(self, *args: Any) -> None:
        self._suspended = True
        super()._sigtstp_application(*args)

    def _sigcont_application(self, *args: Any) -> None:
        # A SIGCONT that follows no suspension (a hangup sends one) must not start a second application
        # mode over the running one.
        if self._suspended:
            self._suspended = False
            super()._sigcont_application(*args)

    def process_message(self, message: Message) -> None:
        """In the reader thread: a key holds the session's ingest back before it is posted."""
        if isinstance(message, events.Key):
            hold = getattr(self._app, "input_hold", None)
            if hold is not None:
                hold.key_arrived()
        super().process_message(message)

    def write(self, data: str) -> None:
        self._enqueue(data)

    def close(self) -> None:
        """End the writer thread after what it was given (while the terminal takes it)."""
        writer = self._writer_thread
        if writer is not None:
            self._enqueue(None)
            writer.join()

    def _enqueue(self, item: str | None) -> None:
        """Hand ``item`` to the writer thread, never waiting on one that has stopped: Textual's thread
        ends on a write error (EIO from a hung-up pty), and its full queue would be waited on forever."""
        writer = self._writer_thread
        while writer is not None and not self._gone:
            if not writer.is_alive():
                self._terminal_gone()
                return
            try:
                writer._queue.put(item, timeout=_FULL_QUEUE_RECHECK_S)
            except queue.Full:
                continue
            return

    def run_input_thread(self) -> None:
        """Textual's input loop; a read error (EIO: the pty's other end closed) is the terminal gone,
        not a crash to show (there is nowhere to show it). Textual's wrapper reports anything else."""
        try:
            super().run_input_thread()
        except OSError:
            self._terminal_gone()

    def _terminal_gone(self) -> None:
        """From any thread: drop what is still to be written and tell the app, once (Textual's
        ``post_message`` is thread-safe)."""
        if not self._gone:
            self._gone = True
            self._app.post_message(TerminalGone())
