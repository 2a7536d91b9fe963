"""What a slow start is doing, on the terminal: ``loading baseline a.jsonl.zst: 43 %`` on stderr while the
terminal would otherwise stay blank (a recording baseline takes ~11 s to read at rack size; a watch reads
its nodes' backlogs, a headless replay plays up to its ``--start``).

Only on a terminal, and only for a load that goes on past :data:`~tokenwatch.base.loading.QUIET_S` (a
quick start stays quiet): the line is rewritten in place at most a few times a second and ends with the
time taken. Where stderr is a file or a pipe nobody watches a blank screen, and its readers (logs,
scripts) get no progress noise. The load itself is a :class:`~tokenwatch.base.loading.Loading`, the
object the dashboard reads too.
"""

from __future__ import annotations

import asyncio
import math
import sys
import time
from collections.abc import Callable
from typing import IO

from tokenwatch.base.loading import Loading

_REDRAW_S = 0.25
_POLL_S = 0.1


class LoadingNote:
    """Call with the share done (0..1) as the load goes; :meth:`done` once it is over."""

    def __init__(
        self,
        what: str | Loading,
        *,
        out: IO[str] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.loading = what if isinstance(what, Loading) else Loading(what, clock)
        self.out = out if out is not None else sys.stderr
        self.clock = self.loading.clock
        self.shown = False
        self._last_drawn = -math.inf
        self._tty = bool(getattr(self.out, "isatty", lambda: False)())

    @property
    def what(self) -> str:
        return self.loading.what

    def __call__(self, fraction: float) -> None:
        self.loading(fraction)
        self.draw()

    def draw(self) -> None:
        """The line as the load stands now (nothing before it is worth saying, or off a terminal)."""
        now = self.clock()
        if not self.loading.worth_saying() or not self._tty or now - self._last_drawn < _REDRAW_S:
            return
        self._write(self.loading.text(), end="")
        self._last_drawn = now
        self.shown = True

    def done(self) -> None:
        """The closing words, where anything was shown (``...: done in 11.2 s``)."""
        self.loading.finish()
        if self.shown:
            self._write(self.loading.done_text())
            self.shown = False

    def stop(self) -> None:
        """The load failed: end the line, so the error is a line of its own."""
        if self.shown:
            self.out.write("\n")
            self.out.flush()
            self.shown = False

    def _write(self, line: str, end: str = "\n") -> None:
        from tokenwatch.base.formatting import printable  # what it names comes from the command line

        self.out.write("\r\x1b[K" + printable(line) + end)  # over the last progress, cleared to its end
        self.out.flush()


async def say_loads(current: Callable[[], Loading | None], out: IO[str] | None = None) -> None:
    """Until cancelled: each load ``current`` names (a session's collectors', polled every 0.1 s) as
    its line on the terminal, closed with its time once another or none is under way."""
    note: LoadingNote | None = None
    try:
        while True:
            loading = current()
            if note is not None and loading is not note.loading:
                note.done()
                note = None
            if loading is not None:
                note = note or LoadingNote(loading, out=out)
                note.draw()
            await asyncio.sleep(_POLL_S)
    finally:
        if note is not None:
            note.done()
