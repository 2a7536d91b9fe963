"""What a slow start is doing: ``loading baseline a.jsonl.zst: 43 %`` on stderr while the terminal would
otherwise stay blank (a recording baseline takes ~11 s to read at rack size).

Only on a terminal, and only for a load that goes on past :data:`QUIET_S` (a quick start stays quiet):
the line is rewritten in place at most a few times a second and ends with the time taken. Where stderr is
a file or a pipe nobody watches a blank screen, and its readers (logs, scripts) get no progress noise.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable
from typing import IO

QUIET_S = 0.5  # a load shorter than this says nothing
_REDRAW_S = 0.25


class LoadingNote:
    """Call with the share done (0..1) as the load goes; :meth:`done` once it is over."""

    def __init__(
        self,
        what: str,
        *,
        out: IO[str] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.what = what
        self.out = out if out is not None else sys.stderr
        self.clock = clock
        self.started = clock()
        self.shown = False
        self._last_drawn = -math.inf
        self._tty = bool(getattr(self.out, "isatty", lambda: False)())

    def __call__(self, fraction: float) -> None:
        now = self.clock()
        if now - self.started < QUIET_S:
            return
        if not self._tty or now - self._last_drawn < _REDRAW_S:
            return
        share = min(1.0, max(0.0, fraction))
        self._write(f"{self.what}: {share * 100:3.0f} %", end="")
        self._last_drawn = now
        self.shown = True

    def done(self) -> None:
        """The closing words, where anything was shown (``...: done in 11.2 s``)."""
        if self.shown:
            self._write(f"{self.what}: done in {self.clock() - self.started:.1f} s")
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
